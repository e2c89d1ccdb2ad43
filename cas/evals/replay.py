"""Sandboxed replay of one frozen case under a plan of tool effects, and run diffs
(docs/replay.md)."""

from __future__ import annotations

from typing import Any, Iterator, Union

import msgspec
from blake3 import blake3

from cas.digest import PREFIX, domain
from cas.errors import InvalidArgument, InvalidJSONValue, UnsupportedFormat
from cas.format import encoding
from cas.format.cases import EncodedCase, encode_case
from cas.format.projection import withhold
from cas.format.records import Case

NONE, INTERNAL, EXTERNAL = EFFECTS = ("none", "internal", "external")
CARRIED, RECORDED, UNRECORDED, STUBBED = DISPOSITIONS = (
    "CARRIED", "RECORDED", "UNRECORDED", "STUBBED")
ANSWER_KEYS = ("result", "error")  # a tool call's recorded answer (docs/runs.md)
STUB_KEY = "cas_stub"              # the marker a stubbed call carries instead of an answer
PLAN_KIND = "replay.plan"          # the digest domain and tag of a normalised plan
PLAN_FORMAT = 1
_PLAN_FIELDS = ("default_effect", "tools", "kind", "format")
_TOOL_FIELDS = ("tool_name", "effect")


class ToolEffect(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    tool_name: str
    effect: str


class Plan(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True,
           tag_field="kind", tag=PLAN_KIND):
    """A plan as `parse_plan` returns it: the default resolved, tools sorted by name, and no
    entry that restates the default. Its canonical bytes are what `plan_digest` hashes."""

    format: int = PLAN_FORMAT
    default_effect: str = EXTERNAL
    tools: tuple[ToolEffect, ...] = ()


class StepDetail(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    index: int
    type: Union[str, None]       # the step's recorded type (None if it is not a string)
    tool_name: Union[str, None]  # the exact recorded name of a tool call; None otherwise
    disposition: str


class ReplayRecord(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """What the sandbox did: the counts are checkable against `steps_detail`."""

    plan_digest: str
    steps: int
    tool_calls: int
    replayed: int    # RECORDED steps
    stubbed: int     # STUBBED steps
    unrecorded: int  # UNRECORDED steps
    stubbed_tools: list[str]
    steps_detail: list[StepDetail]


class ReplayResult(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    run: Case  # the replayed run: a case, encoded as every case is
    record: ReplayRecord

    @property
    def run_bytes(self) -> bytes:
        """The replayed run's canonical bytes, comparable byte for byte with the frozen case's."""
        return encoding.encode(self.run)


class RunDiff(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    identical: bool
    differences: list[dict[str, Any]]  # {"path", "frozen"?, "replayed"?}; absent side omitted


# -- the plan -----------------------------------------------------------------------------
def _refuse(source: str, path: str, problem: str, reason: str = "INVALID_PLAN",
            **fields: Any) -> InvalidArgument:
    return InvalidArgument(f"{source}: {path}: {problem}", reason=reason, path=path, **fields)


def _json_text(value: Any) -> str:
    try:
        encoding.check_json(value)
        text = encoding.encode(value).decode("utf-8")
    except Exception:  # not JSON at all (a Python object, or too deep): described instead
        return encoding.describe(value)
    return text if len(text) <= 200 else text[:197] + "..."


def _effect(value: Any, source: str, path: str) -> str:
    # Only the exact spellings: "we could not read what you wrote" must never become "unset".
    if isinstance(value, str) and value in EFFECTS:
        return value
    accepted = ", ".join(EFFECTS)
    raise _refuse(source, path, f"{_json_text(value)} is not an effect; accepted values: "
                                f"{accepted}", reason="UNKNOWN_EFFECT", accepted=list(EFFECTS))


def _fields(value: Any, allowed: tuple[str, ...], source: str, path: str, what: str) -> dict:
    if not isinstance(value, dict):
        raise _refuse(source, path, f"{what} must be a JSON object, not {_json_text(value)}")
    for key in value:
        if key not in allowed:
            raise _refuse(source, f"{path}.{key}", f"unknown field; {what} has "
                                                   + ", ".join(allowed[:2]))
    return value


def parse_plan(value: Any = None, source: str = "plan") -> Plan:
    """Validate and normalise a plan: None (no plan), a `Plan`, a dict, or JSON bytes/text.

    Refusals are `InvalidArgument` naming `source` and the path: an unknown field
    (`INVALID_PLAN`), an effect that is not exactly `none`, `internal` or `external`
    (`UNKNOWN_EFFECT`, field `accepted`), a tool declared twice (`DUPLICATE_TOOL`, field
    `tool_name`), a tool name that is not a non-empty string.
    """
    if not isinstance(source, str):
        raise InvalidArgument(f"a plan's source is named by a string, not "
                              f"{encoding.describe(source)}")
    if value is None:
        return Plan()
    if isinstance(value, (bytes, bytearray, str)):
        try:
            value = encoding.decode_json(value)
        except InvalidArgument as exc:
            raise InvalidArgument(f"{source}: {exc.message}", reason="INVALID_PLAN") from None
    else:
        # Python values (a Plan built by hand too, which may be unsorted or restate its
        # default) are read as their JSON, so tuples and lists, dicts and Structs are alike.
        encoding.check_json(value)
        value = encoding.decode_json(encoding.encode(value))
    plan = _fields(value, _PLAN_FIELDS, source, "$", "a plan")
    if plan.get("kind", PLAN_KIND) != PLAN_KIND:
        raise _refuse(source, "$.kind", f"{_json_text(plan['kind'])} is not a plan's kind; "
                                        f"expected {PLAN_KIND!r}")
    fmt = plan.get("format", PLAN_FORMAT)
    if type(fmt) is not int or fmt != PLAN_FORMAT:
        raise UnsupportedFormat(f"{source}: $.format: plan format {_json_text(fmt)}; this cas "
                                f"reads format {PLAN_FORMAT} only", format=fmt)
    default = plan.get("default_effect")
    # An unset default is external: stubbing a read is recoverable, letting a write through is not.
    default = EXTERNAL if default is None else _effect(default, source, "$.default_effect")
    tools = plan.get("tools")
    if tools is None:
        tools = []
    if not isinstance(tools, list):
        raise _refuse(source, "$.tools", f"must be a JSON array, not {_json_text(tools)}")
    effects: dict[str, str] = {}
    for i, entry in enumerate(tools):
        where = f"$.tools[{i}]"
        entry = _fields(entry, _TOOL_FIELDS, source, where, "a tool policy")
        for key in _TOOL_FIELDS:
            if key not in entry:
                raise _refuse(source, f"{where}.{key}", "required field is missing")
        name = entry["tool_name"]
        # An empty name could never match a call (an unnamed call is always external), so two
        # plans differing only by it would behave alike under two digests: refused.
        if not isinstance(name, str) or not name:
            raise _refuse(source, f"{where}.tool_name",
                          f"must be a non-empty string, not {_json_text(name)}")
        effect = _effect(entry["effect"], source, f"{where}.effect")
        if name in effects:
            # Two answers to one question: whichever won would depend on the listing order.
            raise _refuse(source, f"{where}.tool_name", f"tool {name!r} is declared twice",
                          reason="DUPLICATE_TOOL", tool_name=name)
        effects[name] = effect
    return Plan(default_effect=default,
                tools=tuple(ToolEffect(tool_name=n, effect=e)
                            for n, e in sorted(effects.items()) if e != default))


def format_plan(plan: Any = None) -> bytes:
    """The canonical bytes of the normalised plan (docs/replay.md); `parse_plan` reads them."""
    return encoding.encode(parse_plan(plan))


def plan_digest(plan: Any = None) -> str:
    """`b3:` + BLAKE3("cas:replay.plan" 0x00 || format_plan(plan)): one digest per behaviour."""
    h = blake3(domain(PLAN_KIND))
    h.update(format_plan(plan))
    return PREFIX + h.hexdigest()


# -- the replay ---------------------------------------------------------------------------
_CASE_DECODER = msgspec.json.Decoder(Case)


def _case(case: Any) -> Case:
    """A fresh Case decoded from the canonical bytes of `case` (a Case, dict or EncodedCase):
    validated, and sharing no mutable value with what the caller holds."""
    return _CASE_DECODER.decode(encode_case(case).data)


def _tool_name(step: dict) -> str | None:
    name = step.get("tool_name")
    return name if isinstance(name, str) and name else None


def replay_case(case: Any, plan: Any = None) -> ReplayResult:
    """Replay one frozen case (a Case, dict or EncodedCase) under `plan`; pure, no I/O."""
    plan = parse_plan(plan)
    frozen = _case(case)
    effects = {t.tool_name: t.effect for t in plan.tools}
    steps: list[dict[str, Any]] = []
    details: list[StepDetail] = []
    stubbed_tools: set[str] = set()
    for index, step in enumerate(frozen.steps):
        kind = step.get("type")
        name = None
        if kind != "tool_call":
            disposition = CARRIED
        else:
            name = _tool_name(step)
            # A call the recording does not name is external: no default reaches it.
            effect = EXTERNAL if name is None else effects.get(name, plan.default_effect)
            if effect == NONE:
                recorded = any(key in step for key in ANSWER_KEYS)
                disposition = RECORDED if recorded else UNRECORDED
            else:
                disposition = STUBBED
                # Any recorded answer is discarded, so a stubbed run never passes for one that ran.
                step = {k: v for k, v in step.items() if k not in ANSWER_KEYS}
                step[STUB_KEY] = {"effect": effect}
                if name is not None:
                    stubbed_tools.add(name)
        steps.append(step)
        details.append(StepDetail(index=index, type=kind if isinstance(kind, str) else None,
                                  tool_name=name, disposition=disposition))
    counts = {d: 0 for d in DISPOSITIONS}
    for detail in details:
        counts[detail.disposition] += 1
    # The outcome, withheld classes and every other field stay exactly as recorded.
    run = msgspec.structs.replace(frozen, steps=steps)
    record = ReplayRecord(
        plan_digest=plan_digest(plan), steps=len(details),
        tool_calls=len(details) - counts[CARRIED], replayed=counts[RECORDED],
        stubbed=counts[STUBBED], unrecorded=counts[UNRECORDED],
        stubbed_tools=sorted(stubbed_tools), steps_detail=details)
    return ReplayResult(run=run, record=record)


def _check_repository(repo: Any, what: str) -> None:
    """Refuse what cannot be read as a repository (duck-typed: what reads a case and the
    dataset's content policy is one), rather than fail on its first missing method."""
    if not all(callable(getattr(repo, m, None)) for m in ("case", "content_policy")):
        raise InvalidArgument(f"{what} reads from a cas.Repository, not "
                              f"{encoding.describe(repo)}")


def replay_item(repo, dataset: str, version: int, item_id: str, plan: Any = None) -> ReplayResult:
    """Replay case `item_id` of `dataset@version` (refused for a retired version by
    `repo.case`). Reads only; writes nothing to the repository.

    The dataset's current content policy (`repo.content_policy`) still controls what a replay
    can include: classes it withholds now are left out of the replayed run (and named in its
    `withheld`), so a read-only call whose recorded answer is withheld replays as UNRECORDED."""
    _check_repository(repo, "replay_item")
    plan = parse_plan(plan)  # a bad plan is refused before anything is read
    case = repo.case(dataset, version, item_id)
    withheld = repo.content_policy(dataset).withheld
    if withheld:
        case = withhold(case, withheld)
    return replay_case(case, plan)


def diff_item(repo, dataset: str, version: int, item_id: str, plan: Any = None,
              against: Any = None, *, plan_source: str = "plan",
              against_source: str = "run") -> "RunDiff":
    """How a run differs from case `item_id` of `dataset@version`: the case replayed under
    `plan`, or `against` (a run as `parse_run_document` reads it: JSON bytes or text of a
    case, a `cas replay --json` reply or a `cas case --json` reply; or a case already decoded),
    diffed as it is. A plan given with `against` is refused: it would do nothing."""
    _check_repository(repo, "diff_item")
    if plan is not None and against is not None:
        raise InvalidArgument("a plan does nothing when the run to diff against is given "
                              "(it is diffed as it is)", reason="PLAN_UNUSED")
    plan = parse_plan(plan, plan_source) if against is None else None
    if isinstance(against, (bytes, bytearray, str)):
        against = parse_run_document(against, against_source)
    frozen = repo.case(dataset, version, item_id)
    return diff_runs(frozen, replay_case(frozen, plan) if against is None else against)


# -- diffs --------------------------------------------------------------------------------
def _run_value(run: Any, side: str) -> dict:
    """A run as the JSON object of its case encoding. A ReplayResult's run, a Case, an
    EncodedCase, or a case as a dict or JSON bytes (read as `cas commit` reads a case)."""
    if isinstance(run, ReplayResult):
        run = run.run
    if isinstance(run, (bytes, bytearray, memoryview)):
        try:
            run = encoding.decode_json(bytes(run))
        except InvalidArgument as exc:
            raise encoding.in_context(exc, f"{side} run") from None
    if not isinstance(run, (Case, EncodedCase, dict)):
        raise InvalidArgument(f"{side} run must be a case (a JSON object), not "
                              f"{_json_text(run)[:40]}")
    try:
        data = encode_case(run).data
    except InvalidJSONValue:
        raise
    except InvalidArgument as exc:
        raise encoding.in_context(exc, f"{side} run") from None
    return encoding.decode_json(data)


def _pointer(path: str, key: str) -> str:
    # RFC 6901: "~" is written "~0" and "/" is written "~1" ("~" first, so "~1" stays itself).
    return path + "/" + key.replace("~", "~0").replace("/", "~1")


def differences(a: Any, b: Any, path: str = "") -> Iterator[dict[str, Any]]:
    """Differences in document order: canonical key order (code point) and array order; each
    {"path" (a JSON pointer), "frozen"?, "replayed"?}, a side that lacks the value omitted."""
    if type(a) is dict and type(b) is dict:
        pairs = [(_pointer(path, k), a, b, k) for k in sorted(a.keys() | b.keys())]
    elif type(a) is list and type(b) is list:
        pairs = [(f"{path}/{i}", a, b, i) for i in range(max(len(a), len(b)))]
    else:
        # Leaves compare by canonical bytes: 1 and 1.0, or 0.0 and -0.0, are different values.
        if encoding.encode(a) != encoding.encode(b):
            yield {"path": path, "frozen": a, "replayed": b}
        return
    for where, x, y, key in pairs:
        in_x = key in x if type(x) is dict else key < len(x)
        in_y = key in y if type(y) is dict else key < len(y)
        if in_x and in_y:
            yield from differences(x[key], y[key], where)
        elif in_x:  # a side that lacks the value has no key in the entry: absent is not null
            yield {"path": where, "frozen": x[key]}
        else:
            yield {"path": where, "replayed": y[key]}


def diff_runs(frozen: Any, replayed: Any) -> RunDiff:
    """Compare two runs encoded as cases (each a ReplayResult, Case, EncodedCase, or a case as
    a dict or JSON bytes). `identical` is whether their canonical bytes are equal; otherwise
    every difference, as a JSON pointer with the value on each side that has one."""
    a, b = _run_value(frozen, "frozen"), _run_value(replayed, "replayed")
    if encoding.encode(a) == encoding.encode(b):
        return RunDiff(identical=True, differences=[])
    return RunDiff(identical=False, differences=list(differences(a, b, "")))


def _reply_one_level_deeper(data: bytes, exc: InvalidArgument, source: str) -> dict:
    """A `cas replay --json` reply holds its case one level down, so a case as deep as a case
    may be makes a reply one level deeper than the limit: that one is accepted (only it)."""
    if exc.reason == "JSON_TOO_DEEP":
        try:
            value = encoding.parse_json(data, max_depth=encoding.MAX_DEPTH + 1)
        except InvalidArgument:
            value = None
        if isinstance(value, dict) and set(value) == {"run", "record"}:
            return value
    if exc.reason is None:
        exc = InvalidArgument(f"invalid JSON: {exc.message}")
    raise encoding.in_context(exc, source) from None


def parse_run_document(data: bytes, source: str = "run") -> dict:
    """A run read from JSON: a case object, a `cas replay --json` reply (its `run`), or a
    `cas case --json` reply (its `id` checked against the rest, then dropped)."""
    if not isinstance(source, str):
        raise InvalidArgument(f"a run's source is named by a string, not "
                              f"{encoding.describe(source)}")
    try:
        value = encoding.parse_json(data)
    except InvalidArgument as exc:
        value = _reply_one_level_deeper(data, exc, source)
    if isinstance(value, dict) and set(value) == {"run", "record"}:
        value = value["run"]  # a case never has these two fields: this is a replay reply
    if not isinstance(value, dict):
        raise InvalidArgument(f"{source}: a run must be a JSON object (a case, or the reply "
                              "of cas replay --json)")
    if "id" in value:  # not a case field: the id `cas case --json` prints beside the case
        value = dict(value)
        claimed = value.pop("id")
        try:
            case_id = encode_case(value).case_id
        except InvalidArgument as exc:
            raise InvalidArgument(f"{source}: {exc.message}") from None
        if case_id != claimed:
            raise InvalidArgument(f"{source}: its id {_json_text(claimed)} is not the digest "
                                  "of the case it holds", reason="CASE_ID_MISMATCH")
    return value
