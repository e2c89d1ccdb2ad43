"""The `langsmith` importer: LangSmith run trees, run lists and post/patch batches, a run per
trace."""

from __future__ import annotations

import datetime
from typing import Any

from cas.interop.importers.common import (CallJoiner, Options, derived_run_id, each_document,
                                          finish_run, kept, listed, refuse, tool_arguments)

NAME = "langsmith"
RUN_TYPES = ("llm", "chain", "tool", "retriever", "embedding", "prompt", "parser")
# LangChain's message classes and message-dict types, as the roles cas records.
ROLES = {"HumanMessage": "user", "AIMessage": "assistant", "SystemMessage": "system",
         "ToolMessage": "tool", "FunctionMessage": "function", "human": "user", "ai": "assistant",
         "system": "system", "tool": "tool", "function": "function", "developer": "developer"}
TREE_FIELDS = ("child_runs", "inputs", "outputs")


def _is_run(value: Any) -> bool:
    return (isinstance(value, dict) and value.get("run_type") in RUN_TYPES
            and isinstance(value.get("inputs", {}), dict)
            and any(k in value for k in ("dotted_order", "trace_id", "child_runs", "inputs")))


def _is_batch(value: Any) -> bool:
    """The SDK's create/update payloads: `{"post": [runs], "patch": [updates]}`."""
    if not isinstance(value, dict) or not value or not set(value) <= {"post", "patch"}:
        return False
    members = [m for k in value for m in (value[k] if isinstance(value[k], list) else [None])]
    return bool(members) and all(isinstance(m, dict) and ("id" in m or "dotted_order" in m)
                                 for m in members) \
        and any("run_type" in m or "dotted_order" in m for m in members)


def _is_one(value: Any) -> bool:
    return _is_run(value) or _is_batch(value)


def detect(value: Any) -> bool:
    """A LangSmith run (`run_type` and `inputs`/`dotted_order`/`trace_id`), a list of them, or
    a post/patch batch."""
    if isinstance(value, list):
        return bool(value) and all(map(_is_one, value))
    return _is_one(value)


def convert(values: list[Any], options: Options, source: str) -> list[dict]:
    """One run per trace among every run the values hold, in trace order of first appearance."""
    records: dict[str, dict] = {}
    for i, document in enumerate(each_document(values, _is_one)):
        where = source if len(values) == 1 else f"{source} document {i + 1}"
        if _is_batch(document):
            for key in ("post", "patch"):  # a run's update after its creation
                for member in listed(document.get(key)):
                    _collect(member, None, records, where)
        elif _is_run(document):
            _collect(document, None, records, where)
        else:
            raise refuse(where, "not a LangSmith run: expected an object with `run_type` and "
                         "`inputs` (or `dotted_order`/`trace_id`), a list of them, or "
                         "{post: [...], patch: [...]}")
    traces: dict[str, list[dict]] = {}
    for run in records.values():
        traces.setdefault(_trace_of(run, records), []).append(run)
    return [_convert_trace(trace_id, runs, options, source)
            for trace_id, runs in traces.items()]


def _run_id(run: dict) -> str | None:
    """A run's id, or the last segment of its dotted order (`<time>Z<id>`): the JS SDK's
    updates carry only the latter."""
    if run.get("id") is not None:
        return str(run["id"])
    order = run.get("dotted_order")
    if isinstance(order, str) and "Z" in order:
        return order.rsplit(".", 1)[-1].split("Z", 1)[1] or None
    return None


def _collect(run: Any, parent: str | None, records: dict, where: str) -> None:
    """Every run of a tree into `records` by id; a second record of an id (the update) is
    merged into the first: its fields win, except a null, which erases nothing."""
    if not isinstance(run, dict):
        raise refuse(where, "a run must be a JSON object")
    run_id = _run_id(run)
    if run_id is None:
        raise refuse(where, "a run without `id` or `dotted_order` cannot be placed in a trace")
    flat = {k: v for k, v in run.items() if k != "child_runs"}
    if parent is not None and flat.get("parent_run_id") is None:
        flat["parent_run_id"] = parent
    if run_id in records:
        merged = records[run_id]
        for key, value in flat.items():
            if isinstance(value, dict) and isinstance(merged.get(key), dict):
                merged[key] = {**merged[key], **value}
            elif value is not None or key not in merged:
                merged[key] = value
    else:
        records[run_id] = {**flat, "id": run_id}
    for child in listed(run.get("child_runs")):
        _collect(child, run_id, records, where)


def _trace_of(run: dict, records: dict) -> str:
    if run.get("trace_id") is not None:
        return str(run["trace_id"])
    seen = set()
    while run.get("parent_run_id") is not None and str(run["parent_run_id"]) in records \
            and run["id"] not in seen:
        seen.add(run["id"])
        run = records[str(run["parent_run_id"])]
    return run["id"]


def _ordered(runs: list[dict]) -> list[dict]:
    """The runs depth first, siblings by dotted order (then start time): the order they ran."""
    ids = {r["id"] for r in runs}
    children: dict[Any, list[dict]] = {}
    for run in runs:
        parent = run.get("parent_run_id")
        children.setdefault(str(parent) if parent is not None and str(parent) in ids
                            else None, []).append(run)
    order = {key: sorted(group, key=lambda r: (str(r.get("dotted_order") or ""),
                                               str(r.get("start_time") or ""), r["id"]))
             for key, group in children.items()}
    out: list[dict] = []
    done: set = set()
    # Runs whose parents form a cycle are reached from no root: they come last, never lost.
    for start in order.get(None, []) + [r for r in runs]:
        stack = [start]
        while stack:
            run = stack.pop()
            if run["id"] in done:
                continue
            done.add(run["id"])
            out.append(run)
            stack.extend(reversed(order.get(run["id"], [])))
    return out


def _time(value: Any) -> str | None:
    """A time as text: ISO 8601 kept as recorded; epoch milliseconds (the JS SDK) as UTC."""
    if isinstance(value, str):
        return value or None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            moment = datetime.datetime.fromtimestamp(value / 1000, datetime.timezone.utc)
        except (OverflowError, OSError, ValueError):
            return None
        return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return None


def _convert_trace(trace_id: str, runs: list[dict], options: Options, source: str) -> dict:
    ordered = _ordered(runs)
    root = ordered[0]
    steps = _Steps()
    summaries = []
    for run in ordered:
        if run.get("run_type") == "llm":
            steps.llm(run)
        elif run.get("run_type") == "tool":
            steps.tool(run)
        summaries.append(_summary(run, run is root))
    outcome = {"status": root.get("status") or ("error" if root.get("error") is not None
                                                 else "success" if root.get("end_time")
                                                 else "pending")}
    if root.get("error") is not None:
        outcome["error"] = root["error"]
    extra = root.get("extra") if isinstance(root.get("extra"), dict) else {}
    metadata = {"model": _model(ordered), "tags": sorted({t for r in ordered
                                                         for t in listed(r.get("tags"))
                                                         if isinstance(t, str)}),
                "usage": _usage(ordered), "langsmith.project": root.get("session_name"),
                "langsmith.metadata": extra.get("metadata"), "langsmith.runs": summaries}
    run = {"run_id": derived_run_id(NAME, trace_id), "started_at": _time(root.get("start_time")),
           "input": root.get("inputs"), "output": root.get("outputs"), "steps": steps.steps,
           "outcome": outcome, "metadata": metadata}
    return finish_run(run, options, root, extra.get("metadata"), source=source)


def _summary(run: dict, is_root: bool) -> dict:
    """What the steps, input and output do not hold of a run: kept in `langsmith.runs`."""
    out = kept(run, TREE_FIELDS)
    kind = run.get("run_type")
    for field, used in (("inputs", ("messages", "prompts")),
                        ("outputs", ("choices", "generations"))):
        value = run.get(field)
        if is_root or (kind == "tool" and field in run):
            continue  # the run's input and output, or the tool call's arguments and result
        if kind == "llm" and isinstance(value, dict):
            value = kept(value, used)
        if value not in (None, {}):
            out[field] = value
    if kind == "tool":
        out.pop("error", None)  # the step's error
    return out


def _model(runs: list[dict]) -> Any:
    for run in runs:
        extra = run.get("extra") if isinstance(run.get("extra"), dict) else {}
        meta = extra.get("metadata") if isinstance(extra.get("metadata"), dict) else {}
        inputs = run.get("inputs") if isinstance(run.get("inputs"), dict) else {}
        if run.get("run_type") == "llm":
            return meta.get("ls_model_name") or inputs.get("model")
    return None


def _usage(runs: list[dict]) -> dict:
    """Token counts summed over the llm runs that report them (`usage_metadata`)."""
    total: dict[str, int] = {}
    for run in runs:
        outputs = run.get("outputs") if isinstance(run.get("outputs"), dict) else {}
        usage = outputs.get("usage_metadata")
        for key, value in (usage.items() if isinstance(usage, dict) else ()):
            if isinstance(value, int) and not isinstance(value, bool):
                total[key] = total.get(key, 0) + value
    return total


class _Steps:
    """The trace's steps: each llm run's new messages, each tool run a tool_call step."""

    def __init__(self) -> None:
        self.steps: list[dict] = []
        self.history: list[Any] = []   # the conversation the llm runs have shown so far
        self.joiner = CallJoiner()
        self.answered: set = set()     # call ids a tool run answered

    def llm(self, run: dict) -> None:
        inputs = run.get("inputs") if isinstance(run.get("inputs"), dict) else {}
        given = _input_messages(inputs)
        # Each llm call repeats the conversation so far: only what is new becomes steps.
        keys = [_key(m) for m in given]
        new = given[len(self.history):] if keys[:len(self.history)] == self.history else given
        for message in new:
            self._message(message)
        outputs = _output_messages(run.get("outputs"))
        for message in outputs:
            self._message(message)
        self.history = keys + [_key(m) for m in outputs]

    def _message(self, raw: Any) -> None:
        role, content, extra = _normalise(raw)
        calls = listed(extra.pop("tool_calls", None))
        if isinstance(extra.get("function_call"), dict):  # the legacy OpenAI function call
            calls = [*calls, {"function": extra.pop("function_call")}] \
                if isinstance(calls, list) else calls
        if role == "tool":
            self._reply(extra.get("tool_call_id"), content, extra)
            return
        step = {"type": "message", "role": role, "content": content}
        if extra:
            step["langsmith"] = extra
        self.steps.append(step)
        for call in calls if isinstance(calls, list) else []:
            self._call(call)

    def _call(self, call: Any) -> None:
        if not isinstance(call, dict):
            return
        function = call.get("function") if isinstance(call.get("function"), dict) else {}
        name = call.get("name") or function.get("name")
        step = {"type": "tool_call", "tool_name": name if isinstance(name, str) and name
                else "unknown"}
        if call.get("id") is not None:
            step["call_id"] = call["id"]
        step.update(tool_arguments(call["args"] if "args" in call else function.get("arguments")))
        self.steps.append(self.joiner.call(call.get("id"), step))

    def _reply(self, call_id: Any, content: Any, extra: dict) -> None:
        if call_id in self.answered:
            return  # the tool run that answered it is the step already
        step = self.joiner.reply(call_id)
        if step is None:
            name = extra.get("name")
            step = {"type": "tool_call", "tool_name": name if isinstance(name, str) and name
                    else "unknown", "call_recorded": False}
            if call_id is not None:
                step["call_id"] = call_id
            self.steps.append(step)
        step["result"] = content
        if extra:
            step["reply"] = extra  # withheld with tool_results (cas/format/projection.py)

    def tool(self, run: dict) -> None:
        """A tool run: the result of the llm call it answers, or a tool_call step of its own."""
        call_id = _tool_call_id(run)
        step = self.joiner.reply(call_id)
        if step is None:
            name = run.get("name")
            step = {"type": "tool_call", "tool_name": name if isinstance(name, str) and name
                    else "unknown"}
            if call_id is not None:
                step["call_id"] = call_id
            step.update(tool_arguments(run.get("inputs")))
            self.steps.append(step)
        else:
            step.setdefault("langsmith", {})["tool_inputs"] = run.get("inputs")
        if call_id is not None:
            self.answered.add(call_id)
        if run.get("outputs") is not None:
            step["result"] = run["outputs"]
        if run.get("error") is not None:
            step["error"] = run["error"]
        step.setdefault("langsmith", {})["run_id"] = run["id"]


def _tool_call_id(run: dict) -> Any:
    """The llm tool call a tool run answers: the ToolMessage it returned names it."""
    outputs = run.get("outputs") if isinstance(run.get("outputs"), dict) else {}
    output = outputs.get("output")
    if isinstance(output, dict):
        kwargs = output.get("kwargs") if isinstance(output.get("kwargs"), dict) else output
        if kwargs.get("tool_call_id") is not None:
            return kwargs["tool_call_id"]
    extra = run.get("extra") if isinstance(run.get("extra"), dict) else {}
    meta = extra.get("metadata") if isinstance(extra.get("metadata"), dict) else {}
    return meta.get("tool_call_id")


def _key(message: Any) -> tuple:
    """What makes two records of a message the same message: its role and content (a call's
    output and the next call's input record it with different optional fields)."""
    role, content, _ = _normalise(message)
    return role, content


def _input_messages(inputs: dict) -> list:
    messages = inputs.get("messages")
    if isinstance(messages, list):
        if messages and all(isinstance(m, list) for m in messages):
            return [m for batch in messages for m in batch]  # LangChain's batch of prompts
        return list(messages)
    prompts = inputs.get("prompts")
    if isinstance(prompts, list):
        return [{"role": "user", "content": p} for p in prompts]
    return []


def _output_messages(outputs: Any) -> list:
    if not isinstance(outputs, dict):
        return []
    out = []
    for choice in listed(outputs.get("choices")):
        if isinstance(choice, dict) and "message" in choice:
            out.append(choice["message"])
    generations = listed(outputs.get("generations"))
    for generation in (g for batch in generations
                       for g in (batch if isinstance(batch, list) else [batch])):
        if isinstance(generation, dict):
            out.append(generation["message"] if "message" in generation
                       else {"role": "assistant", "content": generation.get("text")})
    return out


def _normalise(raw: Any) -> tuple[str, Any, dict]:
    """(role, content, the other fields) of an OpenAI-style message, a LangChain serialised
    message (`lc`/`kwargs`, or `type`/`data`), or a plain value (an unknown shape, kept whole)."""
    if not isinstance(raw, dict):
        return "unknown", raw, {}
    if isinstance(raw.get("kwargs"), dict) and isinstance(raw.get("id"), list):
        fields = dict(raw["kwargs"])
        cls = str(raw["id"][-1]) if raw["id"] else ""
        role = ROLES.get(cls.removesuffix("Chunk")) or fields.pop("role", None) or cls
    elif isinstance(raw.get("data"), dict) and isinstance(raw.get("type"), str):
        fields = dict(raw["data"])
        role = ROLES.get(raw["type"]) or fields.pop("role", None) or raw["type"]
    elif "role" in raw or "type" in raw:
        fields = dict(raw)
        role = fields.pop("role", None) or ROLES.get(str(fields.get("type")))
        if role is not None and "role" not in raw:
            fields.pop("type", None)
    else:
        return "unknown", raw, {}
    if not isinstance(role, str) or not role:
        return "unknown", raw, {}
    content = fields.pop("content", None)
    return role, content, fields


__all__ = ["NAME", "convert", "detect"]
