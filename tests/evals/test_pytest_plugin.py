"""The pytest plugin: a test marked cas_suite runs once per case of a pinned version (ids are
case ids), the pin is verified at collection, and --cas-record records pass/fail as scores."""

from __future__ import annotations

import textwrap

import pytest

import cas

pytest_plugins = ["pytester"]


@pytest.fixture
def pinned(tmp_path, monkeypatch):
    """A repository with evals@1 (three cases with inputs 1, 2, 3) and its pin."""
    monkeypatch.setenv("CAS_USER", "Ada <ada@example.com>")
    location = str(tmp_path / "repo")
    repo = cas.init(location)
    repo.create_dataset("evals", admission="direct")
    repo.commit("evals", base=None,
                add=[{"input": n, "output": n * 2, "tenant": "acme"} for n in (1, 2, 3)])
    return repo, location, str(repo.pin("evals", 1))


TEST = """
import pytest

@pytest.mark.cas_suite({pin!r})
def test_doubles(cas_case):
    assert cas_case.tenant == "acme"
    assert cas_case.expected == cas_case.input * 2
    assert cas_case.input != 2, "two is the odd one out"
"""


def test_one_test_per_case_with_case_ids(pytester, pinned):
    repo, location, pin = pinned
    pytester.makepyfile(test_suite=TEST.format(pin=pin))
    result = pytester.runpytest("--cas-repo", location, "-v", "-p", "no:randomly")
    result.assert_outcomes(passed=2, failed=1)
    ids = repo.items("evals", 1).items
    for case_id in ids:
        result.stdout.fnmatch_lines([f"*test_doubles?{case_id}?*"])


def test_record_stores_pass_and_fail_as_scores(pytester, pinned):
    repo, location, pin = pinned
    pytester.makepyfile(test_suite=TEST.format(pin=pin))
    result = pytester.runpytest("--cas-repo", location, "--cas-record", "ci-run",
                                "-p", "no:randomly")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*cas: recorded 3 scores of experiment 'ci-run'*"])
    fresh = cas.open(location)
    [experiment] = fresh.experiments("evals")
    assert (experiment.name, experiment.version) == ("ci-run", 1)
    scores = {s.item: s.value for s in fresh.scores("evals", 1)}
    two = next(c for c in fresh.items("evals", 1).items
               if fresh.case("evals", 1, c).input == 2)
    assert scores == {c: c != two for c in fresh.items("evals", 1).items}


@pytest.mark.parametrize("how", ["retired", "wrong digest", "missing", "not a pin"])
def test_a_pin_that_cannot_be_used_fails_collection_with_the_reason(pytester, pinned, how):
    repo, location, pin = pinned
    if how == "retired":
        repo.retire("evals", 1, "CONTAMINATED", "leaked")
        reason = "EVALUATION_DATASET_VERSION_RETIRED"
    elif how == "wrong digest":
        pin = pin[:-4] + ("0000" if not pin.endswith("0000") else "1111")
        reason = "PIN_MISMATCH"
    elif how == "missing":
        pin = "evals@7#b3:" + "0" * 64
        reason = "NOT_FOUND"
    else:
        pin = "evals"
        reason = "INVALID_ARGUMENT"
    pytester.makepyfile(test_suite=TEST.format(pin=pin))
    result = pytester.runpytest("--cas-repo", location, "-p", "no:randomly")
    assert result.ret != 0
    result.assert_outcomes(errors=1)
    assert "cannot be used" in result.stdout.str() and reason in result.stdout.str()


def test_the_fixture_without_the_marker_and_a_bad_marker_are_usage_errors(pytester, pinned):
    _, location, _ = pinned
    pytester.makepyfile(test_plain=textwrap.dedent("""
        def test_plain(cas_case):
            pass
    """))
    result = pytester.runpytest("--cas-repo", location, "-p", "no:randomly")
    assert result.ret != 0 and "needs @pytest.mark.cas_suite" in result.stdout.str()


FLAKY_TEST = """
import pytest
from cas.runner import repetition_seed

@pytest.mark.cas_suite({pin!r})
def test_doubles(cas_case, cas_repetition, cas_seed):
    assert cas_seed == repetition_seed(0, cas_repetition)  # as cas suite run --repeat gives
    # the case with input 2 fails one time in five; the case with input 3 always fails
    assert not (cas_case.input == 2 and cas_repetition == 3), "a flake"
    assert cas_case.input != 3, "always"
"""


def test_cas_repeat_runs_each_case_n_times_and_names_the_flaky_case(pytester, pinned):
    repo, location, pin = pinned
    pytester.makepyfile(test_suite=FLAKY_TEST.format(pin=pin))
    result = pytester.runpytest("--cas-repo", location, "--cas-repeat", "5", "-v",
                                "--cas-record", "ci-5", "-p", "no:randomly")
    result.assert_outcomes(passed=9, failed=6)
    two = next(c for c in repo.items("evals", 1).items if repo.case("evals", 1, c).input == 2)
    result.stdout.fnmatch_lines([f"*test_doubles?{two}-r3?*FAILED*",
                                 f"*cas: 1 FLAKY case on {pin} (passed and failed across "
                                 f"repetitions): {two}*",
                                 "*cas: recorded 15 scores of experiment 'ci-5'*"])
    scores = [(s.item, s.value) for s in cas.open(location).scores("evals", 1)]
    assert sorted(v for i, v in scores if i == two) == [False, True, True, True, True]


def test_cas_repeat_needs_no_fixture_and_refuses_what_is_not_a_repetition_count(pytester,
                                                                                pinned):
    _, location, pin = pinned
    pytester.makepyfile(test_suite=TEST.format(pin=pin))  # asks for cas_case only
    result = pytester.runpytest("--cas-repo", location, "--cas-repeat", "2", "-p",
                                "no:randomly")
    result.assert_outcomes(passed=4, failed=2)
    assert "FLAKY" not in result.stdout.str()  # always failing is not flaky
    result = pytester.runpytest("--cas-repo", location, "--cas-repeat", "0")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*repeat 0 is not a whole number of repetitions from 1*"])


def test_a_dataset_name_resolves_through_the_lock_in_the_rootdir(pytester, pinned,
                                                                monkeypatch):
    """`cas_suite("evals")` takes the pin cas.lock holds (found from the rootdir), says so
    after collection, and records under that pin; a dataset the lock does not hold fails the
    collection naming `cas lock add`."""
    from cas.interop import lockfile
    repo, location, pin = pinned
    # (CAS_REPO, not --cas-repo PATH: pytest would count that path in choosing the rootdir)
    monkeypatch.setenv("CAS_REPO", location)
    pytester.makeini("[pytest]\n")  # the project's root: where its cas.lock is looked for
    pytester.makepyfile(test_suite=TEST.format(pin="evals"))
    result = pytester.runpytest("-p", "no:randomly")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*`cas lock add evals@N`*(INVALID_ARGUMENT, NOT_LOCKED)*"])
    lockfile.add(repo, pytester.path / "cas.lock", "evals@1")
    result = pytester.runpytest("--cas-record", "locked", "-p", "no:randomly")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["evals -> evals@1 (cas.lock)"])
    assert [e.name for e in cas.open(location).experiments("evals")] == ["locked"]
