"""`cas evalset ...`: eval sets (scenarios worth re-running) and regression runs over them
(docs/evalset.md)."""

from __future__ import annotations

import os
import sys

import click

from .common import CASE, INTEGER, Example, Invocation, Seconds, json_option, pass_ctx, to_json


def _open(ctx: Invocation, name: str, capacity: int | None = None):
    """The eval set NAME; only a capture creates one (with its capacity)."""
    from cas.evals import evalset as es
    if capacity is None:
        return es.open(ctx.repo(), name, create=False)
    return es.open(ctx.repo(), name, capacity=capacity, create=True)


def _where(name: str, version: int | None) -> str:
    return f"{name}@{version}" if version is not None else f"{name} (no version yet)"


def _row(s) -> str:
    signature = ",".join(s.signature) or "-"
    replay = "replayable" if s.replay_input is not None else "not-replayable"
    return f"{s.kind:<7}  {s.id}  {s.captured_at}  {s.session_id}  {signature}  {replay}"


def _scenario_text(s) -> str:
    import json
    baseline = json.dumps(s.baseline_scores, ensure_ascii=False, sort_keys=True)
    replay = "null (not replayable)" if s.replay_input is None else \
        json.dumps(s.replay_input, ensure_ascii=False, sort_keys=True)
    return "\n".join([f"id:           {s.id}", f"kind:         {s.kind}",
                      f"signature:    {', '.join(s.signature) or '-'}",
                      f"baseline:     {baseline}", f"replay input: {replay}",
                      f"notes:        {s.notes or '-'}", f"session:      {s.session_id}",
                      f"captured at:  {s.captured_at}"])


def _json_value(text: str, what: str):
    from cas.errors import CasError
    from cas.format import encoding
    try:
        return encoding.parse_json(text)
    except CasError as exc:
        raise encoding.in_context(exc, what) from None


@click.group()
@json_option
def evalset() -> None:
    """Eval sets: failures to fix and wins to protect, re-run against their baselines."""


@evalset.command("list")
@click.argument("name")
@click.option("--kind", type=click.Choice(["failure", "win"]), default=None,
              help="Only the failures, or only the wins.")
@json_option
@pass_ctx
def list_(ctx: Invocation, name: str, kind: str | None) -> None:
    """The scenarios of eval set NAME's head, oldest first."""
    corpus = _open(ctx, name).read()
    rows = corpus.of_kind(kind)

    def human() -> str:
        return "\n".join([_row(s) for s in rows] +
                         [f"{_where(name, corpus.version)}: {len(rows)} "
                          f"scenario{'' if len(rows) == 1 else 's'}"])
    ctx.emit({"evalset": name, "version": corpus.version, "scenarios": to_json(rows)}, human)


@evalset.command("show")
@click.argument("name")
@click.argument("case_id", metavar="CASE_ID")
@json_option
@pass_ctx
def show(ctx: Invocation, name: str, case_id: str) -> None:
    """One scenario of eval set NAME's head."""
    corpus = _open(ctx, name).read()
    s = corpus.get(case_id)
    ctx.emit({"evalset": name, "version": corpus.version, "scenario": to_json(s)},
             lambda: f"{_where(name, corpus.version)}\n{_scenario_text(s)}")


@evalset.command("capture")
@click.argument("name")
@click.option("--session", "session_id", required=True, metavar="SESSION_ID",
              help="The session the scenario comes from.")
@click.option("--kind", required=True, type=click.Choice(["failure", "win"]),
              help="failure (something to fix) or win (something to protect).")
@click.option("--signature", "labels", multiple=True, metavar="LABEL",
              help="A condition label (repeat for each).")
@click.option("--baseline", "baselines", multiple=True, metavar="METRIC=VALUE",
              help="A baseline score at capture time, a number or true/false (repeat).")
@click.option("--replay-input", "replay_input", default=None, metavar="JSON",
              help="What a replay starts from, as JSON (absent: not replayable).")
@click.option("--notes", default="", metavar="TEXT", help="Notes (scrubbed before storing).")
@click.option("--capacity", type=INTEGER, default=200, show_default=True,
              help="The most scenarios the eval set keeps (the oldest failures go first).")
@json_option
@pass_ctx
def capture(ctx: Invocation, name: str, session_id: str, kind: str, labels: tuple[str, ...],
            baselines: tuple[str, ...], replay_input: str | None, notes: str,
            capacity: int) -> None:
    """Capture a scenario into eval set NAME (created if missing), sealing a version.

    The same (session, signature, kind) again seals nothing. At capacity the oldest failures
    are evicted in the same version; wins never are (a corpus full of wins refuses)."""
    from cas.errors import InvalidArgument
    from cas.repo import scores
    baseline = {}
    for text in baselines:
        metric, sep, value = text.partition("=")
        if not sep or not metric:
            raise InvalidArgument(f"--baseline {text!r} is not METRIC=VALUE (e.g. "
                                  "success=1.0)", reason="USAGE")
        baseline[metric] = scores.parse_value(value)
    value = None if replay_input is None else _json_value(replay_input, "--replay-input")
    report = _open(ctx, name, capacity).capture_report(
        session_id, kind, list(labels), baseline, replay_input=value, notes=notes)

    def human() -> str:
        s = report.scenario
        if not report.sealed:
            return f"{_where(name, report.version)}: already holds {s.id} (nothing sealed)"
        gone = f"; evicted {len(report.evicted)} oldest failure(s)" if report.evicted else ""
        return f"sealed {name}@{report.version}: captured {s.kind} {s.id}{gone}"
    ctx.emit({"evalset": name, "version": report.version, "sealed": report.sealed,
              "evicted": list(report.evicted), "scenario": to_json(report.scenario)}, human)


@evalset.command("attach")
@click.argument("name")
@click.argument("case_id", metavar="CASE_ID")
@click.option("--replay-input", "replay_input", required=True, metavar="JSON",
              help="The input a replay of the scenario starts from, as JSON.")
@json_option
@pass_ctx
def attach(ctx: Invocation, name: str, case_id: str, replay_input: str) -> None:
    """Give scenario CASE_ID a replay input, sealing a version (its id changes)."""
    es = _open(ctx, name)
    new = es.attach_input(case_id, _json_value(replay_input, "--replay-input"))
    version = es.version
    ctx.emit({"evalset": name, "version": version, "replaced": case_id,
              "scenario": to_json(new)},
             lambda: f"{name}@{version}: {case_id} is now {new.id}")


@evalset.command("matching")
@click.argument("name")
@click.option("--signature", "labels", multiple=True, required=True, metavar="LABEL",
              help="A label the signature must hold (repeat: all of them).")
@json_option
@pass_ctx
def matching(ctx: Invocation, name: str, labels: tuple[str, ...]) -> None:
    """The failures of eval set NAME whose signature holds every label, newest first."""
    corpus = _open(ctx, name).read()
    rows = corpus.matching(list(labels))

    def human() -> str:
        return "\n".join([_row(s) for s in rows] +
                         [f"{_where(name, corpus.version)}: {len(rows)} matching "
                          f"failure{'' if len(rows) == 1 else 's'}"])
    ctx.emit({"evalset": name, "version": corpus.version, "labels": sorted(set(labels)),
              "scenarios": to_json(rows)}, human)


@evalset.command("renew")
@click.argument("name")
@json_option
@pass_ctx
def renew(ctx: Invocation, name: str) -> None:
    """After an erasure retired eval set NAME's head, seal a version of what is left."""
    es = _open(ctx, name)
    version = es.renew()
    head = es.version
    ctx.emit({"evalset": name, "version": head, "renewed": version is not None},
             lambda: f"sealed {name}@{version}: the scenarios the erasure left"
             if version is not None else f"{_where(name, head)} is not retired: nothing to do")


@evalset.command("regress")
@click.argument("source", metavar="EVALSET@N")
@click.option("--replay", "replay_spec", default=None, metavar="MODULE:FUNCTION",
              help="replay(scenario, system_context) -> new run id, sync or async. Without "
                   "it every scenario is skipped.")
@click.option("--scorer", "scorer_spec", default=None, metavar="MODULE:FUNCTION",
              help="scorer(scenario, new_run_id) -> {metric: value}; default: the new run's "
                   "recorded outcome.scores.")
@click.option("--timeout", type=Seconds(), default=None,
              help="Seconds each replay (and scorer) call may take; then inconclusive.")
@click.option("--system-context", "system_context", default="", metavar="TEXT|@FILE",
              help="Passed to every replay (@FILE: the file's text).")
@click.option("--lower-is-better", "lower", multiple=True, metavar="METRIC",
              help="A metric for which lower is better (repeat).")
@click.option("--tolerance", type=float, default=0.0, show_default=True,
              help="How far a metric may move before it counts as worse or better.")
@click.option("--experiment", default=None, metavar="NAME",
              help="Record into this experiment (default: regress-<digest of the inputs>).")
@click.option("--no-record", "no_record", is_flag=True,
              help="Do not record the outcomes and scores as a score batch.")
@click.option("--repeat", type=INTEGER, default=1, show_default=True, metavar="N",
              help="Replay every scenario N times (a replay function declaring `repetition` "
                   "gets it); a win that regresses only sometimes is flaky: reported, and "
                   "not by itself a failure.")
@json_option
@pass_ctx
def regress(ctx: Invocation, source: str, replay_spec: str | None, scorer_spec: str | None,
            timeout: float | None, system_context: str, lower: tuple[str, ...],
            tolerance: float, experiment: str | None, no_record: bool, repeat: int) -> None:
    """Re-run every scenario of an eval set version against its baselines.

    Exits 0 when no win regressed and every win was checked, 12 when any win regressed,
    else 13 when any win is inconclusive or skipped. Failures never change the exit code,
    and neither does a flaky win (--repeat: it regressed in some repetitions only)."""
    from cas.errors import InvalidArgument
    from cas.evals import evalset as es
    from cas.evals.suites.executors import load_callable
    from cas.evals.suites.results import check_repeat
    check_repeat(repeat)
    if os.getcwd() not in sys.path:  # the user's module:function lives where they run cas
        sys.path.insert(0, os.getcwd())
    replay = load_callable(replay_spec, "replay function") if replay_spec else None
    scorer = load_callable(scorer_spec, "scorer") if scorer_spec else None
    if system_context.startswith("@"):
        try:
            with open(system_context[1:], encoding="utf-8") as f:
                system_context = f.read()
        except (OSError, UnicodeDecodeError) as exc:
            raise InvalidArgument(f"--system-context {system_context}: cannot read it ({exc})",
                                  reason="USAGE") from None
    result = es.regress(ctx.repo(), source, replay, scorer, timeout=timeout,
                        system_context=system_context, lower_is_better=list(lower),
                        tolerance=tolerance, record=not no_record, experiment=experiment,
                        repeat=repeat)
    for warning in result.warnings:
        click.echo(f"cas: warning: {warning}", err=True)
    out = result.to_json()
    out["recorded"] = to_json(result.recorded)

    def human() -> str:
        lines = [f"{r.outcome:<12}  {r.kind:<7}  {r.id}  {r.reason or ''}".rstrip()
                 for r in result.results]
        c = result.counts
        verdict = "ok" if result.exit_code == 0 else f"NOT ok (exit {result.exit_code})"
        flaky = f", {c['flaky']} flaky" if result.repeat > 1 else ""
        times = f" x {result.repeat} repetitions" if result.repeat > 1 else ""
        lines.append(f"evalset {result.evalset}@{result.version}: {len(result.results)} "
                     f"scenarios{times}: {c['held']} held, {c['regressed']} regressed, "
                     f"{c['improved']} improved, {c['inconclusive']} inconclusive, "
                     f"{c['skipped']} skipped{flaky}; {verdict}")
        if result.flaky:
            lines.append(f"FLAKY (regressed in some repetitions only): "
                         f"{', '.join(result.flaky)}")
        if result.recorded is not None:
            r = result.recorded
            lines.append(f"recorded {r.scores} scores in experiment {r.experiment} over "
                         f"{result.evalset}@{result.version} (batch {r.batch})"
                         + (" (experiment created)" if r.created else ""))
        return "\n".join(lines)
    ctx.emit(out, human)
    click.get_current_context().exit(result.exit_code)


EXAMPLES = {
    "evalset": (
        Example("cas evalset list support-regressions --kind failure",
                "The failures of an eval set, oldest first."),
        Example("cas evalset regress support-regressions@7 --replay my_agent.evals:replay",
                "Re-run every scenario of version 7 against its baselines."),
    ),
    "evalset list": (
        Example("cas evalset list support-regressions",
                "Every scenario of the head, oldest first."),
        Example("cas evalset list support-regressions --kind win --json",
                "Only the wins (the scenarios to protect), as JSON."),
    ),
    "evalset show": (
        Example(f"cas evalset show support-regressions {CASE}",
                "One scenario: signature, baseline, replay input, notes."),
    ),
    "evalset capture": (
        Example("cas evalset capture support-regressions --session s-42 --kind failure "
                "--signature tool_failed:search --baseline success=0",
                "Keep a failure to fix; seals a version."),
        Example("cas evalset capture support-regressions --session s-43 --kind win "
                "--signature refund --baseline success=1 --replay-input '{\"q\": \"refund\"}'",
                "Keep a win to protect, with the input a replay starts from."),
    ),
    "evalset attach": (
        Example(f"cas evalset attach support-regressions {CASE} "
                "--replay-input '{\"q\": \"where is my order\"}'",
                "Make a scenario replayable (its id changes; seals a version)."),
    ),
    "evalset matching": (
        Example("cas evalset matching support-regressions --signature tool_failed:search",
                "The failures with this condition, newest first."),
    ),
    "evalset renew": (
        Example("cas evalset renew support-regressions",
                "After an erasure retired the head, seal a version of what is left."),
    ),
    "evalset regress": (
        Example("cas evalset regress support-regressions@7 --replay my_agent.evals:replay "
                "--timeout 60",
                "Re-run each scenario; exit 12: a win regressed, 13: one unchecked."),
        Example("cas evalset regress support-regressions@7 --replay my_agent.evals:replay "
                "--scorer my_agent.evals:score --lower-is-better latency_s --json",
                "Score the new runs yourself; lower latency is better."),
        Example("cas evalset regress support-regressions@7 --replay my_agent.evals:replay "
                "--repeat 5",
                "Replay each scenario five times: a win failing only sometimes is flaky."),
        Example("cas evalset regress support-regressions@7 --no-record",
                "Without --replay nothing is re-run: every scenario is reported skipped."),
    ),
}
