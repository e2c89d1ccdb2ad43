"""Suites (docs/suites.md), public as `cas.suites` and `cas.runner`:

- `files`: suite files: read, write (scrubbed, atomic), a pinned version as a suite.
- `results`: each case's verdict and the run's, run ids, the result digest, merge and diff.
- `repetitions`: the per-case summary of repetitions (pass@k, pass^k, numbers), flaky cases.
- `executors`: the shipped executors, `module:function` loaded by name, what one returned.
- `runner`: the suite runner: the run loop, concurrency, shards, artefacts, signals.
- `recording`: a result recorded as a score batch citing its pinned version.
- `compare`: two results compared: case labels, paired tests, power, the gate's verdict.
- `session`: a suite run from its source (a pin or a file), as `cas suite run` makes it.
"""

from cas.evals.suites.compare import Comparison, Gate
from cas.evals.suites.compare import compare as compare_results
from cas.evals.suites.executors import (SHIPPED_EXECUTORS, Run, cassette_executor, echo,
                                        load_callable, load_executor, load_scorer, replay_executor,
                                        takes_cassette)
from cas.evals.suites.files import (CASE_FIELDS, FORMAT, HEADER_FIELDS, IDENTITY_FIELDS, MIGRATIONS,
                                    SUITE_FORMATS, Suite, SuiteCase, SuiteExport, case_of, export,
                                    from_version, migration, path_component_problem, read_jsonl,
                                    write_jsonl)
from cas.evals.suites.recording import (Recorded, check_record, experiment_over, record,
                                        record_scores_of)
from cas.evals.suites.repetitions import (CaseSummary, MetricSummary, Summary, flaky_cases,
                                          pass_at_k, pass_hat_k, summarize)
from cas.evals.suites.results import (COMPLETED, ERRORED, EXIT_ERRORED, EXIT_INCOMPLETE, EXIT_OK,
                                      INCOMPLETE, MAX_REPEAT, OUTCOMES, CaseResult, Shard, SuiteRef,
                                      SuiteResult, as_result, diff, merge, repetition_seed,
                                      result_digest, run_id)
from cas.evals.suites.runner import (ARTEFACT_FILES, DEFAULT_CONCURRENCY, DEFAULT_GRACE,
                                     MAX_CONCURRENCY, SuiteRunner)

__all__ = [
    # suite files
    "CASE_FIELDS", "FORMAT", "HEADER_FIELDS", "IDENTITY_FIELDS", "MIGRATIONS", "SUITE_FORMATS",
    "Suite", "SuiteCase", "SuiteExport", "case_of", "export", "from_version", "migration",
    "path_component_problem", "read_jsonl", "write_jsonl",
    # results
    "COMPLETED", "ERRORED", "EXIT_ERRORED", "EXIT_INCOMPLETE", "EXIT_OK", "INCOMPLETE",
    "OUTCOMES", "CaseResult", "Shard", "SuiteRef", "SuiteResult", "as_result", "diff", "merge",
    "result_digest", "run_id", "MAX_REPEAT", "repetition_seed",
    # repetitions
    "CaseSummary", "MetricSummary", "Summary", "flaky_cases", "pass_at_k", "pass_hat_k",
    "summarize",
    # executors and the runner
    "SHIPPED_EXECUTORS", "Run", "cassette_executor", "echo", "load_callable", "load_executor",
    "load_scorer", "replay_executor", "takes_cassette", "ARTEFACT_FILES", "DEFAULT_CONCURRENCY",
    "DEFAULT_GRACE", "MAX_CONCURRENCY", "SuiteRunner",
    # comparing
    "Comparison", "Gate", "compare_results",
    # recording
    "Recorded", "check_record", "experiment_over", "record", "record_scores_of",
]
