"""`cas suite ...`: a pinned version as a suite file, and the runner (run, merge, diff)."""

from __future__ import annotations

import json
import os
import sys

import click

from .common import (INTEGER, VERSION_ARGS, VERSION_FORMS, Example, Invocation, Seconds,
                     json_option, pass_ctx, split_version_args, to_json)


@click.group()
@json_option
def suite() -> None:
    """Suites: a pinned version as a suite file, and the runner that turns it into a verdict."""


@suite.command("export", context_settings=VERSION_ARGS)
@click.argument("args", nargs=-1, metavar="DATASET VERSION")
@click.option("-o", "--output", "output", default=None, metavar="FILE",
              help="Write the suite here, atomically (default: stdout, only without --json).")
@json_option
@pass_ctx
def export(ctx: Invocation, args: tuple[str, ...], output: str | None) -> None:
    """Write an exact version as a redacted suite file (also DATASET@VERSION)."""
    from cas.errors import InvalidArgument
    from cas.evals import suites
    name, number, _ = split_version_args("suite export", args, VERSION_FORMS)
    if output is None and ctx.as_json:
        raise InvalidArgument("--json reports a suite written with -o FILE; without -o the "
                              "suite itself is the output on stdout", reason="OUTPUT_REQUIRED")
    out = output if output is not None else sys.stdout.buffer
    result = suites.export(ctx.repo(), name, number, out)
    if output is None:  # stdout carried the suite itself: nothing may follow it there
        return
    data = {"suite": {"name": result.name, "version": result.version}, "cases": result.cases,
            "path": result.path}
    ctx.emit(data, f"wrote {result.cases} cases of {name}@{number} ({result.version}) to "
                   f"{result.path}")


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
def run(ctx: Invocation, source: str, executor_spec: str, scorer_spec: str | None,
        concurrency: int, seed: int, timeout: float | None, artefacts: str | None,
        shard_text: str | None, experiment: str | None, plan_file, cassette_mode: str | None,
        cassette_strict: bool, cassette_ordered: bool, grace: float) -> None:
    """Run a suite (a suite file, or DATASET@N of the repository) through an executor.

    Exits 0 when every case COMPLETED, 10 when any case ERRORED, else 11 when any is
    INCOMPLETE (timed out, non-terminal, or stopped by SIGINT/SIGTERM: the result is still
    printed)."""
    import time

    from cas.evals.suites import session
    if os.getcwd() not in sys.path:  # the user's module:function lives where they run cas
        sys.path.insert(0, os.getcwd())
    prepared = session.prepare(
        source, executor_spec, open_repo=ctx.repo, scorer=scorer_spec,
        plan=None if plan_file is None else plan_file.read(),
        plan_source=getattr(plan_file, "name", "stdin"), cassette_mode=cassette_mode,
        cassette_strict=cassette_strict, cassette_ordered=cassette_ordered,
        experiment=experiment)
    progress = None
    if sys.stderr.isatty():
        def progress(done: int, total: int) -> None:
            ctx.progress("running", done, total)
    started = time.monotonic()
    result, recorded = prepared.run(concurrency=concurrency, seed=seed, timeout=timeout,
                                    artefacts=artefacts, shard=shard_text, grace=grace,
                                    progress=progress)
    elapsed = time.monotonic() - started
    if progress is not None:
        ctx.progress("", 0, 0)
    out = result.to_json()
    if recorded is not None:
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
    from cas.evals.suites import results
    names = [getattr(f, "name", "stdin") for f in files]
    return [results.as_result(f.read(), n) for f, n in zip(files, names)], names


@suite.command("merge")
@click.argument("files", nargs=-1, required=True, type=click.File("rb"), metavar="A.json B.json...")
@json_option
@pass_ctx
def merge(ctx: Invocation, files) -> None:
    """Merge the results of every shard into the result of one unsharded run.

    Takes the `cas suite run --shard I/N --json` outputs, restores suite order (the digest is
    the unsharded run's) and exits with the merged result's exit code."""
    from cas.evals.suites.results import merge as merge_shards
    results, names = _read_results(files)
    merged = merge_shards(results, names)
    ctx.emit(merged.to_json(), lambda: _result_text(merged))
    click.get_current_context().exit(merged.exit_code)


@suite.command("diff")
@click.argument("before", type=click.File("rb"))
@click.argument("after", type=click.File("rb"))
@click.option("--allow-versions", is_flag=True,
              help="Compare results of two different suite versions anyway.")
@json_option
@pass_ctx
def diff(ctx: Invocation, before, after, allow_versions: bool) -> None:
    """The cases whose answer or outcome changed between two results.

    A and B are `cas suite run --json` (or merge) outputs of one suite version; exits 0:
    differences are data, not errors."""
    from cas.evals.suites.results import diff as diff_results
    (a, b), _ = _read_results((before, after))
    d = diff_results(a, b, allow_versions=allow_versions)

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


EXAMPLES = {
    "suite": (
        Example("cas suite export support-evals 2 -o support-evals-2.jsonl",
                "Write support-evals@2 as a suite file (pinned, redacted)."),
        Example("cas suite run support-evals@2 --executor cas:replay --plan plan.json",
                "Replay every case of the version in the sandbox: a verdict."),
    ),
    "suite export": (
        Example("cas suite export support-evals 2 -o support-evals-2.jsonl",
                "The pinned version as a suite file, scrubbed on the way to disk."),
        Example("cas suite export support-evals@2 > suite.jsonl", "The same, to stdout."),
    ),
    "suite run": (
        Example("cas suite run support-evals@2 --executor cas:replay --plan plan.json "
                "--record replay-1",
                "Replay each frozen case; record the results as experiment replay-1."),
        Example("cas suite run suite.jsonl --executor my_agent.evals:run_case --shard 1/4 "
                "--json > shard-1.json",
                "Run the first of four shards of a suite file with your own executor."),
        Example("cas suite run suite.jsonl --executor cas:echo --artefacts artefacts",
                "Try the runner out; each case's evidence goes to artefacts/."),
        Example("cas suite run support-evals@2 --executor my_agent.evals:run_case "
                "--cassette-mode record-missing",
                "Run your agent; its cassette records the model and tool calls it lacks."),
        Example("cas suite run support-evals@2 --executor my_agent.evals:run_case "
                "--cassette-mode replay",
                "Replay the cassettes (the default under CI): no live call."),
    ),
    "suite merge": (
        Example("cas suite merge shard-1.json shard-2.json shard-3.json shard-4.json --json",
                "Merge the shards' results into the result of one unsharded run."),
    ),
    "suite diff": (
        Example("cas suite diff before.json after.json",
                "The cases whose answers or outcomes changed between two runs."),
    ),
}
