"""Importers: runs from the trace formats teams already have (docs/importers.md).

Each format is a module with `NAME`, `detect(value) -> bool` (does one parsed JSON value look
like this format's document?) and `convert(values, options, source) -> list[dict]` (the runs,
in cas's own schema, of a file's parsed JSON values); a format that HTTP recordings carry also
has `detect_exchange(exchange) -> bool` and `convert_exchanges(exchanges, options, source)` for
the vcr container, and a format whose files are archives rather than JSON has
`detect_bytes(data) -> bool` and `convert_bytes(data, options, source)`. All are pure: they
read documents and return runs, and `Repository.import_runs` stores them.

- `common`: what every importer shares: options, documents, tool arguments, run ids, tenant.
- `vcr`: the vcr container: recorded API traffic in vcrpy cassettes, read as exchanges.
- `otlp`: spans as both span importers read them, grouped into traces and conversations.
- `openai_chat`, `openai_responses`, `anthropic`: the model APIs' requests and responses.
- `otel_genai`, `openinference`: spans that follow the OpenTelemetry GenAI or OpenInference
  conventions.
- `inspect_log`, `langsmith`: Inspect AI eval logs; LangSmith run trees.
"""

from __future__ import annotations

import importlib

from cas.errors import InvalidArgument
from cas.format import encoding
from cas.format.projection import IMPORT_KEY
from cas.interop.importers import vcr
from cas.interop.importers.common import Options, parse_documents

# Each format's module, imported when a format is first used (a `cas` command that imports
# nothing does not pay for seven parsers).
FORMATS = {"openai-chat": "openai_chat", "openai-responses": "openai_responses",
           "anthropic": "anthropic", "otel-genai": "otel_genai",
           "openinference": "openinference", "inspect": "inspect_log", "langsmith": "langsmith"}
CONTAINERS = ("vcr",)


def formats() -> tuple[str, ...]:
    """The names `convert` accepts (besides `auto`)."""
    return tuple(FORMATS)


def module_of(name: str):
    """The module that reads format `name`."""
    if name not in FORMATS:
        raise InvalidArgument(f"unknown import format {encoding.describe(name)}; accepted: "
                              + ", ".join(("auto", *FORMATS)), reason="UNKNOWN_FORMAT",
                              accepted=["auto", *FORMATS])
    return importlib.import_module(f".{FORMATS[name]}", __name__)


def convert(data: bytes, format: str = "auto", *, source: str = "input",  # noqa: A002
            container: str | None = None, tenant: str | None = None,
            person: str | None = None, tenant_from: str | None = None,
            person_from: str | None = None) -> list[dict]:
    """The runs (dicts in cas's schema, for `repo.import_runs`) of one file in `format`
    (`auto`: detected), optionally read out of a `container` (`vcr`: recorded HTTP traffic).
    Pure: nothing is stored. A document that is not the named format is refused with the
    shape expected; the same file always gives the same runs."""
    if not isinstance(source, str):
        raise InvalidArgument(f"source names the input: a string, not {encoding.describe(source)}")
    for name, value in (("tenant", tenant), ("person", person), ("tenant_from", tenant_from),
                        ("person_from", person_from)):
        encoding.check_text(value, name, optional=True)
    options = Options(tenant, person, tenant_from, person_from)
    if container is not None and container not in CONTAINERS:
        raise InvalidArgument(f"unknown container {encoding.describe(container)}; accepted: "
                              + ", ".join(CONTAINERS), reason="UNKNOWN_CONTAINER",
                              accepted=list(CONTAINERS))
    if container == "vcr":
        exchanges = vcr.read_cassette(data, source)
        module = _module(format, _reads_most(exchanges), source)
        runs = module.convert_exchanges(exchanges, options, source)
    elif (module := _archive_format(format, data, source)) is not None:
        runs = module.convert_bytes(data, options, source)
    else:
        values = parse_documents(data, source)
        module = _module(format, lambda m: all(m.detect(v) for v in values), source)
        runs = module.convert(values, options, source)
    for run in runs:  # where it came from; a content policy reads it (cas/format/projection.py)
        run.setdefault("metadata", {})[IMPORT_KEY] = {"format": module.NAME,
                                                      "container": container}
    return runs


def detect(data: bytes, source: str = "input", container: str | None = None) -> str:
    """The format of a file, as `convert(format="auto")` would read it."""
    if container == "vcr":
        return _module("auto", _reads_most(vcr.read_cassette(data, source)), source).NAME
    module = _archive_format("auto", data, source)
    if module is not None:
        return module.NAME
    values = parse_documents(data, source)
    return _module("auto", lambda m: all(m.detect(v) for v in values), source).NAME


def _reads_most(exchanges):
    """Which formats a cassette is: those that read the most of its exchanges (a tool's own
    call to another API does not make a cassette ambiguous)."""
    counts = {name: sum(map(m.detect_exchange, exchanges))
              for name, m in ((n, module_of(n)) for n in FORMATS)
              if hasattr(m, "convert_exchanges")}
    best = max(counts.values(), default=0)
    return lambda m: best > 0 and counts.get(m.NAME) == best


def _archive_format(name: str, data: bytes, source: str):
    """The format that reads `data` as an archive of its own (not JSON, e.g. Inspect's zip
    `.eval` logs: a module with `detect_bytes` and `convert_bytes`), or None."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        return None
    candidates = [module_of(name)] if name != "auto" else list(map(module_of, FORMATS))
    for module in candidates:
        if hasattr(module, "detect_bytes") and module.detect_bytes(bytes(data)):
            return module
    return None


def _module(name: str, fits, source: str):
    if name != "auto":
        return module_of(name)
    found = [m for m in map(module_of, FORMATS) if fits(m)]
    if len(found) == 1:
        return found[0]
    if not found:
        raise InvalidArgument(f"{source}: no import format recognises it; accepted: "
                              + ", ".join(FORMATS) + " (name one with --format)",
                              reason="FORMAT_UNKNOWN", accepted=list(FORMATS))
    names = [m.NAME for m in found]
    raise InvalidArgument(f"{source}: it could be any of {', '.join(names)}; name one with "
                          "--format", reason="FORMAT_AMBIGUOUS", candidates=names)


__all__ = ["CONTAINERS", "FORMATS", "Options", "convert", "detect", "formats", "module_of"]
