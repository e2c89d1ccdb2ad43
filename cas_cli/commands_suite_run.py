"""`cas suite run`, `cas suite merge`, `cas suite diff`: the runner's commands."""

from __future__ import annotations

import json
import os
import re
import sys

import click

from .commands_suite import suite
from .common import INTEGER, Context, json_option, pass_ctx, to_json

COMMANDS = ()  # they join the `suite` group, registered by commands_suite

_VERSION_SOURCE = re.compile(r"(?P<dataset>[^@#/\\]+)@(?P<number>[0-9]+)(?P<pin>#.*)?\Z")


class Seconds(click.ParamType):
    """A number of seconds (`--timeout 30`, `--grace 0.5`), in ASCII digits."""

    name = "seconds"

    def convert(self, value, param, ctx):
        if isinstance(value, (int, float)):
            return value
        text = value.strip()
        if not (text.isascii() and re.fullmatch(r"[0-9]+(\.[0-9]+)?", text)):
            self.fail(f"{value!r} is not a number of seconds (e.g. 30 or 0.5)", param, ctx)
        return float(text)


def _suite_of(ctx: Context, source: str):
    """SOURCE: a suite file, else DATASET@N (or the pin DATASET@N#b3:...) of the repository.
    Returns (the suite, the dataset it is a version of or None)."""
    from cas.evals import suites
    from cas.errors import InvalidArgument
    if os.path.exists(source):
        return suites.read_jsonl(source), None
    m = _VERSION_SOURCE.match(source)
    if m is None:
        raise InvalidArgument(f"SOURCE {source!r} is neither a suite file nor DATASET@N of "
                              "the repository", reason="USAGE")
    repo = ctx.repo()
    if m["pin"]:
        repo.resolve_pin(source)  # a pin that no longer matches is refused, not run
    return suites.from_version(repo, m["dataset"], int(m["number"])), m["dataset"]


def _summary(result, elapsed: float | None = None) -> str:
    c = result.counts
    shard = f" (shard {result.shard} of {result.shard.cases} cases)" if result.shard else ""
    took = f" in {elapsed:.1f} s" if elapsed is not None else ""
    verdict = "ok" if result.ok else f"NOT ok (exit {result.exit_code})"
    return (f"suite {result.suite.name} {result.suite.version}{shard}: {len(result.results)} "
            f"cases{took}: {c['COMPLETED']} completed, {c['ERRORED']} errored, "
            f"{c['INCOMPLETE']} incomplete; {verdict}; digest {result.digest}")


def _result_text(result, elapsed: float | None = None) -> str:
    lines = [f"{r.outcome:<10}  {r.position:>6}  {r.id}  {r.reason}"
             for r in result.results if r.outcome != "COMPLETED"]
    return "\n".join(lines + [_summary(result, elapsed)])


@suite.command("run")
@click.argument("source")
@click.option("--executor", "executor_spec", required=True, metavar="MODULE:FUNCTION",
              help="What runs each case: cas:echo, cas:replay (with --plan), cas:cassette, or "
                   "your module:function (async def f(case, *, run_id), or a plain "
                   "function; with a `cassette` parameter it gets the case's cassette).")
@click.option("--scorer", "scorer_spec", default=None, metavar="MODULE:FUNCTION",
              help="scorer(case, answer) -> {metric: value}, sync or async, for each "
                   "COMPLETED case.")
@click.option("--concurrency", type=INTEGER, default=4, show_default=True,
              help="Cases running at once (1-1024).")
@click.option("--seed", type=INTEGER, default=0, show_default=True,
              help="Seed the run ids are derived from.")
@click.option("--timeout", type=Seconds(), default=None,
              help="Seconds each case may take (executor and scorer); then INCOMPLETE.")
@click.option("--artefacts", type=click.Path(file_okay=False), default=None, metavar="DIR",
              help="Write DIR/<suite>/<case id>/{case,run,result,timings}.json.")
@click.option("--shard", "shard_text", default=None, metavar="I/N",
              help="Run only shard I of N (the cases at positions p with p % N == I - 1).")
@click.option("--record", "experiment", default=None, metavar="EXPERIMENT",
              help="Record the results as a score batch of EXPERIMENT over the pinned "
                   "version (created if missing).")
@click.option("--plan", "plan_file", type=click.File("rb"), default=None, metavar="PLAN.json",
              help="The replay plan of cas:replay (docs/replay.md; '-' for stdin).")
@click.option("--cassette-mode", "cassette_mode", default=None,
              type=click.Choice(["replay", "record", "record-missing", "live"]),
              help="How an executor's cassette answers: replay (no live call), record, "
                   "record-missing, live. Default: CAS_CASSETTE_MODE, else replay under CI, "
                   "else record-missing.")
@click.option("--cassette-strict/--no-cassette-strict", default=True, show_default=True,
              help="A case that leaves recorded exchanges unused is ERRORED.")
@click.option("--cassette-ordered", is_flag=True,
              help="Calls must come in the order the cassette recorded them.")
@click.option("--grace", type=Seconds(), default=2.0, show_default=True,
              help="Seconds a run stopped by SIGINT/SIGTERM waits for the running cases.")
@json_option
@pass_ctx
def run(ctx: Context, source: str, executor_spec: str, scorer_spec: str | None,
        concurrency: int, seed: int, timeout: float | None, artefacts: str | None,
        shard_text: str | None, experiment: str | None, plan_file, cassette_mode: str | None,
        cassette_strict: bool, cassette_ordered: bool, grace: float) -> None:
    """Run a suite (a suite file, or DATASET@N of the repository) through an executor.

    Exits 0 when every case COMPLETED, 10 when any case ERRORED, else 11 when any is
    INCOMPLETE (timed out, non-terminal, or stopped by SIGINT/SIGTERM: the result is still
    printed)."""
    import time

    from cas.evals import replay
    from cas.evals.suites import runner
    if os.getcwd() not in sys.path:  # the user's module:function lives where they run cas
        sys.path.insert(0, os.getcwd())
    shard = runner.Shard.parse(shard_text) if shard_text is not None else None
    plan = None
    if plan_file is not None:
        plan = replay.parse_plan(plan_file.read(), getattr(plan_file, "name", "stdin"))
    executor = runner.load_executor(executor_spec, plan)  # refused before anything is read
    scorer = runner.load_scorer(scorer_spec) if scorer_spec is not None else None
    the_suite, dataset = _suite_of(ctx, source)
    if executor_spec == "cas:replay" and dataset is not None:
        # as `cas replay` does: what the dataset's content policy withholds now stays out
        withheld = ctx.repo().content_policy(dataset).withheld
        if withheld:
            executor = runner.replay_executor(plan, withheld=withheld)
    book = None
    if runner.takes_cassette(executor):
        from cas.evals.cassettes import LIVE, CassetteBook, resolve_mode, suite_pin
        mode = resolve_mode(cassette_mode)
        if mode != LIVE:
            suite_pin(the_suite.version)  # a suite of no version: say so, not "no repository"
        book = CassetteBook(ctx.repo() if mode != LIVE else None, the_suite.version,
                            executor_spec, mode, strict=cassette_strict,
                            ordered=cassette_ordered)
    elif cassette_mode is not None or cassette_ordered:
        from cas.errors import InvalidArgument
        raise InvalidArgument(f"executor {executor_spec} takes no cassette (it declares no "
                              "`cassette` parameter): --cassette-mode and --cassette-ordered "
                              "are for one that does", reason="CASSETTE_UNUSED_BY_EXECUTOR")
    if experiment is not None:
        runner.check_record(ctx.repo(), the_suite, experiment)  # before, not after, the run
    progress = None
    if sys.stderr.isatty():
        def progress(done: int, total: int) -> None:
            ctx.progress("running", done, total)
    started = time.monotonic()
    result = runner.SuiteRunner(executor, concurrency=concurrency, artefacts=artefacts,
                                seed=seed, timeout=timeout, scorer=scorer, shard=shard,
                                grace=grace, progress=progress,
                                cassettes=book).run(the_suite)
    elapsed = time.monotonic() - started
    if progress is not None:
        ctx.progress("", 0, 0)
    out = result.to_json()
    recorded = None
    if experiment is not None:
        recorded = runner.record(ctx.repo(), result, experiment, scored=scorer is not None)
        out["recorded"] = to_json(recorded)

    def human() -> str:
        text = _result_text(result, elapsed)
        if recorded is not None:
            text += (f"\nrecorded {recorded.scores} scores in experiment {recorded.experiment}"
                     f" over {recorded.dataset}@{recorded.version}"
                     + (f" (batch {recorded.batch})" if recorded.batch else "")
                     + (" (experiment created)" if recorded.created else ""))
        return text
    ctx.emit(out, human)
    click.get_current_context().exit(result.exit_code)


def _read_results(files) -> tuple[list, list[str]]:
    from cas.evals.suites import runner
    names = [getattr(f, "name", "stdin") for f in files]
    return [runner.as_result(f.read(), n) for f, n in zip(files, names)], names


@suite.command("merge")
@click.argument("files", nargs=-1, required=True, type=click.File("rb"), metavar="A.json B.json...")
@json_option
@pass_ctx
def merge(ctx: Context, files) -> None:
    """Merge the results of every shard into the result of one unsharded run.

    Takes the `cas suite run --shard I/N --json` outputs, restores suite order (the digest is
    the unsharded run's) and exits with the merged result's exit code."""
    from cas.evals.suites import runner
    results, names = _read_results(files)
    merged = runner.merge(results, names)
    ctx.emit(merged.to_json(), lambda: _result_text(merged))
    click.get_current_context().exit(merged.exit_code)


@suite.command("diff")
@click.argument("before", type=click.File("rb"))
@click.argument("after", type=click.File("rb"))
@click.option("--allow-versions", is_flag=True,
              help="Compare results of two different suite versions anyway.")
@json_option
@pass_ctx
def diff(ctx: Context, before, after, allow_versions: bool) -> None:
    """The cases whose answer or outcome changed between two results.

    A and B are `cas suite run --json` (or merge) outputs of one suite version; exits 0:
    differences are data, not errors."""
    from cas.evals.suites import runner
    (a, b), _ = _read_results((before, after))
    d = runner.diff(a, b, allow_versions=allow_versions)

    def side(v) -> str:
        if v is None:
            return "(absent)"
        answer = json.dumps(v["answer"], ensure_ascii=False, sort_keys=True)
        if len(answer) > 60:
            answer = answer[:59] + "\u2026"
        return f"{v['outcome']} {answer}" if v["outcome"] == "COMPLETED" else \
            f"{v['outcome']} ({v['reason']})"

    def human() -> str:
        lines = [f"{c['id']}: {side(c['before'])} -> {side(c['after'])}" for c in d["changed"]]
        return "\n".join(lines + [f"{len(d['changed'])} changed, {d['unchanged']} unchanged"])
    ctx.emit(d, human)
