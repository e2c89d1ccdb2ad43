"""Item diffs for review: the markdown of a version diff names each case's run, tenant, first
user message (or `(withheld)`) and reviewer or author, stays under 60,000 characters with
hundreds of changes, cannot be broken by a case's text; a lock diff explains an erasure's move
without listing the erased cases."""

from __future__ import annotations

import re

import pytest

import cas
from cas.format.version_names import Pin
from cas.interop import review_diff
from cas.interop.lockfile import LockEntry
from support.erasure_world import ALICE, build
from support.lifecycle import OPERATOR

pytestmark = pytest.mark.usefixtures("as_operator")

# A message made to break a table and mention people: pipes, backticks, markup, a newline
NASTY = "Hi @team | see `code` <b>bold</b> [link](http://x) *now*\n| --- | injected |"


def _case(n: int, text: str = NASTY) -> dict:
    return {"run_id": f"run-{n:04d}", "tenant": "acme-support", "input": None,
            "steps": [{"type": "message", "role": "user", "content": f"{text} #{n}" * 3}]}


@pytest.fixture
def big(tmp_path):
    """ds@1: 120 cases; ds@2: 20 of them kept and 150 new ones."""
    repo = cas.init(str(tmp_path))
    repo.create_dataset("ds", admission="direct")
    repo.commit("ds", base=None, add=[_case(n) for n in range(120)])
    removed = [cas.encode_case(_case(n)).case_id for n in range(20, 120)]
    repo.commit("ds", base=1, add=[_case(n) for n in range(1000, 1150)], remove=removed)
    return repo


def test_a_diff_of_hundreds_of_cases_stays_under_the_comment_limit(big):
    diff = review_diff.version_diff(big, "ds", 1, 2)
    assert (diff.added, diff.removed, diff.old_count, diff.new_count) == (150, 100, 120, 170)
    assert len(diff.added_rows) == 100 and len(diff.removed_rows) == 100
    text = review_diff.markdown(diff)
    assert len(text) < review_diff.MAX_CHARS
    assert "**+150** added" in text and "**\u2212100** removed" in text
    assert "_showing the first 100 of 150 added (in case id order);" in text
    assert "showing the first 100 of 100" not in text  # every removal is listed
    rows = [line for line in text.splitlines() if line.startswith("| + ") or
            line.startswith("| \u2212 ")]
    assert len(rows) == 200
    # no case's text adds a column, a mention or markup
    assert all(line.count("|") - line.count("\\|") == 7 for line in rows)
    assert "@team" not in text and "&#64;team" in text
    assert "<b>" not in text and "\\<b\\>" in text
    # every shown row names its run and tenant, and how the case came in
    assert all("run-" in line and "acme-support" in line and "committed by " in line
               for line in rows)
    assert len(review_diff.markdown(review_diff.version_diff(big, "ds", 1, 2, limit=150))) > \
        len(text)  # --limit shows more


def test_the_limit_holds_whatever_the_cases_hold(tmp_path):
    """Escapes count toward a cell's width: 200 cases made only of characters that need one
    (`@` is five characters as written) still make a comment under the limit."""
    repo = cas.init(str(tmp_path))
    repo.create_dataset("worst", admission="direct")

    def case(n):
        return {"run_id": "|" * 300 + str(n), "tenant": "@" * 300, "input": None,
                "steps": [{"type": "message", "role": "user", "content": "@" * 500 + str(n)}]}
    repo.commit("worst", base=None, add=[case(n) for n in range(100)])
    repo.commit("worst", base=1, add=[case(n) for n in range(100, 300)],
                remove=[cas.encode_case(case(n)).case_id for n in range(100)])
    text = review_diff.markdown(review_diff.version_diff(repo, "worst", 1, 2))
    assert text.count("\n| ") == 200 + 2  # two tables of 100 rows, each under its header row
    assert len(text) < review_diff.MAX_CHARS
    assert review_diff.cell("@" * 10, 12) == "&#64;&#64;\u2026"
    assert review_diff.cell("abc", 3) == "abc" and review_diff.cell("abcd", 3) == "ab\u2026"


def test_reviewed_cases_name_their_reviewer_and_withheld_input_says_so(tmp_path):
    repo = cas.init(str(tmp_path))
    build(repo)  # support@1 -> @2 promotes alice-run-0 and bob-run-2, reviewed by OPERATOR
    diff = review_diff.version_diff(repo, "support", 1, 2)
    assert (diff.added, diff.removed) == (2, 0)
    [row, _] = sorted(diff.added_rows, key=lambda r: r.run_id)
    assert row.run_id == "alice-run-0" and row.tenant == "acme-support"
    assert row.origin.startswith(f"reviewed by {OPERATOR} at 2")
    assert row.first_message.startswith("{")  # the input, which the steps do not hold
    # an erasure deletes the provenance of the versions it retires: a renewal's carried case
    # then names its run's newest review, and says that is what it is
    preview = repo.erase(ALICE)
    repo.erase(ALICE, preview["confirm_token"])
    renewed = repo.renew("support")
    [carried] = review_diff.version_diff(repo, "support", 1, renewed.number).added_rows
    assert carried.run_id == "bob-run-2"
    assert carried.origin == f"run reviewed by {OPERATOR} at " + \
        repo.reviews("bob-run-2")[-1].reviewed_at
    repo.create_dataset("private", admission="direct")
    withheld = {"input": None, "withheld": ["input"], "steps": []}
    repo.commit("private", base=None, add=[{"input": "x"}])
    repo.commit("private", base=1, add=[withheld, {"input": None, "steps": []}])
    rows = review_diff.version_diff(repo, "private", 1, 2).added_rows
    assert sorted(r.first_message or "-" for r in rows) == ["(withheld)", "-"]
    assert "| (withheld) |" in review_diff.markdown(review_diff.version_diff(repo, "private",
                                                                              1, 2))


def test_a_lock_diff_explains_an_erasure_and_lists_added_and_removed_datasets(tmp_path):
    repo = cas.init(str(tmp_path))
    build(repo)
    old = {"support": LockEntry(repo.pin("support", 3)),
           "billing": LockEntry(repo.pin("billing", 1))}
    preview = repo.erase(ALICE)
    erasure = repo.erase(ALICE, preview["confirm_token"])
    renewed = repo.renew("support")
    new = {"support": LockEntry(Pin("support", renewed.number, renewed.content_digest)),
           "billing": LockEntry(repo.pin("billing", 2)),
           "triage": LockEntry(repo.pin("triage", 3))}
    text = review_diff.lock_markdown(repo, old, new)
    assert f"### `support`: `support@3` \u2192 `support@{renewed.number}`" in text
    assert f"- 2 cases removed by erasure `{erasure.id}` at {erasure.erased_at}." in text
    assert "are not listed" in text
    support = text.split("### `support`")[1]
    assert "| + " not in support and "| \u2212 " not in support  # the erased cases: none
    assert "### `billing`: `billing@1` \u2192 `billing@2`" in text and "**+2** added" in text
    assert "### `triage`: added to the lock at `triage@3`" in text
    assert "removed from the lock (was `billing@1`)" in review_diff.lock_markdown(
        repo, old, {"support": old["support"]})
    assert "No dataset pin changed." in review_diff.lock_markdown(repo, old, dict(old))
    assert len(text) < review_diff.MAX_CHARS
    assert re.search(r"^## Dataset changes in `cas.lock`$", text, re.M)
