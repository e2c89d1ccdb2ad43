"""`cas suite ...`: a pinned version as a suite file, and the runner (run, merge, diff, compare)."""

from __future__ import annotations

import json
import os
import sys

import click

from .common import (INTEGER, VERSION_ARGS, VERSION_FORMS, Example, Invocation, Seconds,
                     json_option, lock_option, pass_ctx, split_version_args, to_json)


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
    if result.repeat == 1:
        size = f"{len(result.results)} cases"
    else:
        size = (f"{len(result.results) // result.repeat} cases x {result.repeat} "
                "repetitions")
    return (f"suite {result.suite.name} {result.suite.version}{shard}: {size}{took}: "
            f"{c['COMPLETED']} completed, {c['ERRORED']} errored, "
            f"{c['INCOMPLETE']} incomplete; {verdict}; digest {result.digest}")


def _result_text(result, elapsed: float | None = None, summary=None) -> str:
    many = result.repeat > 1
    lines = [f"{r.outcome:<10}  {r.position:>6}  {r.id}"
             + (f"  repetition {r.repetition}" if many else "") + f"  {r.reason}"
             for r in result.results if r.outcome != "COMPLETED"]
    if summary is not None:
        lines += _summary_lines(summary)
    return "\n".join(lines + [_summary(result, elapsed)])


SHOWN_CASES = 50  # a per-case summary longer than this shows only the cases worth a look


def _summary_lines(summary) -> list[str]:
    """The per-case summary of a result of several repetitions: each case and metric, the
    flaky cases named."""
    lines = []
    shown = summary.cases
    if len(shown) > SHOWN_CASES:  # a long suite: the cases worth a look, the rest counted
        shown = [c for c in shown if c.flaky or c.completed < c.repetitions or any(
            m.kind == "pass" and m.passes < m.completed for m in c.metrics.values())]
    for c in shown:
        counted = f"{c.completed}/{c.repetitions} completed" + \
            (f", {c.errored} errored" if c.errored else "") + \
            (f", {c.incomplete} incomplete" if c.incomplete else "")
        lines.append(f"{'FLAKY' if c.flaky else 'case':<10}  {c.position:>6}  {c.id}  {counted}")
        for metric, m in c.metrics.items():
            if m.kind == "pass":
                ks = " ".join(f"pass@{k}={m.pass_at_k[k]:.3f} pass^{k}={m.pass_hat_k[k]:.3f}"
                              for k in m.pass_at_k)
                lines.append(f"{'':>20}{metric}: {m.passes}/{m.completed} passed  {ks}"
                             + ("  FLAKY" if m.flaky else ""))
            elif m.stdev is None:
                lines.append(f"{'':>20}{metric}: mean {m.mean:.6g} (n={m.n})")
            else:
                lines.append(f"{'':>20}{metric}: mean {m.mean:.6g} sd {m.stdev:.6g} "
                             f"95% [{m.low:.6g}, {m.high:.6g}] (n={m.n})")
    if len(shown) < len(summary.cases):
        lines.append(f"({len(summary.cases) - len(shown)} more cases passed and completed "
                     "every repetition: --json shows every case)")
    if summary.flaky:
        lines.append(f"{len(summary.flaky)} flaky case{'s' if len(summary.flaky) > 1 else ''}:"
                     f" {', '.join(summary.flaky)}")
    return lines


def _with_summary(result, pass_k: str | None):
    """(the JSON a result prints, its per-case summary): with one repetition the JSON is
    the result alone, as it always was, and there is no summary."""
    from cas.evals.suites.repetitions import summarize
    out = result.to_json()
    if result.repeat == 1 and pass_k is None:
        return out, None
    summary = summarize(result, pass_k)
    out["summary"] = summary.to_json()
    return out, summary


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
              help="Record the whole result (every repetition) and its scores as a score "
                   "batch of EXPERIMENT over the pinned version (created if missing); read "
                   "it back as DATASET:EXPERIMENT.")
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
@click.option("--repeat", type=INTEGER, default=1, show_default=True, metavar="N",
              help="Run every case N times (each repetition its own run id and seed); the "
                   "result keeps every repetition and a per-case summary names flaky cases.")
@click.option("--pass-k", "pass_k", default=None, metavar="K,K...",
              help="The k of pass@k and pass^k in the per-case summary (default: 1 and N).")
@lock_option
@json_option
@pass_ctx
def run(ctx: Invocation, source: str, executor_spec: str, scorer_spec: str | None,
        concurrency: int, seed: int, timeout: float | None, artefacts: str | None,
        shard_text: str | None, experiment: str | None, plan_file, cassette_mode: str | None,
        cassette_strict: bool, cassette_ordered: bool, grace: float, repeat: int,
        pass_k: str | None) -> None:
    """Run a suite (a suite file, or DATASET@N of the repository) through an executor.

    Exits 0 when every case COMPLETED, 10 when any case ERRORED, else 11 when any is
    INCOMPLETE (timed out, non-terminal, or stopped by SIGINT/SIGTERM: the result is still
    printed). With --repeat N every case runs N times; flaky cases are named, and do not
    by themselves change the exit code."""
    import time

    from cas.evals.suites import session
    from cas.evals.suites.repetitions import parse_pass_k
    from cas.evals.suites.results import check_repeat
    check_repeat(repeat)
    if pass_k is not None:
        parse_pass_k(pass_k)
    if os.getcwd() not in sys.path:  # the user's module:function lives where they run cas
        sys.path.insert(0, os.getcwd())
    if not os.path.exists(source) and "@" not in source:  # a dataset name: cas.lock pins it
        source = str(ctx.locked_or_refused(source, "suite run", ("SUITE.jsonl", "DATASET@N"),
                                           f"SOURCE {source!r} is neither a suite file nor "
                                           "DATASET@N of the repository").pin)
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
                                    progress=progress, repeat=repeat)
    elapsed = time.monotonic() - started
    if progress is not None:
        ctx.progress("", 0, 0)
    out, summary = _with_summary(result, pass_k)
    if recorded is not None:
        out["recorded"] = to_json(recorded)
    out.update(ctx.resolved_json())

    def human() -> str:
        text = _result_text(result, elapsed, summary)
        if recorded is not None:
            text += (f"\nrecorded {recorded.scores} scores in experiment {recorded.experiment}"
                     f" over {recorded.dataset}@{recorded.version}"
                     + (f" (batch {recorded.batch})" if recorded.batch else "")
                     + (f"; result {recorded.result} (compare it as {recorded.dataset}:"
                        f"{recorded.experiment})" if recorded.result else "")
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
@click.option("--record", "experiment", default=None, metavar="EXPERIMENT",
              help="Record the merged result (every repetition) and its scores in EXPERIMENT "
                   "over the pinned version, as cas suite run --record does.")
@json_option
@pass_ctx
def merge(ctx: Invocation, files, experiment: str | None) -> None:
    """Merge the results of every shard into the result of one unsharded run.

    Takes the `cas suite run --shard I/N --json` outputs, restores suite order (the digest is
    the unsharded run's) and exits with the merged result's exit code."""
    from cas.evals.suites.results import merge as merge_shards
    results, names = _read_results(files)
    merged = merge_shards(results, names)
    out, summary = _with_summary(merged, None)
    recorded = None
    if experiment is not None:
        from cas.evals.suites.recording import record
        recorded = record(ctx.repo(), merged, experiment)
        out["recorded"] = to_json(recorded)

    def human() -> str:
        text = _result_text(merged, summary=summary)
        if recorded is not None:
            text += (f"\nrecorded {recorded.scores} scores in experiment {recorded.experiment}"
                     f" over {recorded.dataset}@{recorded.version}; result {recorded.result}"
                     f" (compare it as {recorded.dataset}:{recorded.experiment})")
        return text
    ctx.emit(out, human)
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
        lines = [f"{c['id']}"
                 + (f" repetition {c['repetition']}" if "repetition" in c else "")
                 + f": {side(c['before'])} -> {side(c['after'])}" for c in d["changed"]]
        return "\n".join(lines + [f"{len(d['changed'])} changed, {d['unchanged']} unchanged"])
    ctx.emit(d, human)


@suite.command("compare")
@click.argument("baseline")
@click.argument("candidate")
@click.option("--alpha", type=float, default=0.05, show_default=True,
              help="Significance of the suite-level tests (after Holm) and of each case's.")
@click.option("--min-effect", "min_effect", multiple=True, metavar="METRIC=DELTA",
              help="The smallest change in METRIC that counts (repeatable).")
@click.option("--lower-is-better", "lower_is_better", multiple=True, metavar="METRIC",
              help="A metric where lower is better (repeatable).")
@click.option("--max-regressed-cases", "max_regressed", type=INTEGER, default=None,
              metavar="K", help="Regressed when more than K cases regress (not in the gate "
                                "unless given).")
@click.option("--seed", type=INTEGER, default=0, show_default=True,
              help="Seed of the bootstrap of the effect's interval.")
@click.option("--format", "output_format", type=click.Choice(["text", "markdown"]),
              default="text", show_default=True,
              help="markdown: a pull request comment (the verdict first).")
@click.option("--marker", default=None, metavar="TEXT",
              help="Begin the markdown with <!-- TEXT --> (to find the comment again).")
@click.option("--suite", "suite_source", default=None, metavar="SOURCE",
              help="The suite (a file or DATASET@N) whose inputs the markdown shows; default: "
                   "the pinned version, when this is its repository.")
@click.option("--junit", "junit", type=click.Path(dir_okay=False), default=None,
              metavar="FILE", help="Also write JUnit XML: one test per case and metric.")
@json_option
@pass_ctx
def compare(ctx: Invocation, baseline: str, candidate: str, alpha: float,
            min_effect: tuple[str, ...], lower_is_better: tuple[str, ...],
            max_regressed: int | None, seed: int, output_format: str, marker: str | None,
            suite_source: str | None, junit: str | None) -> None:
    """Whether a candidate run differs from a baseline run, beyond noise.

    BASELINE and CANDIDATE are result files (`cas suite run --json`) or recorded
    experiments DATASET:EXPERIMENT, over one pinned version or suite file. Exits 0 when the
    candidate held or improved, 14 when it regressed, 15 when inconclusive."""
    from cas.errors import CasError, InvalidArgument
    from cas.evals.suites import compare as cmp
    if ctx.as_json and output_format != "text":
        raise InvalidArgument("--json and --format markdown are two outputs: give one",
                              reason="USAGE")
    cmp.stats()  # refused naming the `stats` extra before anything is read
    gate = cmp.Gate(alpha=alpha, min_effect=cmp.parse_min_effect(min_effect),
                    lower_is_better=tuple(lower_is_better), max_regressed_cases=max_regressed,
                    seed=seed)
    a, a_name = cmp.read_side(baseline, ctx.repo)
    b, b_name = cmp.read_side(candidate, ctx.repo)
    result = cmp.compare(a, b, gate, names=(a_name, b_name))
    for warning in result.warnings:
        click.echo(f"warning: {warning}", err=True)
    if junit is not None:
        with open(junit, "wb") as f:
            f.write(cmp.to_junit(result))
    if output_format == "markdown":
        from cas.evals.suites import session
        inputs = None
        try:
            if suite_source is not None:
                opened = session.open_source(suite_source, ctx.repo)
            else:
                opened = session.pinned_suite(b.suite.version, ctx.repo)
            inputs = {c.id: c.input for c in opened.suite.cases}
        except CasError:
            if suite_source is not None:
                raise  # asked for: its refusal says why
        click.echo(cmp.to_markdown(result, inputs, marker), nl=False)
    else:
        ctx.emit(result.to_json(), lambda: cmp.to_text(result))
    click.get_current_context().exit(result.exit_code)


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
        Example("cas suite run support-evals@2 --executor my_agent.evals:run_case "
                "--scorer my_agent.evals:score --repeat 5 --pass-k 1,3,5 --record prompt-v2",
                "Run every case five times live: pass@k, pass^k, flaky cases; recorded."),
    ),
    "suite merge": (
        Example("cas suite merge shard-1.json shard-2.json shard-3.json shard-4.json --json",
                "Merge the shards' results into the result of one unsharded run."),
        Example("cas suite merge shard-*.json --record nightly-2026-12-05",
                "Merge, then record the whole run (read back as DATASET:EXPERIMENT)."),
    ),
    "suite diff": (
        Example("cas suite diff before.json after.json",
                "The cases whose answers or outcomes changed between two runs."),
    ),
    "suite compare": (
        Example("cas suite compare baseline.json candidate.json",
                "Did the candidate regress beyond noise? Exits 0, 14 or 15."),
        Example("cas suite compare support-evals:prompt-v1 support-evals:prompt-v2 "
                "--min-effect accuracy=0.03 --format markdown --marker cas-compare",
                "Two recorded experiments; a pull request comment, the verdict first."),
        Example("cas suite compare baseline.json candidate.json --lower-is-better latency "
                "--junit compare.xml --json",
                "Gate in CI: JUnit XML for the test report, JSON for the script."),
    ),
}
