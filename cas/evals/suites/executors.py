"""Executors: what runs each case of a suite. The shipped ones (`cas:echo`, `cas:replay`,
`cas:cassette`), a user's `module:function` loaded by name, and the check of what one returned
(docs/suites.md)."""

from __future__ import annotations

import importlib
import inspect
from typing import Any, Callable, Iterable

import msgspec

from cas.errors import FailedPrecondition, InvalidArgument
from cas.evals.calls import exception_text
from cas.evals.replay import ANSWER_KEYS, parse_plan, plan_digest, replay_case
from cas.evals.suites.files import SuiteCase
from cas.format import encoding
from cas.format.projection import withhold

SHIPPED_EXECUTORS = ("cas:echo", "cas:replay", "cas:cassette")


class Run(msgspec.Struct, frozen=True):
    """What an executor returns: the answer, the tenant it answered for, and whether the run
    reached its end (a non-terminal run is INCOMPLETE)."""

    answer: Any
    tenant: str
    terminal: bool = True


# -- shipped executors ----------------------------------------------------------------------
async def echo(case: SuiteCase, *, run_id: str) -> Run:
    """`cas:echo`: answers with the case's input, for the case's tenant (for trying things)."""
    return Run(case.input, case.tenant)


def replay_executor(plan: Any = None, *, withheld: Iterable[str] = ()) -> Callable:
    """`cas:replay`: the sandbox replay (cas.replay.replay_case) of the case's frozen case
    under `plan`, answering with the replayed run's output for the frozen case's tenant. Only
    a suite from a version has frozen cases (the runner refuses the others up front).
    `withheld`: content classes left out of the frozen case first, as `cas replay` leaves out
    what the dataset's content policy withholds now (`repo.content_policy(dataset).withheld`)."""
    parsed = parse_plan(plan)
    withheld = list(withheld)

    async def replay(case: SuiteCase, *, run_id: str) -> Run:
        if case.frozen is None:
            raise FailedPrecondition(f"case {case.id} has no frozen case to replay",
                                     reason="FROZEN_CASE_REQUIRED", case_id=case.id)
        frozen = withhold(case.frozen, withheld) if withheld else case.frozen
        replayed = replay_case(frozen, parsed).run
        return Run(replayed.output, replayed.tenant)
    replay.needs_frozen = True  # type: ignore[attr-defined]
    replay.plan_digest = plan_digest(parsed)  # type: ignore[attr-defined]
    return replay


async def cassette_executor(case: SuiteCase, *, run_id: str, cassette) -> Run:
    """`cas:cassette`: the frozen case's tool calls, in order, each answered from the case's
    cassette (request: the tool's name and recorded arguments). In a recording mode a call
    with no recording gets the frozen case's own answer ({"result"} or {"error"}, {} when it
    recorded none), which seeds cassettes from the version. The answer is the frozen
    output, for the frozen case's tenant: what the cassette adds is that every call is
    answered (a missing or stale one errors) and none is left over."""
    if case.frozen is None:
        raise FailedPrecondition(f"case {case.id} has no frozen case to answer from its "
                                 "cassette", reason="FROZEN_CASE_REQUIRED", case_id=case.id)
    for step in case.frozen.steps:
        name = step.get("tool_name")
        if step.get("type") != "tool_call" or not isinstance(name, str) or not name:
            continue
        recorded = {k: step[k] for k in ANSWER_KEYS if k in step}
        cassette.call(name, {"arguments": step.get("arguments")}, lambda: recorded)
    return Run(case.frozen.output, case.frozen.tenant)
cassette_executor.needs_frozen = True  # type: ignore[attr-defined]


def takes_keyword(function: Callable, name: str) -> bool:
    """Whether `function` declares a parameter `name` that can be given by keyword (a
    `**kwargs` does not count: an executor gets only what it names)."""
    try:
        params = inspect.signature(function).parameters
    except (TypeError, ValueError):
        return False
    param = params.get(name)
    return param is not None and param.kind in (inspect.Parameter.KEYWORD_ONLY,
                                                 inspect.Parameter.POSITIONAL_OR_KEYWORD)


def takes_cassette(executor: Callable) -> bool:
    """Whether an executor declares a `cassette` parameter (it then gets the case's)."""
    return takes_keyword(executor, "cassette")


def check_cassettes(executor: Callable, given: bool, name: str | None = None) -> bool:
    """Whether `executor` takes a cassette; refused (CASSETTE_UNUSED_BY_EXECUTOR) when
    cassettes are `given` for one that declares no `cassette` parameter. `name`: how the
    executor was named (else its own name)."""
    takes = takes_cassette(executor)
    if given and not takes:
        name = name or getattr(executor, "__qualname__", None) or repr(executor)
        raise InvalidArgument(f"executor {name} takes no cassette (it declares no `cassette` "
                              "parameter, as async def f(case, *, run_id, cassette) does): "
                              "cassettes (--cassette-mode, --cassette-ordered) are for one "
                              "that does", reason="CASSETTE_UNUSED_BY_EXECUTOR")
    return takes


def load_callable(spec: Any, what: str = "executor") -> Callable:
    """The callable `module:function` names (`function` may be dotted: `module:Class.method`)."""
    if not isinstance(spec, str) or spec.count(":") != 1 or not all(spec.split(":")):
        raise InvalidArgument(f"{what} {encoding.describe(spec)} is not module:function "
                              "(e.g. my_agent.evals:run_case)", reason="INVALID_CALLABLE")
    module_name, _, attr = spec.partition(":")
    try:
        target: Any = importlib.import_module(module_name)
    except Exception as exc:  # the user's module failed to import: say how, never a traceback
        raise InvalidArgument(f"{what} {spec!r}: cannot import {module_name!r} "
                              f"({exception_text(exc)})", reason="INVALID_CALLABLE") from None
    for part in attr.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise InvalidArgument(f"{what} {spec!r}: {module_name!r} has no {attr!r}",
                                  reason="INVALID_CALLABLE") from None
    if not callable(target):
        raise InvalidArgument(f"{what} {spec!r} is a {type(target).__name__}, not a function",
                              reason="INVALID_CALLABLE")
    return target


def load_executor(spec: Any, plan: Any = None) -> Callable:
    """An executor by name: `cas:echo`, `cas:replay` (needs `plan`), `cas:cassette`, or
    `module:function`. A plan with any executor other than `cas:replay` is refused (it would
    do nothing)."""
    if spec == "cas:replay":
        if plan is None:
            raise InvalidArgument("executor cas:replay needs a plan (--plan FILE: the effect "
                                  "of each tool, docs/replay.md)", reason="PLAN_REQUIRED")
        return replay_executor(plan)
    if plan is not None:
        raise InvalidArgument(f"a plan is only for executor cas:replay, not "
                              f"{encoding.describe(spec)}", reason="PLAN_UNUSED")
    if spec == "cas:echo":
        return echo
    if spec == "cas:cassette":
        return cassette_executor
    if isinstance(spec, str) and spec.startswith("cas:"):
        raise InvalidArgument(f"cas ships no executor {spec!r}; shipped: "
                              f"{', '.join(SHIPPED_EXECUTORS)}", reason="INVALID_CALLABLE")
    return load_callable(spec, "executor")


def load_scorer(spec: Any) -> Callable:
    """A scorer by name: `module:function`."""
    return load_callable(spec, "scorer")


# -- what an executor returned ----------------------------------------------------------------
def returned_run(value: Any) -> tuple[Run | None, str | None]:
    """(the run, None) when `value` is a Run or a dict {answer, tenant, terminal=True} with a
    string tenant and a boolean terminal, else (None, why it is none)."""
    if isinstance(value, Run):
        run = value
    elif isinstance(value, dict) and "answer" in value and "tenant" in value \
            and set(value) <= {"answer", "tenant", "terminal"}:
        run = Run(value["answer"], value["tenant"], value.get("terminal", True))
    else:
        return None, _shape_problem(value)
    if not isinstance(run.tenant, str):
        return None, f"the run's tenant is {encoding.describe(run.tenant)}, not a string"
    if type(run.terminal) is not bool:
        return None, (f"the run's terminal is {encoding.describe(run.terminal)}, not true or "
                      "false")
    return run, None


def _shape_problem(value: Any) -> str:
    if isinstance(value, dict):
        missing = [k for k in ("answer", "tenant") if k not in value]
        unknown = sorted((k for k in value if k not in ("answer", "tenant", "terminal")),
                         key=encoding.describe)
        what = (f"has no {' and no '.join(missing)}" if missing else
                f"has unknown key {encoding.describe(unknown[0])}")
        return (f"the executor returned a dict that {what}; a run is cas.runner.Run(answer, "
                "tenant, terminal=True) or a dict with those keys")
    return (f"the executor returned {encoding.describe(value)} (a {type(value).__name__}), "
            "not a cas.runner.Run(answer, tenant, terminal=True) or a dict with those keys")
