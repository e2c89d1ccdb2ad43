"""A suite session: a source (a suite file, or a version `NAME@N` or its pin) made runnable (the
suite, the executor fit for it, its cassettes, the experiment its result goes to), then run and
recorded: what `cas suite run` does (docs/suites.md)."""

from __future__ import annotations

import os
from typing import Any, Callable, NamedTuple

from cas.errors import InvalidArgument
from cas.evals.cassettes.book import CassetteBook, suite_pin
from cas.evals.cassettes.matching import LIVE, resolve_mode
from cas.evals.replay import parse_plan
from cas.evals.suites.executors import check_cassettes, load_executor, load_scorer, replay_executor
from cas.evals.suites.files import Suite, from_version, read_jsonl
from cas.evals.suites.recording import Recorded, check_record, record
from cas.evals.suites.results import SuiteResult
from cas.evals.suites.runner import DEFAULT_CONCURRENCY, DEFAULT_GRACE, SuiteRunner
from cas.format.version_names import as_pin, parse_version_name


class Source(NamedTuple):
    """The suite a source names, and the dataset it is a version of (None for a suite file)."""

    suite: Suite
    dataset: str | None


def open_source(source: str, open_repo: Callable[[], Any]) -> Source:
    """SOURCE: a suite file, else `NAME@N` or the pin `NAME@N#b3:...` of the repository
    `open_repo()` opens (only then: a suite file needs none). A pin that no longer matches is
    refused, not run; a retired version is refused as every read of it is."""
    if os.path.exists(source):
        return Source(read_jsonl(source), None)
    try:
        name = parse_version_name(source)
    except InvalidArgument as exc:
        if exc.reason != "INVALID_VERSION_NAME":
            raise  # a version name whose dataset name or digest is wrong says which
        raise InvalidArgument(f"SOURCE {source!r} is neither a suite file nor DATASET@N of "
                              "the repository", reason="USAGE") from None
    if name.content_digest is not None:
        return pinned_suite(source, open_repo)
    return Source(from_version(open_repo(), name.dataset, name.version), name.dataset)


def pinned_suite(pin: Any, open_repo: Callable[[], Any]) -> Source:
    """The suite of the version `pin` (a cas.Pin or its string) names, in the repository
    `open_repo()` opens; refused when it is no pin, names no version, no longer matches, or
    names a retired version."""
    p = as_pin(pin)
    repo = open_repo()
    repo.resolve_pin(p)
    return Source(from_version(repo, p.dataset, p.version), p.dataset)


def cassette_book(version: str, executor: str, mode: str | None = None, *,
                  strict: bool = True, ordered: bool = False,
                  open_repo: Callable[[], Any]) -> CassetteBook:
    """The cassettes of a suite's cases under `executor` (a name), in `mode` (else
    CAS_CASSETTE_MODE, else replay under CI, else record-missing). In any mode but `live`
    the suite's `version` must be a pin of the repository `open_repo()` opens."""
    mode = resolve_mode(mode)
    if mode == LIVE:
        return CassetteBook(None, version, executor, mode, strict=strict, ordered=ordered)
    suite_pin(version)  # a suite of no version: say so, not "no repository here"
    return CassetteBook(open_repo(), version, executor, mode, strict=strict, ordered=ordered)


class Session:
    """A suite ready to run: the suite, the executor and scorer it runs with, the cassettes of
    its cases (None for an executor without a `cassette` parameter), and the experiment its
    result is recorded into (None: not recorded)."""

    def __init__(self, source: Source, executor: Callable, scorer: Callable | None,
                 cassettes: CassetteBook | None, experiment: str | None,
                 open_repo: Callable[[], Any]) -> None:
        self.suite, self.dataset = source
        self.executor, self.scorer = executor, scorer
        self.cassettes, self.experiment = cassettes, experiment
        self._open_repo = open_repo

    def run(self, *, concurrency: int = DEFAULT_CONCURRENCY, seed: int = 0,
            timeout: float | None = None, artefacts: Any = None, shard: Any = None,
            grace: float = DEFAULT_GRACE,
            progress: Callable[[int, int], Any] | None = None, repeat: int = 1
            ) -> tuple[SuiteResult, Recorded | None]:
        """The suite run (SuiteRunner: the options are its own; SIGINT and SIGTERM stop it),
        and what recording it stored (None when there is no experiment)."""
        result = SuiteRunner(self.executor, concurrency=concurrency, artefacts=artefacts,
                             seed=seed, timeout=timeout, scorer=self.scorer, shard=shard,
                             grace=grace, progress=progress,
                             cassettes=self.cassettes, repeat=repeat).run(self.suite)
        if self.experiment is None:
            return result, None
        return result, record(self._open_repo(), result, self.experiment,
                              scored=self.scorer is not None)


def prepare(source: str, executor: str, *, open_repo: Callable[[], Any], plan: Any = None,
            plan_source: str = "plan", scorer: str | None = None,
            cassette_mode: str | None = None, cassette_strict: bool = True,
            cassette_ordered: bool = False, experiment: str | None = None) -> Session:
    """The session of `source` (`open_source`) under `executor` (a name for `load_executor`;
    `plan`, read as `parse_plan` reads it, is for `cas:replay`) and `scorer` (a name).

    What would refuse the run for its source, executor, cassettes or recording is refused
    here, before any case runs (the runner's own options are checked by `Session.run`): the
    executor and scorer are loaded first, then the suite is read; `cas:replay` over a version
    leaves out what the dataset's content policy withholds now (as `cas replay` does);
    cassette options for an executor without a `cassette` parameter are refused; and with an
    `experiment`, what recording would refuse (check_record)."""
    parsed = None if plan is None else parse_plan(plan, plan_source)
    run_case = load_executor(executor, parsed)
    score = None if scorer is None else load_scorer(scorer)
    opened = open_source(source, open_repo)
    if executor == "cas:replay" and opened.dataset is not None:
        withheld = open_repo().content_policy(opened.dataset).withheld
        if withheld:
            run_case = replay_executor(parsed, withheld=withheld)
    book = None
    if check_cassettes(run_case, cassette_mode is not None or cassette_ordered, executor):
        book = cassette_book(opened.suite.version, executor, cassette_mode,
                             strict=cassette_strict, ordered=cassette_ordered,
                             open_repo=open_repo)
    if experiment is not None:
        check_record(open_repo(), opened.suite, experiment)
    return Session(opened, run_case, score, book, experiment, open_repo)
