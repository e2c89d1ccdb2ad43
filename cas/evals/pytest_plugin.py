"""The pytest plugin (entry point `pytest11`: enabled by installing cas; docs/suites.md).

`@pytest.mark.cas_suite("DATASET@N#b3:...")` parametrises a test over the cases of that pinned
version, one test per case, its id the case id; the `cas_case` fixture gives the case (a
`cas.suites.SuiteCase`, with the frozen case as `.frozen`). The pin is verified at collection:
a missing, deleted or retired version, or a digest that does not match, fails the collection
with the reason. `--cas-repo` (else CAS_REPO, else the nearest `.cas`) names the repository;
`--cas-record EXPERIMENT` records each case's pass or fail as a boolean score `passed` of that
experiment over the pinned version (created if missing). `@pytest.mark.cas_suite("DATASET")`,
a name alone, takes the pin cas.lock holds for it (the lock in the rootdir or its parents, or
`--cas-lock PATH`; docs/lock.md); the resolution is printed after collection, and a dataset
the lock does not hold fails the collection (NOT_LOCKED).

`--cas-repeat N` runs every case N times: the test is parametrised over (case, repetition), its
id the case id and `r<repetition>`; the `cas_repetition` fixture gives the repetition (from 0)
and `cas_seed` its seed (`cas.runner.repetition_seed(0, repetition)`, as `cas suite run
--repeat` derives them). A case whose repetitions both passed and failed is **flaky**: named in
the terminal summary (it fails the session only through its failed repetitions, as pytest
counts them); `--cas-record` records each repetition's `passed`.

The `cas_cassette` fixture gives the case's cassette (a `cas.cassettes.Cassette`) under the test
(its node id without the parameters is the executor name), in the mode `--cas-cassette-mode`
selects (else CAS_CASSETTE_MODE, else replay under CI, else record-missing). A test that
passed but left recorded exchanges unused errors at teardown (strict); what passing tests
recorded is stored when the session ends, one cassette log record per pin and test.

A thin layer: the suite of a pin and the cassette books are made as `cas suite run` makes them
(cas.evals.suites.session), and the outcomes are recorded with `cas.runner.record_scores_of`.
"""

from __future__ import annotations

import os

import pytest

MARKER = "cas_suite"


def pytest_addoption(parser) -> None:
    group = parser.getgroup("cas", "cas: tests over the cases of a pinned version")
    group.addoption("--cas-repo", default=None, metavar="LOCATION",
                    help="the cas repository (default: CAS_REPO, else the nearest .cas)")
    group.addoption("--cas-lock", default=None, metavar="PATH",
                    help="the lock file a cas_suite(\"DATASET\") name resolves through "
                         "(default: cas.lock in the rootdir or its parents)")
    group.addoption("--cas-record", default=None, metavar="EXPERIMENT",
                    help="record each case's pass or fail as the score `passed` of EXPERIMENT")
    group.addoption("--cas-repeat", default=1, type=_repeat, metavar="N",
                    help="run every case of a cas_suite test N times (cas_repetition, "
                         "cas_seed); flaky cases are named in the summary")
    group.addoption("--cas-cassette-mode", default=None,
                    choices=("replay", "record", "record-missing", "live"),
                    help="how cas_cassette answers (default: CAS_CASSETTE_MODE, else replay "
                         "under CI, else record-missing)")


def pytest_configure(config) -> None:
    config.addinivalue_line(
        "markers", f"{MARKER}(pin): run the test once per case of the pinned version "
                   "DATASET@N#b3:... (the cas_case fixture gives the case)")
    config.stash[_STATE] = _State(config)


class _State:
    """The repository (opened once, when a marked test is first collected), and the outcome
    of each case under each pin, for --cas-record."""

    def __init__(self, config) -> None:
        self.config = config
        self._repo = None
        # pin -> (case id, repetition) -> passed
        self.outcomes: dict[str, dict[tuple[str, int], bool]] = {}
        self.books: dict[tuple[str, str], object] = {}  # (pin, test) -> CassetteBook
        self.resolved: list[str] = []  # `NAME -> NAME@N (cas.lock)`, once per name
        self._locked: dict[str, str] = {}

    def locked(self, source: str) -> str:
        """A dataset name alone -> the pin cas.lock holds for it (--cas-lock, else the lock
        found from the rootdir upwards); a version name, a pin or an existing path as it is.
        (The entry's `repository` is not used: the plugin reads one repository, --cas-repo.)"""
        if "@" in source or os.path.exists(source):
            return source
        if source not in self._locked:
            from cas.interop import lockfile
            resolved = lockfile.resolve(source, self.config.getoption("--cas-lock"),
                                        start=self.config.rootpath)
            self.resolved.append(resolved.line())
            self._locked[source] = str(resolved.pin)
        return self._locked[source]

    def book(self, pin: str, executor: str):
        found = self.books.get((pin, executor))
        if found is None:
            from cas.evals.suites.session import cassette_book
            found = self.books[(pin, executor)] = cassette_book(
                pin, executor, self.config.getoption("--cas-cassette-mode"),
                open_repo=self.repo)
        return found

    def repo(self):
        if self._repo is None:
            from cas.repo import opening
            location = (self.config.getoption("--cas-repo") or os.environ.get("CAS_REPO")
                        or opening.find("."))
            self._repo = opening.open(location)
        return self._repo


_STATE = pytest.StashKey[_State]()


def _repeat(text: str) -> int:
    """--cas-repeat: a whole number from 1 (refused as `cas suite run --repeat` refuses)."""
    import argparse

    from cas.errors import InvalidArgument
    from cas.evals.suites.results import check_repeat
    try:
        return check_repeat(int(text) if text.isascii() and text.isdigit() else text)
    except InvalidArgument as exc:
        raise argparse.ArgumentTypeError(exc.message) from None


def _pin_of(marker, where: str) -> str:
    if len(marker.args) != 1 or marker.kwargs or not isinstance(marker.args[0], str):
        raise pytest.UsageError(f"{where}: @pytest.mark.{MARKER} takes one pin, "
                                "\"DATASET@N#b3:<64 hex digits>\" (see `cas pin`)")
    return marker.args[0]


def pytest_generate_tests(metafunc) -> None:
    marker = metafunc.definition.get_closest_marker(MARKER)
    if marker is None:
        return
    where = metafunc.definition.nodeid
    pin = _pin_of(marker, where)
    if "cas_case" not in metafunc.fixturenames:
        raise pytest.UsageError(f"{where}: a test marked {MARKER} takes the cas_case fixture")
    from cas.errors import CasError
    from cas.evals.suites.session import pinned_suite
    state = metafunc.config.stash[_STATE]
    try:
        # no pin, or a version missing, deleted, retired or not matching: refused
        suite = pinned_suite(state.locked(pin), state.repo).suite
    except CasError as exc:
        raise pytest.Collector.CollectError(
            f"{where}: the pin {pin!r} cannot be used: {exc.message} ({exc.code}"
            + (f", {exc.reason})" if exc.reason else ")")) from None
    cases = list(suite.cases)
    metafunc.parametrize("cas_case", cases, ids=[c.id for c in cases])
    repeat = metafunc.config.getoption("--cas-repeat")
    if repeat > 1:  # (without it, the cas_repetition fixture gives 0 and ids stay case ids)
        # cas_repetition is in every cas_case test's closure: the cas_case fixture names it
        metafunc.parametrize("cas_repetition", range(repeat),
                             ids=[f"r{k}" for k in range(repeat)])


@pytest.fixture
def cas_repetition():
    """The repetition (from 0) of a test marked cas_suite, under --cas-repeat N (else 0)."""
    return 0


@pytest.fixture
def cas_case(request, cas_repetition):
    """The case of a test marked cas_suite (its parametrisation)."""
    raise pytest.UsageError(f"{request.node.nodeid}: the cas_case fixture needs "
                            f"@pytest.mark.{MARKER}(\"DATASET@N#b3:...\")")


@pytest.fixture
def cas_seed(cas_repetition):
    """The seed of this repetition: the seed `cas suite run --repeat N` gives it (seed 0)."""
    from cas.evals.suites.results import repetition_seed
    return repetition_seed(0, cas_repetition)


_PASSED = pytest.StashKey[bool]()


@pytest.fixture
def cas_cassette(request, cas_case):
    """The cassette of the case under this test (cas.cassettes.Cassette): wrap the test's
    model and tool calls with `cas_cassette.wrap(fn, name=...)`, or its HTTP with
    `with cas.cassette_http.use(cas_cassette): ...`."""
    marker = request.node.get_closest_marker(MARKER)
    state = request.config.stash[_STATE]
    book = state.book(state.locked(marker.args[0]), request.node.nodeid.split("[", 1)[0])
    cassette = book.cassette(cas_case.id)
    yield cassette
    if request.node.stash.get(_PASSED, False):
        from cas.errors import CasError
        try:
            cassette.check()
        except CasError as exc:
            pytest.fail(exc.message, pytrace=False)
        book.keep(cas_case.id, cassette)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.when == "call":
        item.stash[_PASSED] = report.passed
    marker = item.get_closest_marker(MARKER)
    callspec = getattr(item, "callspec", None)
    if marker is None or callspec is None or "cas_case" not in callspec.params:
        return report
    state = item.config.stash[_STATE]
    outcomes = state.outcomes.setdefault(state.locked(marker.args[0]), {})
    case_id = (callspec.params["cas_case"].id, callspec.params.get("cas_repetition", 0))
    if report.when == "setup" and not report.passed:
        outcomes[case_id] = False  # an error in setup is not a pass (a skip is not recorded)
        if report.skipped:
            outcomes.pop(case_id)
    elif report.when == "call":
        if report.skipped:
            outcomes.pop(case_id, None)
        else:
            outcomes[case_id] = report.passed
    return report


def pytest_report_collectionfinish(config, start_path, items) -> list[str]:
    """Each dataset name a cas_suite marker resolved through cas.lock, as the CLI says it."""
    return list(config.stash[_STATE].resolved)


def pytest_sessionfinish(session, exitstatus) -> None:
    state = session.config.stash.get(_STATE, None)
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    for (pin, test), book in sorted(state.books.items() if state else ()):
        saved = book.save()
        if saved is not None and reporter is not None:
            reporter.write_line(f"cas: recorded {len(saved.entries)} cassettes of {test} on "
                                f"{pin}")
    if state is not None and reporter is not None:
        for pin, outcomes in state.outcomes.items():
            flaky = flaky_cases(outcomes)
            if flaky:
                reporter.write_line(f"cas: {len(flaky)} FLAKY case{'s' if len(flaky) > 1 else ''}"
                                    f" on {pin} (passed and failed across repetitions): "
                                    + ", ".join(flaky))
    experiment = session.config.getoption("--cas-record")
    if not experiment or state is None or not state.outcomes:
        return
    from cas.evals.suites.recording import record_scores_of
    for pin, outcomes in state.outcomes.items():
        scores = [{"metric": "passed", "value": passed, "item": case_id}
                  for (case_id, _), passed in sorted(outcomes.items())]
        recorded = record_scores_of(state.repo(), pin, experiment, scores)
        if reporter is not None:
            reporter.write_line(f"cas: recorded {len(recorded)} scores of experiment "
                                f"{experiment!r} on {pin}")


def flaky_cases(outcomes: dict[tuple[str, int], bool]) -> list[str]:
    """The case ids whose repetitions both passed and failed, sorted."""
    seen: dict[str, set[bool]] = {}
    for (case_id, _), passed in outcomes.items():
        seen.setdefault(case_id, set()).add(passed)
    return sorted(c for c, values in seen.items() if len(values) == 2)
