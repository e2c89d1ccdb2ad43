"""`cas retire` and `cas erase` (and `cas show` of a retired version): exit codes and exact
output; the erase preview's wording, and an erasure that matches nothing."""

import json

import pytest

import cas
from support.citing import snapshot as everything
from support.cli import commit_people

OPERATOR = "Grace <grace@example.com>"


@pytest.fixture
def run(run, monkeypatch):
    monkeypatch.setenv("CAS_USER", OPERATOR)  # retiring and erasing are an operator's work
    return run


@pytest.fixture
def repo(run, tmp_path):
    return commit_people(run, tmp_path)


def test_retire_and_show(run, repo):
    r = run("retire", "evals", "1", "--cause", "invalid_labels", "--note", "labels were swapped")
    retired = repo.retirement("evals", 1)
    assert (r.exit_code, r.stdout) == (0, f"retired evals@1: INVALID_LABELS at "
                                          f"{retired.retired_at}\n")
    v = repo.version("evals", 1)
    r = run("show", "evals@1")
    assert r.stdout == (
        f"evals@1: 2 cases (+2 -0) {v.content_digest}\n"
        "state:     RETIRED\n"
        f"retired:   INVALID_LABELS at {retired.retired_at} by {OPERATOR}\n"
        "note:      labels were swapped\n"
        "parent:    -\n"
        "operation: commit\n"
        f"author:    {v.author}\n"
        f"sealed at: {v.sealed_at}\n")
    shown = json.loads(run("--json", "show", "evals", "1").stdout)
    assert shown["state"] == "RETIRED" and shown["item_count"] == 2
    assert (shown["retirement_cause"], shown["retired_at"], shown["retirement_note"],
            shown["retired_by"]) == ("INVALID_LABELS", retired.retired_at,
                                     "labels were swapped", OPERATOR)
    assert json.loads(run("--json", "show", "evals", "2").stdout)["state"] == "ACTIVE"
    # every read of it is refused, with the code and reason
    for args in (("items", "evals", "1"), ("case", "evals", "1", repo.items("evals", 2).items[0]),
                 ("pin", "evals", "1"), ("diff", "evals", "1", "2")):
        r = run("--json", *args)
        assert r.exit_code == 5 and r.stdout == ""
        error = json.loads(r.stderr)["error"]
        assert (error["code"], error["reason"], error["state"], error["retirement_cause"]) == (
            "FAILED_PRECONDITION", "EVALUATION_DATASET_VERSION_RETIRED", "RETIRED",
            "INVALID_LABELS")
    r = run("retire", "evals", "1", "--cause", "contaminated", "--note", "again")
    assert r.exit_code == 5 and r.stderr == (
        f"cas: error: evals@1 is already retired (INVALID_LABELS at {retired.retired_at}); a "
        "retirement is permanent and its first cause stands\n")


@pytest.mark.parametrize("args, code, message", [
    (("retire", "evals", "2", "--cause", "PERSON_ERASED", "--note", "x"), 2,
     "the cause PERSON_ERASED cannot be given by hand: it is recorded by `cas erase`, which also "
     "deletes the person's data; accepted: CONTAMINATED, INVALID_LABELS, OPERATOR_REQUEST"),
    (("retire", "evals", "2", "--cause", "stale", "--note", "x"), 2,
     "unknown retirement cause 'stale'; accepted: CONTAMINATED, INVALID_LABELS, "
     "OPERATOR_REQUEST (any letter case)"),
    (("retire", "evals", "2", "--cause", "contaminated", "--note", ""), 2,
     "a retirement needs a note saying why: 1-4096 characters"),
    (("retire", "evals", "7", "--cause", "contaminated", "--note", "x"), 3,
     "dataset 'evals' has no version 7"),
    (("erase", "--person", "p-1", "--confirm-token", "ct-" + "0" * 32), 5,
     "the confirm token does not match this request (it was issued for a different request, or "
     "what it previewed has changed); run the command without --confirm-token to preview again"),
])
def test_refusals_change_nothing(run, repo, args, code, message):
    before = {k: repo.backend.get(k) for k in repo.backend.list("")}
    r = run(*args)
    assert (r.exit_code, r.stdout, r.stderr) == (code, "", f"cas: error: {message}\n")
    assert {k: repo.backend.get(k) for k in repo.backend.list("")} == before


def test_erase_preview_then_confirm(run, repo):
    preview = json.loads(run("--json", "erase", "--person", "p-2").stdout)
    assert sorted(preview) == ["cases", "cassettes", "citing_experiments", "citing_scores",
                               "confirm_token",
                               "matched", "person", "proposals_to_delete", "reviews", "runs",
                               "suite_results", "versions_to_retire", "warnings"]
    assert preview["matched"] is True and preview["warnings"] == []
    assert len(preview["cases"]) == 2 and preview["runs"] == preview["reviews"] == []
    assert [(v["dataset"], v["number"], v["state"]) for v in preview["versions_to_retire"]] == \
        [("evals", 1, "ACTIVE"), ("evals", 2, "ACTIVE")]
    human = run("erase", "--person", "p-2").stdout
    # the person as typed, in the future tense: nothing is deleted before the confirmation
    assert human.splitlines()[0] == ("erasing p-2 will delete 2 cases, 0 runs and 0 reviews, "
                                     "and will retire 2 versions:")
    assert human.splitlines()[-1] == ("confirm with: cas erase --person p-2 "
                                      f"--confirm-token {preview['confirm_token']}")
    r = run("--json", "erase", "--person", "p-2", "--confirm-token", preview["confirm_token"])
    assert r.exit_code == 0
    done = json.loads(r.stdout)
    assert done["id"] == preview["confirm_token"] and done["person"] == preview["person"]
    assert done["retired"] == [{"dataset": "evals", "number": 1},
                               {"dataset": "evals", "number": 2}]
    assert "p-2" not in r.stdout
    assert json.loads(run("--json", "fsck").stdout)["ok"] is True


@pytest.fixture
def cli_repo(repo):
    """`repo` again (made by the operator), by the name the erase wording tests use."""
    return repo


def test_cli_erase_preview_wording(run, cli_repo):
    one = cas.encode_case({"input": "a", "person": "p-1"}).case_id
    v1, v2 = cli_repo.version("evals", 1), cli_repo.version("evals", 2)
    preview = json.loads(run("--json", "erase", "--person", "p-1").stdout)
    assert sorted(preview) == ["cases", "cassettes", "citing_experiments", "citing_scores",
                               "confirm_token", "matched", "person", "proposals_to_delete",
                               "reviews", "runs",
                               "suite_results", "versions_to_retire", "warnings"]
    assert (preview["matched"], preview["warnings"]) == (True, [])
    r = run("erase", "--person", "p-1")
    assert (r.exit_code, r.stderr) == (0, "")
    assert r.stdout == (
        "erasing p-1 will delete 1 case, 0 runs and 0 reviews, and will retire 2 versions:\n"
        f"  will retire evals@1 (ACTIVE, {v1.item_count} cases)\n"
        f"  will retire evals@2 (ACTIVE, {v2.item_count} cases)\n"
        f"  will delete case {one}\n"
        f"confirm with: cas erase --person p-1 --confirm-token {preview['confirm_token']}\n")
    assert "deleted" not in r.stdout and "is deleted" not in r.stdout
    two = sorted(cas.encode_case({"input": x, "person": "p-2"}).case_id for x in "bc")
    cli_repo.retire("evals", 1, "CONTAMINATED", "leaked")
    r = run("erase", "--person", "p-2")
    token = json.loads(run("--json", "erase", "--person", "p-2").stdout)["confirm_token"]
    assert r.stdout == (
        "erasing p-2 will delete 2 cases, 0 runs and 0 reviews, and will retire 2 versions:\n"
        "  will retire evals@1 (RETIRED, 2 cases)\n"
        "  will retire evals@2 (ACTIVE, 3 cases)\n"
        f"  will delete case {two[0]}\n  will delete case {two[1]}\n"
        f"confirm with: cas erase --person p-2 --confirm-token {token}\n")
    done = run("erase", "--person", "p-2", "--confirm-token", token)
    e = cli_repo.erasures()[0]
    packs = f"{e.packs_rewritten} pack{'' if e.packs_rewritten == 1 else 's'}"
    assert done.stdout == (f"erased {e.person} at {e.erased_at}: 2 cases, 0 runs, 0 reviews; "
                           f"{e.objects_deleted} objects deleted from {packs}; "
                           "retired: evals@1, evals@2\n")


def test_cli_erase_of_nothing_warns_and_writes_nothing(run, cli_repo):
    before = everything(cli_repo)
    warning = ("cas: warning: nothing matched who@example.com: no case, run or review names "
               "this person id; confirming erases nothing and records nothing\n")
    r = run("erase", "--person", "who@example.com")
    assert (r.exit_code, r.stdout, r.stderr) == (
        0, "nothing to erase: nothing matched who@example.com; no record will be written\n",
        warning)
    r = run("--json", "erase", "--person", "who@example.com")
    shown = json.loads(r.stdout)
    assert (r.exit_code, r.stderr, shown["matched"]) == (0, warning, False)
    r = run("--json", "erase", "--person", "who@example.com", "--confirm-token",
            shown["confirm_token"])
    assert (r.exit_code, r.stdout) == (5, "")
    assert json.loads(r.stderr)["error"] == {
        "code": "FAILED_PRECONDITION", "reason": "NOTHING_TO_ERASE",
        "message": "nothing matched who@example.com: no case, run or review names this person "
                   "id; nothing was erased and no erasure was recorded"}
    assert everything(cli_repo) == before


def test_erase_yes_previews_and_erases_in_one_call(run, repo):
    preview = json.loads(run("--json", "erase", "--person", "p-2").stdout)
    r = run("erase", "--person", "p-2", "--yes")
    assert r.exit_code == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == ("erasing p-2 will delete 2 cases, 0 runs and 0 reviews, and will "
                        "retire 2 versions:")
    assert not any(line.startswith("confirm with:") for line in lines)
    assert lines[-1].startswith("erased ") and "2 cases" in lines[-1]
    assert repo.erasures()[0].id == preview["confirm_token"]
    again = json.loads(run("--json", "erase", "--person", "p-1", "--yes").stdout)
    assert again["preview"]["matched"] is True and again["id"] == again["preview"][
        "confirm_token"]
    r = run("erase", "--person", "nobody", "--yes")  # nothing matched: nothing to confirm
    assert r.exit_code == 0 and r.stdout.startswith("nothing to erase")
