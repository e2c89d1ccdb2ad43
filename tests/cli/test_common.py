"""What the commands share (cas_cli/common.py): where the repository is (--repo, CAS_REPO,
the nearest .cas), and version numbers in ASCII digits only, as arguments and options."""

import json

import pytest

from support.cli import ITEMS_FORMS, commit_example, error_line, no_latest


@pytest.fixture
def repo(run):
    """Dataset `evals` holds the example cases as version 1: its commit's JSON."""
    return commit_example(run)


def test_commands_outside_a_repository_are_refused(run, tmp_path):
    r = run("fsck")
    assert r.exit_code == 3
    assert "no cas repository" in r.stderr and "cas init" in r.stderr


def test_repo_option_and_env(run, repo, tmp_path, monkeypatch):
    monkeypatch.chdir("/")
    assert run("--repo", str(tmp_path), "dataset", "list").stdout == "evals\n"
    monkeypatch.setenv("CAS_REPO", str(tmp_path))
    assert run("dataset", "list").stdout == "evals\n"


@pytest.mark.parametrize("word", ["-1", "-0", "\u00b2", "\u0661", "\uff11", "1\u00b2",
                                  "99999999999", "1" * 5000])
def test_only_ascii_digits_are_a_version_number(run, repo, word):
    message = no_latest(f"{word!r} is not a version number", *ITEMS_FORMS)
    for args in (("items", "evals", word), ("items", f"evals@{word}")):
        r = run(*args)
        assert (r.exit_code, r.stdout) == (2, "") and r.stderr == error_line(message)
        r = run("--json", *args)
        err = json.loads(r.stderr)["error"]
        assert (r.exit_code, err["code"], err["reason"], err["message"]) == (
            2, "INVALID_ARGUMENT", "VERSION_REQUIRED", message)
    r = run("--json", "diff", "evals", "1", word)
    assert json.loads(r.stderr)["error"]["reason"] == "VERSION_REQUIRED"
    assert run("items", "evals", "0001").exit_code == 0  # ASCII digits with leading zeros


def test_version_options_take_ascii_digits_only(run, repo):
    for args in (("commit", "evals", "--base", "\u00b2"), ("commit", "evals", "--base", "-1"),
                 ("dataset", "show", "evals", "--before", "\u0661")):
        r = run("--json", *args)
        err = json.loads(r.stderr)["error"]
        assert r.exit_code == 2 and err["reason"] == "VERSION_REQUIRED"
        option, value = args[-2:]
        assert err["message"] == (f"{option} {value!r} is not a version number (ASCII "
                                  "digits, e.g. 3)")
    assert run("dataset", "show", "evals", "--before", "2").exit_code == 0
    r = run("--json", "dataset", "show", "evals", "--cursor", "\u0661")  # the typed name
    assert json.loads(r.stderr)["error"]["message"] == (
        "--cursor '\u0661' is not a version number (ASCII digits, e.g. 3)")
    r = run("--json", "dataset", "show", "evals", "--cursor", "2", "--before", "2")
    assert (r.exit_code, json.loads(r.stderr)["error"]["message"]) == (
        2, "--before and --cursor both say where the page starts; give one")


# -- paging: one shape for every listing (docs/cli.md, "Paging") ---------------------------
PAGED = {  # each paged listing, and its old paging key kept as an alias for one release
    ("items", "evals", "1"): "pagination",
    ("diff", "evals", "1", "3"): "pagination",
    ("runs", "list"): None,
    ("review", "queue"): None,
    ("log",): None,
    ("dataset", "show", "evals"): "next_before",
}


@pytest.fixture
def listings(run, repo, tmp_path):
    """Three versions of `evals` (two commits of three cases each after the example) and three
    recorded runs: every listing has at least three pages of one."""
    from support.cli import run_obj, write_jsonl
    for base, name in ((1, "a"), (2, "b")):
        more = tmp_path / f"{name}.jsonl"
        more.write_text("".join(json.dumps({"input": f"{name} {n}"}) + "\n" for n in range(3)))
        assert run("commit", "evals", "--base", str(base), "--add", str(more)).exit_code == 0
    runs = write_jsonl(tmp_path / "runs.jsonl", *(run_obj(f"r-{i}", i) for i in range(3)))
    assert run("runs", "import", runs).exit_code == 0


@pytest.mark.parametrize("command", list(PAGED), ids=" ".join)
def test_every_paged_listing_has_the_one_cursor_key_on_every_page(run, listings, command):
    pages, cursor = [], None
    while True:
        r = run("--json", *command, "--limit", "1", *(("--cursor", cursor) if cursor else ()))
        assert (r.exit_code, r.stderr) == (0, ""), r.stderr
        page = json.loads(r.stdout)
        assert "next_cursor" in page  # on the first, every middle and the last page
        pages.append(page)
        cursor = page["next_cursor"]
        assert cursor is None or (isinstance(cursor, str) and cursor)
        if cursor is None:
            break
        assert len(pages) < 50
    assert len(pages) >= 3  # a first, a middle and a last page
    alias = PAGED[command]
    for page in pages:  # the old key says the same, for one release
        if alias == "pagination":
            assert page["pagination"] == {"next_cursor": page["next_cursor"],
                                          "has_more": page["next_cursor"] is not None}
        elif alias == "next_before":
            assert page["next_before"] == (None if page["next_cursor"] is None
                                           else int(page["next_cursor"]))
