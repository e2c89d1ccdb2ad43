"""cas: content-addressed, versioned evaluation datasets for LLM agents.

The package face: the names of `import cas`, and the public module names users import
(`cas.suites`, `cas.capture`, ...), each served by the module in the layer folder that owns it.
The layers, from the ground up (each folder's `__init__` lists its files):

- `errors`, `digest` (L0): the vocabulary: typed errors and their codes; digests and hashing.
- `format/` (L1): the canonical encoding, the stored records, the key layout, the case codec,
  the run-to-case projection, transcripts and redaction. Pure: no I/O.
- `storage/` (L2): backends, packs and their indexes, the object store, the Merkle tree, the
  refs log, leases and claims.
- `repo/` (L3): one module per repository operation over a context, and the `Repository` facade.
- `evals/` (L4): replay, suites and the suite runner, cassettes, eval sets, capture.
- `interop/` (L4): importers from other trace formats and exports of a pinned version.
"""

import importlib as _importlib
import importlib.machinery as _machinery
import sys as _sys

from cas.errors import (Aborted, AlreadyExists, CasError, DataLoss, DigestMismatch,
                        FailedPrecondition, InvalidArgument, InvalidJSONValue, NotFound,
                        PermissionDenied, Unavailable, UnsupportedFormat, VersionConflict)

# Every other name of `import cas` is imported on first use, from the module that owns it: a
# process imports what it runs (the second process of an ingest, cas/repo/ingest.py, needs
# the case codec and the pack writer, not the Repository facade and replay: about half of
# `import cas`).
_EXPORTS = {
    "cas.evals.replay": ("Plan", "ReplayRecord", "ReplayResult", "RunDiff", "StepDetail",
                         "ToolEffect", "diff_runs", "format_plan", "parse_plan", "plan_digest",
                         "replay_case", "replay_item"),
    "cas.format.cases": ("EncodedCase", "encode_case", "read_cases_jsonl"),
    "cas.format.encoding": ("MAX_DEPTH",),
    "cas.format.records": ("Case", "DatasetRecord", "VersionRecord"),
    "cas.format.version_names": ("Pin",),
    "cas.interop.exports": ("ExportResult", "cases", "to_pandas"),
    "cas.repo.checks": ("MAX_PAGE",),
    "cas.repo.datasets": ("VersionsPage",),
    "cas.repo.opening": ("find", "init", "open"),
    "cas.repo.reads": ("Diff", "DiffPage", "ItemsPage"),
    "cas.repo.repository": ("Repository",),
    "cas.repo.scores": ("RecordedScore",),
    "cas.storage.tree": ("Proof", "check_proof", "verify_proof"),
}
_OWNER = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = [
    "Aborted", "AlreadyExists", "CasError", "DataLoss", "DigestMismatch", "FailedPrecondition",
    "InvalidArgument", "InvalidJSONValue", "NotFound", "PermissionDenied", "Unavailable",
    "UnsupportedFormat", "VersionConflict",
    "Case", "DatasetRecord", "VersionRecord", "Diff", "DiffPage", "EncodedCase", "ItemsPage",
    "MAX_DEPTH", "MAX_PAGE", "Repository", "VersionsPage", "encode_case", "find", "init", "open",
    "read_cases_jsonl", "Proof", "check_proof", "verify_proof",
    "Pin", "RecordedScore", "ExportResult", "cases", "to_pandas",
    "Plan", "ReplayRecord", "ReplayResult", "RunDiff", "StepDetail", "ToolEffect", "diff_runs",
    "format_plan", "parse_plan", "plan_digest", "replay_case", "replay_item",
]


def __getattr__(name: str):
    module = _OWNER.get(name)
    if module is None:
        raise AttributeError(f"module 'cas' has no attribute {name!r}")
    value = globals()[name] = getattr(_importlib.import_module(module), name)
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


# Public module names (docs/api.md) and the modules that own them: `import cas.capture` and
# `from cas.suites import read_jsonl` keep working wherever the code lives. A name is resolved
# on first import only, so `import cas` loads none of them.
PUBLIC_MODULES = {
    "cas.backends": "cas.storage.backends",
    "cas.capture": "cas.evals.capture",
    "cas.capture_otel": "cas.evals.capture.otel",
    "cas.capture_presidio": "cas.evals.capture.presidio",
    "cas.capture_records": "cas.evals.capture.records",
    "cas.capture_stores": "cas.evals.capture.stores",
    "cas.cassette_http": "cas.evals.cassettes.http",
    "cas.cassettes": "cas.evals.cassettes",
    "cas.dataset_imports": "cas.interop.datasets",
    "cas.evalset": "cas.evals.evalset",
    "cas.exports": "cas.interop.exports",
    "cas.importers": "cas.interop.importers",
    "cas.lock": "cas.interop.lockfile",
    "cas.pytest_plugin": "cas.evals.pytest_plugin",
    "cas.redaction": "cas.format.redaction",
    "cas.replay": "cas.evals.replay",
    "cas.review_diff": "cas.interop.review_diff",
    "cas.runner": "cas.evals.suites",  # the runner's public names live beside the suites
    "cas.suites": "cas.evals.suites",
    "cas.transcript": "cas.format.transcript",
    "cas.userconfig": "cas.repo.userconfig",
}


class _PublicModules:
    """Imports a public module name as the very module that owns it (one module object, so
    state and monkeypatches are shared): the module keeps its own name and spec. (A finder
    and loader by their methods: the importlib.abc classes cost every process importlib's
    resources and inspect.)"""

    def find_spec(self, name, path=None, target=None):
        if name in PUBLIC_MODULES:
            return _machinery.ModuleSpec(name, self)
        return None

    def create_module(self, spec):
        module = _importlib.import_module(PUBLIC_MODULES[spec.name])
        spec.loader_state = module.__spec__
        return module

    def exec_module(self, module) -> None:
        # the import system has just set the alias's spec on the module: give it back its own
        module.__spec__ = module.__spec__.loader_state


_sys.meta_path.insert(0, _PublicModules())
