"""Suites (docs/suites.md) under one name: suite files (`cas.evals.suites.files`) and the runner
(`cas.evals.suites.runner`) that turns one into a verdict."""

from cas.evals.suites.runner import CaseResult, Run, SuiteResult, SuiteRunner
from cas.evals.suites.files import (CASE_FIELDS, FORMAT, HEADER_FIELDS, IDENTITY_FIELDS, MIGRATIONS,
                                    SUITE_FORMATS, Suite, SuiteCase, SuiteExport, case_of, export,
                                    from_version, migration, path_component_problem, read_jsonl,
                                    write_jsonl)

__all__ = [
    "CASE_FIELDS", "FORMAT", "HEADER_FIELDS", "IDENTITY_FIELDS", "MIGRATIONS", "SUITE_FORMATS",
    "CaseResult", "Run", "Suite", "SuiteCase", "SuiteExport", "SuiteResult", "SuiteRunner",
    "case_of", "export", "from_version", "migration", "path_component_problem", "read_jsonl",
    "write_jsonl",
]
