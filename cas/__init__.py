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
import importlib.abc as _importlib_abc
import importlib.util as _importlib_util
import sys as _sys

from cas.errors import (Aborted, AlreadyExists, CasError, DataLoss, DigestMismatch,
                        FailedPrecondition, InvalidArgument, InvalidJSONValue, NotFound,
                        PermissionDenied, Unavailable, UnsupportedFormat, VersionConflict)
from cas.evals.replay import (Plan, ReplayRecord, ReplayResult, RunDiff, StepDetail, ToolEffect,
                              diff_runs, format_plan, parse_plan, plan_digest, replay_case,
                              replay_item)
from cas.format.cases import EncodedCase, encode_case, read_cases_jsonl
from cas.format.encoding import MAX_DEPTH
from cas.format.records import Case, DatasetRecord, VersionRecord
from cas.format.version_names import Pin
from cas.repo.checks import MAX_PAGE
from cas.repo.datasets import VersionsPage
from cas.repo.opening import find, init, open
from cas.repo.reads import Diff, DiffPage, ItemsPage
from cas.repo.repository import Repository
from cas.repo.scores import RecordedScore
from cas.storage.tree import Proof, check_proof, verify_proof

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
    """The exports load on first use: they need shutil and tempfile, which a command that
    reads or seals never does, and every `cas` process would pay for at start-up."""
    if name not in ("ExportResult", "cases", "to_pandas"):
        raise AttributeError(f"module 'cas' has no attribute {name!r}")
    from cas.interop import exports
    value = globals()[name] = getattr(exports, name)
    return value


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


class _PublicModules(_importlib_abc.MetaPathFinder, _importlib_abc.Loader):
    """Imports a public module name as the very module that owns it (one module object, so
    state and monkeypatches are shared): the module keeps its own name and spec."""

    def find_spec(self, name, path=None, target=None):
        if name in PUBLIC_MODULES:
            return _importlib_util.spec_from_loader(name, self)
        return None

    def create_module(self, spec):
        module = _importlib.import_module(PUBLIC_MODULES[spec.name])
        spec.loader_state = module.__spec__
        return module

    def exec_module(self, module) -> None:
        # the import system has just set the alias's spec on the module: give it back its own
        module.__spec__ = module.__spec__.loader_state


_sys.meta_path.insert(0, _PublicModules())
