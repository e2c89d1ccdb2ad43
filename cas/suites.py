"""Suites (docs/suites.md) under one name: suite files (`cas.suite_files`) and the runner
(`cas.runner`) that turns one into a verdict."""

from .runner import CaseResult, Run, SuiteResult, SuiteRunner
from .suite_files import (
    CASE_FIELDS,
    FORMAT,
    HEADER_FIELDS,
    IDENTITY_FIELDS,
    MIGRATIONS,
    SUITE_FORMATS,
    Suite,
    SuiteCase,
    SuiteExport,
    case_of,
    export,
    from_version,
    migration,
    path_component_problem,
    read_jsonl,
    write_jsonl,
)

__all__ = [
    "CASE_FIELDS", "FORMAT", "HEADER_FIELDS", "IDENTITY_FIELDS", "MIGRATIONS", "SUITE_FORMATS",
    "CaseResult", "Run", "Suite", "SuiteCase", "SuiteExport", "SuiteResult", "SuiteRunner",
    "case_of", "export", "from_version", "migration", "path_component_problem", "read_jsonl",
    "write_jsonl",
]
