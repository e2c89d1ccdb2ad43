"""Human reviews of recorded runs (cas/repo/reviews.py): a preview with a confirm token, then a
save.

Every refusal is checked to leave the repository's key listing unchanged. Tests that touch
storage run on both backends (`location`).
"""

from __future__ import annotations

import io

import msgspec
import pytest

import cas
from cas.repo import userconfig
from cas.storage.backends.memory import MemoryBackend
from support.lifecycle import REVIEWER, jsonl, keys, run_obj

pytestmark = pytest.mark.usefixtures("as_reviewer")


# -- reviews --------------------------------------------------------------------------------
def test_review_preview_saves_nothing_and_the_token_saves(repo):
    repo.import_runs(io.BytesIO(jsonl(run_obj("r-1"))))
    before = keys(repo)
    req = [{"run_id": "r-1", "metric": "dataset_eligibility", "label": "reviewed"}]
    preview = repo.add_reviews(req)
    token = preview["confirm_token"]
    assert token.startswith("ct-") and len(token) == 35
    assert [{k: r[k] for k in ("run_id", "metric", "label", "reviewer")}
            for r in preview["reviews"]] == [dict(req[0], reviewer=REVIEWER)]
    assert keys(repo) == before and repo.reviews("r-1") == []
    assert repo.add_reviews(req)["confirm_token"] == token  # the same request, the same token
    saved = repo.add_reviews(req, confirm_token=token)
    [ann] = saved["annotation_ids"]
    assert ann.startswith("ann-")
    [r] = repo.reviews("r-1")
    assert (r.annotation_id, r.run_id, r.metric, r.label, r.reviewer) == (
        ann, "r-1", "dataset_eligibility", "reviewed", REVIEWER)
    assert r.run == preview["reviews"][0]["run"]
    assert [k for k in keys(repo) if k not in before and not k.startswith("indexes/")] == [
        "reviews/0000000001"]
    [segment] = [k for k in keys(repo) if k.startswith("indexes/reviews/")]  # the batch's index
    assert segment.startswith("indexes/reviews/0000000000-0000000001.")


def test_wrong_or_stale_review_token_is_refused(repo, monkeypatch):
    repo.import_runs(io.BytesIO(jsonl(run_obj("r-1"), run_obj("r-2"))))
    req = [{"run_id": "r-1", "metric": "m", "label": "good"}]
    token = repo.add_reviews(req)["confirm_token"]
    other = repo.add_reviews([dict(req[0], label="bad")])["confirm_token"]
    monkeypatch.setenv("CAS_USER", "Grace <grace@example.com>")
    as_grace = repo.add_reviews(req)["confirm_token"]
    monkeypatch.setenv("CAS_USER", REVIEWER)
    before = keys(repo)
    for wrong in ("ct-" + "0" * 32, other, as_grace, "nonsense", ""):
        with pytest.raises(cas.FailedPrecondition) as info:
            repo.add_reviews(req, confirm_token=wrong)
        assert (info.value.code, info.value.reason) == ("FAILED_PRECONDITION",
                                                        "CONFIRM_TOKEN_MISMATCH")
        assert info.value.message == (
            "the confirm token does not match this request (it was issued for a different "
            "request, or what it previewed has changed); run the command without "
            "--confirm-token to preview again")
    assert keys(repo) == before and repo.reviews("r-1") == []
    assert len({token, other, as_grace}) == 3
    repo.add_reviews(req, confirm_token=token)  # the right token still saves
    assert [r.label for r in repo.reviews("r-1")] == ["good"]


@pytest.mark.parametrize("config_text", [None, "", "{}\n", '{"other": "x"}'])
def test_review_without_a_configured_person_is_refused(repo, monkeypatch, tmp_path, config_text):
    repo.import_runs(io.BytesIO(jsonl(run_obj("r-1"))))
    monkeypatch.delenv("CAS_USER")
    path = tmp_path / "empty-config.json"
    if config_text is not None:
        path.write_text(config_text)
    monkeypatch.setenv("CAS_CONFIG", str(path))
    before = keys(repo)
    req = [{"run_id": "r-1", "metric": "m", "label": "l"}]
    with pytest.raises(cas.FailedPrecondition) as info:
        repo.add_reviews(req)
    assert info.value.reason == "NO_CONFIGURED_PERSON"
    assert info.value.message == (
        'a review needs to know who you are: run `cas config user.name "Your Name"` and '
        '`cas config user.email you@example.com`, or set CAS_USER="Name <email>"')
    assert keys(repo) == before
    userconfig.set_value("user.name", "Grace Hopper")
    userconfig.set_value("user.email", "grace@example.com")
    token = repo.add_reviews(req)["confirm_token"]
    repo.add_reviews(req, confirm_token=token)
    assert [r.reviewer for r in repo.reviews("r-1")] == ["Grace Hopper <grace@example.com>"]


def test_a_batch_of_reviews_is_one_preview_and_one_record(mem):
    ids = [f"r-{i:03d}" for i in range(300)]
    mem.import_runs(io.BytesIO(jsonl(*(run_obj(r, i) for i, r in enumerate(ids)))))
    reqs = [{"run_id": r, "metric": "dataset_eligibility", "label": "reviewed"} for r in ids]
    before = keys(mem)
    token = mem.add_reviews(reqs)["confirm_token"]
    assert keys(mem) == before
    saved = mem.add_reviews(reqs, confirm_token=token)
    assert len(set(saved["annotation_ids"])) == 300
    assert [k for k in keys(mem) if k not in before and not k.startswith("indexes/")] == [
        "reviews/0000000001"]
    assert all(len(mem.reviews(r)) == 1 for r in ids[:5])


def test_annotation_ids_are_unique_even_for_the_same_judgment_at_the_same_instant():
    repo = cas.Repository.create(MemoryBackend(), clock=lambda: "2026-05-01T10:00:00.000000Z")
    repo.import_runs([run_obj("r-1")])
    req = {"run_id": "r-1", "metric": "m", "label": "l"}
    token = repo.add_reviews([req, req])["confirm_token"]
    first = repo.add_reviews([req, req], confirm_token=token)["annotation_ids"]
    assert len(set(first)) == 2
    assert sorted(r.annotation_id for r in repo.reviews("r-1")) == sorted(first)


def test_confirming_the_same_token_again_saves_nothing_new():
    repo = cas.Repository.create(MemoryBackend())
    repo.import_runs([run_obj("r-1")])
    req = {"run_id": "r-1", "metric": "m", "label": "l"}
    token = repo.add_reviews([req])["confirm_token"]
    first = repo.add_reviews([req], confirm_token=token)
    keys_after_first = keys(repo)
    again = cas.Repository(repo.backend).add_reviews([req], confirm_token=token)
    assert again["annotation_ids"] == first["annotation_ids"]
    assert keys(repo) == keys_after_first
    assert [r.annotation_id for r in repo.reviews("r-1")] == first["annotation_ids"]


def test_review_of_an_unknown_run_is_refused(repo):
    repo.import_runs(io.BytesIO(jsonl(run_obj("r-1"))))
    before = keys(repo)
    for reqs in ([{"run_id": "r-404", "metric": "m", "label": "l"}],
                 [{"run_id": "r-1", "metric": "m", "label": "l"},
                  {"run_id": "r-404", "metric": "m", "label": "l"}]):
        with pytest.raises(cas.NotFound) as info:
            repo.add_reviews(reqs)
        assert (info.value.reason, info.value.fields) == ("RUN_NOT_FOUND", {"run_id": "r-404"})
    with pytest.raises(cas.NotFound):
        repo.reviews("r-404")
    assert keys(repo) == before


@pytest.mark.parametrize("req,problem", [
    ({"run_id": "r-1", "metric": "", "label": "l"}, "review metric must be 1-256 printable "
                                                    "characters"),
    ({"run_id": "r-1", "metric": "m", "label": "a\nb"}, "review label must be 1-256 printable "
                                                        "characters; it contains the control "
                                                        "character U+000A at character 1"),
    ({"run_id": "r-1", "metric": "m"}, None),
    ({"run_id": "r-1", "metric": "m", "label": "l", "score": 3}, None),
    ({"run_id": "r-1", "metric": 5, "label": "l"}, None),
])
def test_malformed_review_requests_are_refused(mem, req, problem):
    mem.import_runs(io.BytesIO(jsonl(run_obj("r-1"))))
    with pytest.raises(cas.InvalidArgument) as info:
        mem.add_reviews([req])
    if problem:
        assert info.value.message == problem


def test_an_empty_review_batch_is_refused(mem):
    before = keys(mem)
    with pytest.raises(cas.InvalidArgument):
        mem.add_reviews([])
    assert keys(mem) == before


# -- the queue ----------------------------------------------------------------------------------
def test_the_queue_is_the_unjudged_runs_oldest_first_paged_and_filtered(mem):
    from support.lifecycle import review as judge
    mem.import_runs([run_obj("b-2", 2, tenant="acme", started_at="2026-05-02T00:00:00Z"),
                     run_obj("a-1", 1, tenant="beta", started_at="2026-05-03T00:00:00Z")])
    mem.import_runs([run_obj("c-3", 3, tenant="acme", started_at=None)])
    page = mem.review_queue()
    # import order (ties, within one import, by run id): a-1 and b-2, then c-3
    assert [s["run_id"] for s in page.runs] == ["a-1", "b-2", "c-3"]
    assert page.runs[1] == {"run_id": "b-2", "tenant": "acme",
                            "started_at": "2026-05-02T00:00:00Z", "steps": 4, "tool_calls": 3,
                            "first_user_message": "task 2"}
    first = mem.review_queue(limit=2)
    assert ([s["run_id"] for s in first.runs], first.next_cursor) == (["a-1", "b-2"], "b-2")
    assert [s["run_id"] for s in mem.review_queue(cursor=first.next_cursor).runs] == ["c-3"]
    assert [s["run_id"] for s in mem.review_queue(tenant="acme").runs] == ["b-2", "c-3"]
    # since compares started_at as a time; a run without one does not match (and is named)
    late = mem.review_queue(since="2026-05-02T12:00")
    assert ([s["run_id"] for s in late.runs], late.undated) == (["a-1"], ("c-3",))
    judge(mem, "b-2", label="rejected")  # any judgment on the metric takes it off the queue
    judge(mem, "a-1", metric="tone")      # one on another metric does not
    assert [s["run_id"] for s in mem.review_queue().runs] == ["a-1", "c-3"]
    assert [s["run_id"] for s in mem.review_queue("tone").runs] == ["b-2", "c-3"]
    with pytest.raises(cas.InvalidArgument) as info:
        mem.review_queue(cursor="nope")
    assert info.value.reason == "CURSOR_UNKNOWN"


def test_the_reviews_of_a_run_are_found_by_run_not_by_scanning():
    """The review index keeps the reviews of each run (a promotion asks for them run by run):
    the same answer as filtering every review, oldest first, as batches land."""
    from cas.repo import reviews as reviews_module
    repo = cas.Repository.create(MemoryBackend())
    repo.import_runs(io.BytesIO(jsonl(*(run_obj(f"r-{i}", i) for i in range(6)))))
    for rnd, label in enumerate(("good", "bad", "good")):
        req = [{"run_id": f"r-{i}", "metric": f"m{rnd}", "label": label}
               for i in range(6) if (i + rnd) % 2 == 0]
        token = repo.add_reviews(req, reviewer=REVIEWER)["confirm_token"]
        repo.add_reviews(req, confirm_token=token, reviewer=REVIEWER)
        index = reviews_module.index(repo.context)
        for i in range(6):
            brute = sorted((r for r in index.all() if r.run_id == f"r-{i}"),
                           key=lambda r: (r.reviewed_at, r.annotation_id))
            assert repo.reviews(f"r-{i}") == brute
            assert len(brute) == sum((i + k) % 2 == 0 for k in range(rnd + 1))


# -- comments, corrections, declared labels, K reviewers' queues (issue 36) ----------------------
GRACE = "Grace <grace@example.com>"


def test_a_comment_and_a_correction_are_part_of_the_judgment(mem):
    mem.import_runs(io.BytesIO(jsonl(run_obj("r-1"), run_obj("r-2"))))
    plain = mem.add_reviews([{"run_id": "r-1", "metric": "dataset_eligibility",
                              "label": "needs-work"}])
    assert "comment" not in plain["reviews"][0]  # a plain judgment's token is unchanged
    req = {"run_id": "r-1", "metric": "dataset_eligibility", "label": "needs-work",
           "comment": "wrong policy; mail ada@example.com\nsecond line",
           "correction": {"answer": "refund within 30 days"}}
    preview = mem.add_reviews([req])
    assert preview["confirm_token"] != plain["confirm_token"]
    assert preview["reviews"][0]["comment"] == ("wrong policy; mail [REDACTED:email]\n"
                                                "second line")  # scrubbed before it is shown
    mem.add_reviews([req], preview["confirm_token"])
    [r] = mem.reviews("r-1")
    assert r.comment == "wrong policy; mail [REDACTED:email]\nsecond line"
    assert r.correction == {"answer": "refund within 30 days"}
    plain_saved = mem.review("r-2", "dataset_eligibility", "reviewed")["reviews"][0]
    assert "comment" not in plain_saved and "correction" not in plain_saved
    assert mem.reviews("r-2")[0].comment is msgspec.UNSET


@pytest.mark.parametrize("comment, problem", [
    ("x" * 4097, "1 to 4096 characters, not 4097"), ("   ", "not empty or blank"),
    ("bell\x07", "control character U+0007")])
def test_a_comment_outside_its_limits_is_refused_and_nothing_saved(mem, comment, problem):
    mem.import_runs(io.BytesIO(jsonl(run_obj("r-1"))))
    before = keys(mem)
    with pytest.raises(cas.InvalidArgument) as info:
        mem.review("r-1", "dataset_eligibility", "reviewed", comment=comment)
    assert problem in info.value.message and info.value.reason == "COMMENT_INVALID"
    assert keys(mem) == before
    mem.review("r-1", "dataset_eligibility", "reviewed", comment="y" * 4096)  # the limit holds


def test_a_label_outside_a_declared_metric_is_refused_naming_the_labels(mem):
    mem.import_runs(io.BytesIO(jsonl(run_obj("r-1"))))
    mem.define_metric("tone", ["calm", "curt", "rude"], "How the agent sounds")
    before = keys(mem)
    for metric, label, accepted in (("tone", "polite", ["calm", "curt", "rude"]),
                                    ("dataset_eligibility", "good",
                                     ["accepted", "reviewed", "rejected", "needs-work"])):
        with pytest.raises(cas.InvalidArgument) as info:
            mem.add_reviews([{"run_id": "r-1", "metric": metric, "label": label}])
        assert info.value.reason == "LABEL_NOT_DECLARED"
        assert info.value.fields["accepted"] == accepted
        assert ", ".join(accepted) in info.value.message
    assert keys(mem) == before


def test_an_undeclared_metric_is_warned_about_or_refused_when_declared_only(mem):
    mem.import_runs(io.BytesIO(jsonl(run_obj("r-1"))))
    mem.define_metric("tone", ["calm", "curt"])
    saved = mem.review("r-1", "dataset_eligibilty", "reviewed")
    assert saved["warnings"] == ["metric 'dataset_eligibilty' is not declared; did you mean "
                                 "'dataset_eligibility'? (`cas review metric define` declares "
                                 "it)"]
    assert mem.add_reviews([{"run_id": "r-1", "metric": "tones", "label": "x"}])[
        "warnings"][0].startswith("metric 'tones' is not declared; did you mean 'tone'?")
    mem.set_declared_only(True)
    before = keys(mem)
    with pytest.raises(cas.FailedPrecondition) as info:
        mem.add_reviews([{"run_id": "r-1", "metric": "tones", "label": "x"}])
    assert info.value.reason == "METRIC_NOT_DECLARED" and info.value.fields["closest"] == "tone"
    assert keys(mem) == before
    mem.set_declared_only(False)
    assert mem.review("r-1", "tones", "x")["warnings"]


def test_the_queue_keeps_a_run_until_its_k_judgments_and_mine_hides_what_i_judged(
        mem, monkeypatch):
    mem.import_runs(io.BytesIO(jsonl(*(run_obj(f"r-{i}", i) for i in range(3)))))
    mem.set_eligibility(reviewers=2)

    def queue(**kw):
        return [s["run_id"] for s in mem.review_queue(**kw).runs]
    mem.review("r-0", "dataset_eligibility", "reviewed")
    assert queue() == ["r-0", "r-1", "r-2"]  # one judgment of two
    assert queue(mine=True) == ["r-1", "r-2"]
    monkeypatch.setenv("CAS_USER", GRACE)
    assert queue(mine=True) == ["r-0", "r-1", "r-2"]
    mem.review("r-0", "dataset_eligibility", "rejected")
    assert queue() == queue(mine=True) == ["r-1", "r-2"]
    assert queue(metric="tone") == ["r-0", "r-1", "r-2"]  # another metric needs one judgment
    mem.review("r-1", "tone", "calm")
    assert queue(metric="tone") == ["r-0", "r-2"]


def test_a_correction_becomes_the_expected_answer_and_keeps_the_case_id(mem, monkeypatch):
    from cas.evals.suites.files import from_version
    from support.lifecycle import subject
    mem.import_runs(io.BytesIO(jsonl(run_obj("r-1", 1), run_obj("r-2", 2))))
    mem.create_dataset("plain")
    mem.create_dataset("fixed")
    ann = mem.review("r-1", "dataset_eligibility", "reviewed")["annotation_ids"][0]
    plain = mem.promote("plain", [subject("r-1", ann)], "k-1")
    mem.seal("plain", plain["confirm_token"])
    fixed_ann = mem.review("r-1", "dataset_eligibility", "accepted",
                           correction={"answer": "42"}, comment="the answer is 42")[
        "annotation_ids"][0]
    ann2 = mem.review("r-2", "dataset_eligibility", "reviewed")["annotation_ids"][0]
    fixed = mem.promote("fixed", [subject("r-1", fixed_ann), subject("r-2", ann2)], "k-2")
    mem.seal("fixed", fixed["confirm_token"])
    [plain_case] = from_version(mem, "plain", 1).cases
    by_run = {c.metadata["cas"]["run_id"]: c for c in from_version(mem, "fixed", 1).cases}
    assert by_run["r-1"].id == plain_case.id  # the same case, with or without a correction
    assert plain_case.expected == mem.run("r-1").output
    assert by_run["r-1"].expected == {"answer": "42"}
    assert by_run["r-1"].metadata["cas"]["expected_from"] == fixed_ann
    assert by_run["r-2"].expected == mem.run("r-2").output
    assert "expected_from" not in by_run["r-2"].metadata["cas"]
