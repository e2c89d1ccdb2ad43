"""Every name the documentation gives the evaluation loop's public modules (`cas.runner.X`,
`cas.suites.X`, `cas.cassettes.X`, `cas.capture.X`, `cas.evalset.X`, ..., and `runner.X` after
`from cas import runner`) resolves, whichever module of cas/evals owns it now."""

from __future__ import annotations

import importlib
import re

import pytest

from support import ROOT

PUBLIC = ("runner", "suites", "cassettes", "evalset", "capture", "capture_records",
          "capture_stores", "capture_otel", "capture_presidio", "cassette_http",
          "pytest_plugin", "replay")
# Written without `cas.` only after `from cas import X`; `capture.stored` and its kind are the
# names of log events (docs/capture.md), not attributes.
BARE = ("runner", "suites", "cassettes", "evalset", "cassette_http")
NAMED = re.compile(r"\b(cas\.)?(" + "|".join(PUBLIC) + r")\.([A-Za-z_][A-Za-z0-9_]*)\b")
# Names docs/api.md lists after their module's first, without repeating the module.
LISTED = {
    "runner": ("merge", "diff", "record", "record_scores_of", "load_scorer", "check_record",
               "as_result", "Shard", "SuiteResult", "CaseResult", "Recorded"),
    "cassettes": ("read", "current", "cassette_logs", "UnusedExchanges", "MODES"),
    "evalset": ("EvalSet", "Scenario", "Corpus", "CaptureReport", "RegressionResult",
                "ScenarioResult", "EXIT_OK", "EXIT_WIN_REGRESSED", "EXIT_WIN_UNCHECKED"),
}


def _documented() -> list[tuple[str, str]]:
    found = set()
    for path in sorted((ROOT / "docs").glob("*.md")):
        for prefix, module, name in NAMED.findall(path.read_text()):
            if name in ("md", "py") or (not prefix and module not in BARE):
                continue
            found.add((module, name))
    found.update((module, name) for module, names in LISTED.items() for name in names)
    return sorted(found)


DOCUMENTED = _documented()


def test_the_documentation_is_read():
    """The reader finds the names it checks (a reader finding none would pass every name)."""
    assert ("runner", "SuiteRunner") in DOCUMENTED and ("cassettes", "save") in DOCUMENTED
    assert ("evalset", "regress") in DOCUMENTED and ("capture", "submit") in DOCUMENTED
    assert len(DOCUMENTED) > 60


@pytest.mark.parametrize("module,name", DOCUMENTED, ids=[f"{m}.{n}" for m, n in DOCUMENTED])
def test_every_documented_name_resolves(module, name):
    public = importlib.import_module(f"cas.{module}")
    assert getattr(public, name, None) is not None, f"cas.{module}.{name}"
