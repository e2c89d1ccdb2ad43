"""L4, the evaluation loop over pinned versions: it derives from versions and never edits them.

- `replay`: sandboxed replay of a frozen case under a plan of tool effects; run diffs.
- `calls`: calls of user code (executors, scorers, replay functions): sync or async, threads,
  a timeout, what was raised in one line.
- `suites/`: suite files, results, executors, the suite runner, recording, a suite session.
- `cassettes/`: recorded exchanges of a case's run: request matching, the book of a version's
  cassettes (kept in the repository by `cas.repo.cassettes`), the HTTP adapter.
- `evalset/`: eval sets (failures to fix, wins to protect) and regression runs.
- `capture/`: production capture: rules, sampling, redaction, stores.
- `pytest_plugin`: the pytest plugin (a thin layer over `suites`).
"""
