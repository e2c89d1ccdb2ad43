"""Repository settings (cas/repo/settings.py): the content policy per dataset (a repository
default plus a dataset's override, each a revision of the one settings log, so two datasets
with different policies are promoted at the same time without flipping a global setting) and
the eligibility rule promotion needs, each read in one request however many revisions."""

from __future__ import annotations

import io

import msgspec
import pytest

import cas
from cas.errors import CasError
from cas.format.keys import settings_key
from cas.format.records import Settings, format_record_file
from cas.repo import settings
from support.backends import Counting
from support.lifecycle import jsonl, keys, review, run_obj, subject


@pytest.fixture
def two(mem, as_reviewer):
    """r-1 imported and reviewed; datasets `a` and `b`."""
    mem.import_runs(io.BytesIO(jsonl(run_obj("r-1", 1))))
    ann = review(mem, "r-1")
    mem.create_dataset("a")
    mem.create_dataset("b")
    return mem, ann


def test_two_datasets_promote_the_same_run_under_their_own_policies_at_once(two):
    repo, ann = two
    repo.set_content_policy(["tool_results"])                 # the default
    repo.set_content_policy(["input"], dataset="b")           # b's override
    assert repo.content_policy("a").withheld == ["tool_results"]
    assert (repo.content_policy("b").withheld, repo.content_policy("b").overridden) == (
        ["input"], True)
    # both staged before either is sealed: neither preview depends on a global switch
    pa = repo.promote("a", [subject("r-1", ann)], "ka")
    pb = repo.promote("b", [subject("r-1", ann)], "kb")
    assert list(pa["withheld"].values()) == [["tool_results"]]
    assert list(pb["withheld"].values()) == [["input"]]
    repo.seal("b", pb["confirm_token"])
    repo.seal("a", pa["confirm_token"])
    [ca] = repo.items("a", 1).items
    [cb] = repo.items("b", 1).items
    assert ca != cb  # one run, frozen under two policies: two cases
    case_a, case_b = repo.case("a", 1, ca), repo.case("b", 1, cb)
    assert case_a.input is not None and case_b.input is None
    assert all("result" not in s for s in case_a.steps)
    assert any("result" in s for s in case_b.steps)
    assert repo.fsck().ok


def test_an_override_that_inherits_follows_the_default_again(two):
    repo, _ = two
    repo.set_content_policy(["output"], dataset="a")
    repo.set_content_policy(["metadata"])
    assert repo.content_policy("a").withheld == ["output"]  # an override outlives a new default
    back = repo.set_content_policy(None, dataset="a")
    assert (back.withheld, back.dataset) == (None, "a")
    policy = repo.content_policy("a")
    assert (policy.withheld, policy.overridden, policy.source.revision) == (["metadata"], False, 2)
    assert repo.settings().withheld == ["metadata"]
    repo.set_content_policy([], dataset="a")  # an override may copy everything
    assert repo.content_policy("a").withheld == [] and repo.content_policy("b").withheld == [
        "metadata"]


@pytest.mark.parametrize("call, code", [
    (lambda r: r.set_content_policy(["input"], dataset="nope"), "NOT_FOUND"),
    (lambda r: r.set_content_policy(None), "INVALID_ARGUMENT"),
    (lambda r: r.set_content_policy(["secrets"], dataset="a"), "INVALID_ARGUMENT"),
    (lambda r: r.set_content_policy(["input"], dataset="Bad Name"), "INVALID_ARGUMENT"),
])
def test_bad_policies_are_refused_and_store_nothing(two, call, code):
    repo, _ = two
    before = keys(repo)
    with pytest.raises(CasError) as info:
        call(repo)
    assert info.value.code == code
    assert keys(repo) == before


def test_a_revision_written_before_overrides_reads_as_the_default(mem):
    old = Settings(revision=1, withheld=["input"], author="a", edited_at="t")
    data = format_record_file(old)
    assert b"dataset" not in data  # the bytes an older cas wrote
    mem.backend.put_if_absent(settings_key(1), data)
    mem.create_dataset("a")
    policy = mem.content_policy("a")
    assert (policy.withheld, policy.overridden, policy.source.dataset) == (
        ["input"], False, msgspec.UNSET)
    assert mem.fsck().ok


def test_the_policy_in_force_costs_one_read_however_many_revisions(mem):
    """Revisions are immutable: a context reads each once, and then one probe (of the number
    after the newest it knows) tells it nothing new was written (issue 16: each promotion
    probed every settings revision)."""
    mem.create_dataset("a")
    for i in range(12):
        mem.set_content_policy(["input"] if i % 2 else ["output"], dataset="a" if i % 3 else None)
    counting = Counting(mem.backend)
    repo = cas.Repository(counting)
    first = repo.content_policy("a")
    counting.calls.clear()
    assert repo.content_policy("a") == first and repo.settings() == mem.settings()
    assert sum(counting.calls.values()) == 2, counting.calls  # one probe for each call
    mem.set_content_policy(["metadata"], dataset="a")  # written by another context
    assert repo.content_policy("a").withheld == ["metadata"]
    assert repo.set_content_policy(["tool_results"], dataset="a").revision == 14


def test_content_policy_refuses_unknown_classes(mem):
    before = keys(mem)
    with pytest.raises(cas.InvalidArgument) as info:
        mem.set_content_policy(["input", "secrets"])
    assert info.value.message == ("unknown content class 'secrets'; accepted: input, output, "
                                  "tool_arguments, tool_results, metadata")
    assert keys(mem) == before and mem.settings() is None


def test_the_eligibility_rule_is_a_setting_with_revisions(as_reviewer, staged):
    repo, anns = staged
    default = repo.eligibility()
    assert (default.revision, default.metric, default.accepted) == (
        0, settings.DEFAULT_METRIC, list(settings.DEFAULT_ACCEPTED))
    rule = repo.set_eligibility("quality", ["good", "great", "good"])
    assert (rule.revision, rule.metric, rule.accepted) == (1, "quality", ["good", "great"])
    assert repo.eligibility() == rule
    with pytest.raises(cas.FailedPrecondition) as info:  # the old judgment is on another metric
        repo.promote("evals", [subject("r-0", anns["r-0"])], "k")
    assert info.value.reason == "REVIEW_WRONG_METRIC"
    good = review(repo, "r-0", metric="quality", label="great")
    assert repo.promote("evals", [subject("r-0", good)], "k2")["changes"]
    for bad in (("", ["x"]), ("m", []), ("m", "good")):
        with pytest.raises(cas.InvalidArgument):
            repo.set_eligibility(*bad)


def test_the_default_policy_and_its_source(mem):
    assert mem.settings() is None and mem.content_policy() == settings.ContentPolicy([], None)
    first = mem.set_content_policy(["output", "input", "input"], author="ops")
    assert (first.revision, first.withheld, first.author) == (1, ["input", "output"], "ops")
    assert mem.settings() == first
    policy = mem.content_policy()
    assert (policy.withheld, policy.source, policy.overridden) == (["input", "output"], first,
                                                                   False)
    with pytest.raises(cas.InvalidArgument) as info:  # only an override can follow the default
        mem.set_content_policy(None)
    assert "only a dataset's override can follow it" in info.value.message
    with pytest.raises(cas.NotFound):  # an override is of a dataset that exists
        mem.set_content_policy(["input"], dataset="nope")


# -- declared metrics and the rule of K reviewers (issue 36) -----------------------------------
def test_metrics_are_declared_in_revisions_and_the_eligibility_metric_from_the_start(
        as_reviewer, mem):
    assert mem.metrics().revision == 0
    [eligibility] = mem.declared_metrics().values()
    assert (eligibility.name, eligibility.labels) == (
        "dataset_eligibility", ["accepted", "reviewed", "rejected", "needs-work"])
    first = mem.define_metric("tone", ["calm", "curt", "rude"], "How the agent sounds",
                              author="ops")
    assert (first.revision, [m.name for m in first.metrics], first.declared_only) == (
        1, ["tone"], False)
    second = mem.define_metric("accuracy", ["right", "wrong"])
    assert second.revision == 2 and [m.name for m in second.metrics] == ["accuracy", "tone"]
    assert list(mem.declared_metrics()) == ["accuracy", "dataset_eligibility", "tone"]
    assert mem.declared_metrics()["tone"].labels == ["calm", "curt", "rude"]  # declared order
    assert mem.set_declared_only(True).metrics == second.metrics
    before = keys(mem)
    for bad in (("tone", []), ("tone", ["a", "a"]), ("", ["a"]), ("tone", ["a\nb"])):
        with pytest.raises(cas.InvalidArgument):
            mem.define_metric(*bad)
    assert keys(mem) == before


def test_accept_adds_the_label_to_the_rule_and_to_the_declared_labels(as_reviewer, mem):
    rule = mem.accept_label("gold")
    assert rule.accepted == ["accepted", "gold", "reviewed"]
    assert mem.declared_metrics()["dataset_eligibility"].labels == [
        "accepted", "gold", "reviewed", "rejected", "needs-work"]
    mem.define_metric("dataset_eligibility", ["yes", "no"])  # keeps the accepted labels
    assert mem.declared_metrics()["dataset_eligibility"].labels == [
        "yes", "no", "accepted", "gold", "reviewed"]
    mem.accept_label("platinum")
    assert mem.declared_metrics()["dataset_eligibility"].labels[-1] == "platinum"
    assert "platinum" in mem.eligibility().accepted


def test_reviewers_and_rule_are_kept_absent_for_the_one_reviewer_rule(as_reviewer, mem):
    rule = mem.set_eligibility(reviewers=2, rule="majority")
    assert (rule.reviewers, rule.rule, rule.quorum, rule.agreement_rule) == (
        2, "majority", 2, "majority")
    assert mem.set_eligibility(metric="quality", accepted=["good"]).reviewers == 2  # kept
    back = mem.set_eligibility(reviewers=1, rule="unanimous")
    assert back.reviewers is msgspec.UNSET and back.rule is msgspec.UNSET
    before = keys(mem)
    for bad in ({"reviewers": 0}, {"reviewers": 101}, {"reviewers": True},
                {"rule": "plurality"}):
        with pytest.raises(cas.InvalidArgument):
            mem.set_eligibility(**bad)
    assert keys(mem) == before
