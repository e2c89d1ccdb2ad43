"""L4, the evaluation loop over pinned versions: it derives from versions and never edits them.

- `replay`: sandboxed replay of a frozen case under a plan of tool effects; run diffs.
- `suites/`: suite files, the suite runner, its results and recording.
- `cassettes/`: recorded exchanges of a case's run, kept in the repository; the HTTP adapter.
- `evalset`: eval sets (failures to fix, wins to protect) and regression runs.
- `capture/`: production capture: rules, sampling, redaction, stores.
- `pytest_plugin`: the pytest plugin (a thin layer over `suites`).
"""
