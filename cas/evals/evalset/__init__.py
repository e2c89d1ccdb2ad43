"""Eval sets (docs/evalset.md), public as `cas.evalset`:

- `scenarios`: the eval set: scenarios (failures to fix, wins to protect) kept as a dataset
  tagged `evalset`; capture, dedup, eviction at capacity (never a win).
- `regression`: regression runs: a pinned version's scenarios replayed and compared with their
  baselines; outcomes, exit codes, one score batch.
"""

from cas.evals.evalset.regression import (EXIT_OK, EXIT_WIN_REGRESSED, EXIT_WIN_UNCHECKED, HELD,
                                          IMPROVED, INCONCLUSIVE, NO_REPLAY_WARNING, OUTCOMES,
                                          REGRESSED, SKIPPED, RegressionBatch, RegressionResult,
                                          ScenarioResult, compare, exit_code, experiment_name,
                                          regress, regress_async)
from cas.evals.evalset.scenarios import (DEFAULT_CAPACITY, DEFAULT_TENANT, FAILURE, KINDS,
                                         OUTCOME_METRIC, TAG, WIN, CaptureReport, Corpus, EvalSet,
                                         Scenario, check_evalset, failure_fields, open,
                                         read_version, scenario_of)

__all__ = [
    "DEFAULT_CAPACITY", "DEFAULT_TENANT", "FAILURE", "KINDS", "OUTCOME_METRIC", "TAG", "WIN",
    "CaptureReport", "Corpus", "EvalSet", "Scenario", "check_evalset", "failure_fields", "open",
    "read_version", "scenario_of",
    "EXIT_OK", "EXIT_WIN_REGRESSED", "EXIT_WIN_UNCHECKED", "HELD", "IMPROVED", "INCONCLUSIVE",
    "NO_REPLAY_WARNING", "OUTCOMES", "REGRESSED", "SKIPPED", "RegressionBatch",
    "RegressionResult", "ScenarioResult", "compare", "exit_code", "experiment_name", "regress",
    "regress_async",
]
