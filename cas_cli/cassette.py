"""`cas cassette list` and `cas cassette show`: the cassettes recorded for a dataset's cases."""

from __future__ import annotations

import json

import click

from .common import CASE, Example, Invocation, json_option, pass_ctx, to_json


@click.group()
@json_option
def cassette() -> None:
    """Cassettes: the model, tool and HTTP exchanges recorded for each case's run."""


@cassette.command("list")
@click.argument("dataset")
@click.option("--executor", default=None, metavar="NAME",
              help="Only the cassettes of this executor (e.g. cas:cassette, my_agent:run).")
@json_option
@pass_ctx
def list_(ctx: Invocation, dataset: str, executor: str | None) -> None:
    """The cassette in force for each (case, executor) of DATASET: its newest recording."""
    from cas.evals import cassettes
    rows = [{"case_id": case_id, "executor": name, "cassette": digest}
            for (case_id, name), digest in sorted(cassettes.current(ctx.repo(), dataset).items())
            if executor is None or name == executor]

    def human() -> str:
        lines = [f"{r['case_id']}  {r['cassette']}  {r['executor']}" for r in rows]
        return "\n".join(lines + [f"{len(rows)} cassettes"])
    ctx.emit({"dataset": dataset, "cassettes": rows}, human)


@cassette.command("show")
@click.argument("dataset")
@click.argument("case_id", metavar="CASE_ID")
@click.option("--executor", required=True, metavar="NAME",
              help="The executor the cassette was recorded under (see `cas cassette list`).")
@json_option
@pass_ctx
def show(ctx: Invocation, dataset: str, case_id: str, executor: str) -> None:
    """The exchanges of one case's cassette, in the order its run made them."""
    from cas.errors import NotFound
    from cas.evals import cassettes
    record = cassettes.read(ctx.repo(), dataset, case_id, executor)
    if record is None:
        raise NotFound(f"no cassette of case {case_id} under executor {executor!r} in "
                       f"{dataset!r} (record one with `cas suite run ... --cassette-mode "
                       "record-missing`; an erasure deletes its person's)",
                       reason="CASSETTE_NOT_FOUND", dataset=dataset, case_id=case_id)
    data = to_json(record)

    def human() -> str:
        lines = [f"cassette of {record.case_id} under {record.executor!r} in {record.dataset}: "
                 f"{len(record.exchanges)} exchanges"]
        for e in data["exchanges"]:
            answer = e.get("response", {"error": e.get("error")})
            text = json.dumps(answer, ensure_ascii=False, sort_keys=True)
            lines.append(f"  {e['adapter']:<4}  {e['name']}  "
                         f"{json.dumps(e['request'], ensure_ascii=False, sort_keys=True)[:60]}"
                         f"  -> {text[:60]}")
        return "\n".join(lines)
    ctx.emit(data, human)


EXAMPLES = {
    "cassette": (
        Example("cas cassette list support-evals",
                "The cassette in force for each case and executor."),
        Example(f"cas cassette show support-evals {CASE} --executor cas:cassette",
                "The exchanges one case's run recorded."),
    ),
    "cassette list": (
        Example("cas cassette list support-evals",
                "Every case's cassette, newest recording first."),
        Example("cas cassette list support-evals --executor my_agent.evals:run_case --json",
                "Only those of your executor, as JSON."),
    ),
    "cassette show": (
        Example(f"cas cassette show support-evals {CASE} --executor cas:cassette",
                "What each model, tool or HTTP request was answered with."),
        Example(f"cas cassette show support-evals {CASE} --executor my_agent.evals:run_case --json",
                "The cassette record as JSON."),
    ),
}
