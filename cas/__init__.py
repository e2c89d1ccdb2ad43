"""cas: content-addressed, versioned evaluation datasets for LLM agents."""

from .encoding import MAX_DEPTH
from .errors import (Aborted, AlreadyExists, CasError, DataLoss, DigestMismatch,
                     FailedPrecondition, InvalidArgument, InvalidJSONValue, NotFound,
                     UnsupportedFormat, VersionConflict)
from .objects import Case, DatasetRecord, VersionRecord
from .case_codec import EncodedCase, encode_case, read_cases_jsonl
from .checks import MAX_PAGE
from .datasets import VersionsPage
from .opening import find, init, open
from .reads import Diff, DiffPage, ItemsPage
from .repository import Repository
from .replay import (Plan, ReplayRecord, ReplayResult, RunDiff, StepDetail, ToolEffect,
                     diff_runs, format_plan, parse_plan, plan_digest, replay_case, replay_item)
from .scores import Pin, RecordedScore
from .tree import Proof, check_proof, verify_proof

__all__ = [
    "Aborted", "AlreadyExists", "CasError", "DataLoss", "DigestMismatch", "FailedPrecondition",
    "InvalidArgument", "InvalidJSONValue", "NotFound", "UnsupportedFormat", "VersionConflict",
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
    from . import exports
    value = globals()[name] = getattr(exports, name)
    return value
