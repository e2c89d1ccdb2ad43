"""The `inspect` importer: Inspect AI eval logs (JSON or `.eval` zip), a run per sample and
epoch."""

from __future__ import annotations

import io
import zipfile
from typing import Any

from cas.interop.importers.common import (CallJoiner, Options, derived_run_id, each_document,
                                          finish_run, kept, listed, parse_documents, refuse,
                                          tool_arguments)

NAME = "inspect"
ATTACHMENT = "attachment://"
ZIP_MAGIC = b"PK\x03\x04"
# A member larger than this is refused before it is inflated (a zip bomb costs nothing to send).
MAX_MEMBER = 256 << 20
# Members of a `.eval` archive that are not read: summaries.json and _journal/ repeat what the
# header and the sample files hold (Inspect writes them to stream a log while it runs).
DERIVED_MEMBERS = ("summaries.json", "_journal/")

SAMPLE_MAPPED = ("id", "epoch", "input", "output", "messages", "scores", "target", "error",
                 "limit", "attachments", "started_at")
LOG_MAPPED = ("samples", "reductions")


def detect(value: Any) -> bool:
    """An Inspect eval log: `version`, `status` and an `eval` spec naming its task or model."""
    return (isinstance(value, dict) and isinstance(value.get("version"), int)
            and "status" in value and isinstance(value.get("eval"), dict)
            and ("task" in value["eval"] or "model" in value["eval"]))


def detect_bytes(data: bytes) -> bool:
    """A `.eval` archive: a zip file holding `header.json`."""
    if not bytes(data[:4]) == ZIP_MAGIC:
        return False
    try:
        with zipfile.ZipFile(io.BytesIO(bytes(data))) as archive:
            return "header.json" in archive.namelist()
    except (zipfile.BadZipFile, ValueError):
        return False


def convert_bytes(data: bytes, options: Options, source: str) -> list[dict]:
    """The runs of a file's raw bytes: a `.eval` zip archive, or a JSON log."""
    if bytes(data[:4]) != ZIP_MAGIC:
        return convert(parse_documents(data, source), options, source)
    return convert([read_archive(bytes(data), source)], options, source)


def read_archive(data: bytes, source: str) -> dict:
    """The log a `.eval` archive holds, as the JSON log would hold it: `header.json` with
    `samples` (every `samples/*.json`, in archive order) and `reductions` (reductions.json)."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, ValueError) as exc:
        raise refuse(source, f"not a readable .eval archive: {exc}") from None
    with archive:
        names = archive.namelist()
        if "header.json" not in names:
            raise refuse(source, "a zip archive without header.json is not an Inspect .eval log")
        log = _member(archive, "header.json", source)
        if not isinstance(log, dict) or not detect(log):
            raise refuse(source, "header.json is not an Inspect eval log header")
        log = dict(log)
        log["samples"] = [_member(archive, n, source) for n in names
                          if n.startswith("samples/") and n.endswith(".json")]
        if "reductions.json" in names:
            log["reductions"] = _member(archive, "reductions.json", source)
        unread = [n for n in names if n != "header.json" and n != "reductions.json"
                  and not n.startswith("samples/") and not n.endswith("/")
                  and not n.startswith(DERIVED_MEMBERS)]
        if unread:
            log["cas_unread_members"] = unread  # kept in the runs' metadata, never hidden
        return log


def _member(archive: zipfile.ZipFile, name: str, source: str) -> Any:
    info = archive.getinfo(name)
    if info.file_size > MAX_MEMBER:
        raise refuse(f"{source}:{name}", f"member is {info.file_size} bytes; at most "
                     f"{MAX_MEMBER} are read")
    try:
        data = archive.read(name)  # zipfile checks the CRC and reads at most file_size bytes
    except (zipfile.BadZipFile, OSError, ValueError, NotImplementedError) as exc:
        raise refuse(f"{source}:{name}", f"cannot be read: {exc}") from None
    return parse_documents(data, f"{source}:{name}")[0]


def convert(values: list[Any], options: Options, source: str) -> list[dict]:
    """One run per sample (and epoch) of every log among `values`."""
    runs = []
    for i, log in enumerate(each_document(values, detect)):
        where = source if len(values) == 1 else f"{source} document {i + 1}"
        if not detect(log):
            raise refuse(where, "not an Inspect eval log: expected an object with `version`, "
                         "`status` and `eval` (with `task`), and `samples`")
        samples = log.get("samples")
        if not samples:
            raise refuse(where, "the log holds no samples (written with log_samples=False, or "
                         "a header only); import the log with its samples, or the .eval file")
        if not isinstance(samples, list):
            raise refuse(where, "`samples` must be a list of samples")
        for j, sample in enumerate(samples):
            if not isinstance(sample, dict) or not isinstance(sample.get("messages", []), list):
                raise refuse(where, f"samples[{j}] is not a sample (an object with `messages`)")
            runs.append(_run(log, sample, options, f"{where} samples[{j}]"))
    return runs


def _run(log: dict, sample: dict, options: Options, where: str) -> dict:
    attachments = sample.get("attachments") if isinstance(sample.get("attachments"), dict) else {}
    unresolved: set[str] = set()

    def res(value: Any) -> Any:
        return _resolve(value, attachments, unresolved)

    spec = log["eval"]
    run = {"run_id": derived_run_id(NAME, spec.get("eval_id") or spec.get("task_id")
                                    or spec.get("task"), sample.get("id"), sample.get("epoch")),
           "started_at": _started_at(log, sample),
           "input": res(sample.get("input")),
           "output": _completion(res(sample.get("output"))),
           "steps": _steps(res(listed(sample.get("messages"))), where),
           "outcome": {k: res(sample[k]) for k in ("scores", "target", "error", "limit")
                       if k in sample}}
    rest = {k: (v if k == "events" else res(v)) for k, v in kept(sample, SAMPLE_MAPPED).items()}
    if "events" in rest and attachments:
        rest["attachments"] = attachments  # events keep their references: resolvable here
    metadata = {"model": spec.get("model"),
                "inspect.log": kept(log, LOG_MAPPED),
                "inspect.sample": rest,
                "inspect.output": res(sample.get("output")),
                "inspect.reductions": _reductions(log, sample)}
    if unresolved:
        metadata["inspect.unresolved_attachments"] = sorted(unresolved)
    run["metadata"] = metadata
    return finish_run(run, options, sample, log, source=where)


def _resolve(value: Any, attachments: dict, unresolved: set) -> Any:
    """`value` with each `attachment://<hash>` string replaced by the sample's attachment (as
    Inspect itself resolves them: a whole string, never a part of one)."""
    if isinstance(value, str):
        if value.startswith(ATTACHMENT):
            key = value[len(ATTACHMENT):]
            if key in attachments:
                return attachments[key]
            unresolved.add(key)
        return value
    if isinstance(value, dict):
        return {k: _resolve(v, attachments, unresolved) for k, v in value.items()}
    if isinstance(value, list):
        return [_resolve(v, attachments, unresolved) for v in value]
    return value


def _started_at(log: dict, sample: dict) -> str | None:
    """The sample's own start, else its first event's time, else the log's start."""
    events = sample.get("events")
    first = events[0] if isinstance(events, list) and events else None
    for value in (sample.get("started_at"), first.get("timestamp") if isinstance(first, dict)
                  else None, (log.get("stats") or {}).get("started_at")
                  if isinstance(log.get("stats"), dict) else None):
        if isinstance(value, str) and value:
            return value
    return None


def _completion(output: Any) -> Any:
    """The sample's output text: `completion`, else the first choice's message text."""
    if not isinstance(output, dict):
        return output
    if "completion" in output:
        return output["completion"]
    choices = output.get("choices")
    message = choices[0].get("message") if isinstance(choices, list) and choices and \
        isinstance(choices[0], dict) else None
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, list):
        texts = [p.get("text") for p in content if isinstance(p, dict)
                 and p.get("type") == "text" and isinstance(p.get("text"), str)]
        return "".join(texts)
    return content


def _reductions(log: dict, sample: dict) -> list:
    """This sample's entries of the log's score reductions (each with its scorer)."""
    out = []
    for reduction in listed(log.get("reductions")):
        if not isinstance(reduction, dict):
            continue
        for entry in listed(reduction.get("samples")):
            if isinstance(entry, dict) and entry.get("sample_id") == sample.get("id"):
                out.append({**kept(reduction, ("samples",)), **entry})
    return out


def _steps(messages: list, where: str) -> list[dict]:
    """Message steps, each assistant tool call a tool_call step after its message, and each
    tool reply joined to the call it answers (never a message step of its own)."""
    steps: list[dict] = []
    joiner = CallJoiner()
    for i, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        if not isinstance(role, str) or not role:
            raise refuse(where, f"messages[{i}] has no role")
        if role == "tool":
            _reply(message, joiner, steps)
            continue
        step = {"type": "message", "role": role, "content": message.get("content")}
        extra = kept(message, ("role", "content", "tool_calls"))
        if extra:
            step["inspect"] = extra
        steps.append(step)
        for call in listed(message.get("tool_calls")):
            steps.append(_call(call, joiner, f"{where} messages[{i}]"))
    return steps


def _call(call: Any, joiner: CallJoiner, where: str) -> dict:
    if not isinstance(call, dict) or not isinstance(call.get("function"), str) \
            or not call["function"]:
        raise refuse(where, "a tool call needs its `function` (the tool's name)")
    step = {"type": "tool_call", "tool_name": call["function"]}
    if call.get("id") is not None:
        step["call_id"] = call["id"]
    step.update(tool_arguments(call.get("arguments")))
    extra = kept(call, ("id", "function", "arguments"))
    if extra:
        step["inspect"] = {"call": extra}
    return joiner.call(call.get("id"), step)


def _reply(message: dict, joiner: CallJoiner, steps: list[dict]) -> None:
    """A tool reply: the result (and error) of the call it answers; a reply to no recorded
    call is a tool_call step of its own, marked `call_recorded: false` (no arguments)."""
    step = joiner.reply(message.get("tool_call_id"))
    if step is None:
        name = message.get("function")
        step = {"type": "tool_call", "tool_name": name if isinstance(name, str) and name
                else "unknown", "call_recorded": False}
        if message.get("tool_call_id") is not None:
            step["call_id"] = message["tool_call_id"]
        steps.append(step)
    step["result"] = message.get("content")
    if message.get("error") is not None:
        step["error"] = message["error"]
    extra = kept(message, ("role", "content", "tool_call_id", "error"))
    if extra:
        step["reply"] = extra  # withheld with tool_results (cas/format/projection.py)


__all__ = ["NAME", "convert", "convert_bytes", "detect", "detect_bytes", "read_archive"]
