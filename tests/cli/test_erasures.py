"""`cas erasures list`: the record of completed erasures, with no identity in it."""

import json

import pytest

from support.cli import commit_people


@pytest.fixture
def repo(run, tmp_path):
    return commit_people(run, tmp_path)


def erase(run, person: str) -> dict:
    token = json.loads(run("--json", "erase", "--person", person).stdout)["confirm_token"]
    r = run("--json", "erase", "--person", person, "--confirm-token", token)
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_erasures_list_shows_each_completed_erasure_oldest_first(run, repo):
    assert json.loads(run("--json", "erasures", "list").stdout) == {"erasures": []}
    assert (run("erasures", "list").exit_code, run("erasures", "list").stdout) == (0, "")
    first, second = erase(run, "p-2"), erase(run, "p-1")
    r = run("--json", "erasures", "list")
    assert json.loads(r.stdout) == {"erasures": [first, second]}
    assert "p-1" not in r.stdout and "p-2" not in r.stdout  # keyed digests, no identities
    assert run("erasures", "list").stdout == line(first, "2 cases") + line(second, "1 case")


def line(e: dict, cases: str) -> str:
    """An erasure as `cas erasures list` shows it: its id, keyed person digest and counts."""
    def n(count: int, noun: str) -> str:
        return f"{count} {noun}" + ("" if count == 1 else "s")
    retired = ", ".join(f"{v['dataset']}@{v['number']}" for v in e["retired"]) or "none"
    return (f"{e['id']} {e['person']} at {e['erased_at']}: {cases}, 0 runs, 0 reviews; "
            f"{n(e['objects_deleted'], 'object')} deleted from "
            f"{n(e['packs_rewritten'], 'pack')}; retired: {retired}\n")
