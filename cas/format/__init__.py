"""L1, the format: how every stored byte is written and read. Pure: no I/O.

- `encoding`: the one canonical codec (`encode`, JSON value checks).
- `records`: every stored record as a frozen msgspec Struct, and the record-file envelope.
- `keys`: the key layout, one format/parse pair per key family.
- `cases`: the case codec: a case's canonical bytes and id, cases read from JSON Lines.
- `projection`: the run-to-case projection, less the content classes a policy withholds.
- `version_names`: dataset names, version numbers, `NAME@N` and the pin `NAME@N#b3:<hex>`.
- `times`: points in time (`started_at`, `--since`) parsed as times and normalized to UTC.
- `transcript`: a run or case as turns and tool calls in reading order.
- `redaction`: shape-based redaction of secrets and personal data in any JSON value.
"""
