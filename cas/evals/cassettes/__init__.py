"""Cassettes (docs/suites.md), public as `cas.cassettes`: the recorded exchanges (model calls,
tool calls, HTTP requests) of one case's run, replayed so that a rerun makes no live call and
a changed request is an error.

- `matching`: request keys, modes, and one case's Cassette with its strict and ordered
  matching (pure).
- `book`: the cassettes of a pinned version's cases under one executor, kept in the
  repository's cassette log (cas.repo.cassettes).
- `http`: the HTTP adapter (vcrpy; the extra `cassette-http`), public as `cas.cassette_http`.
"""

from cas.evals.cassettes.book import CassetteBook, cassette_logs, current, read, save, suite_pin
from cas.evals.cassettes.matching import (ADAPTERS, CALL, HTTP, LIVE, MODE_ENV, MODES, RECORD,
                                          RECORD_MISSING, REPLAY, Cassette, RecordedError,
                                          StaleCassette, UnusedExchanges, credential_name,
                                          request_key, resolve_mode)

__all__ = ["ADAPTERS", "CALL", "HTTP", "MODES", "MODE_ENV", "LIVE", "RECORD", "RECORD_MISSING",
           "REPLAY", "Cassette", "CassetteBook", "RecordedError", "StaleCassette",
           "UnusedExchanges", "cassette_logs", "current", "read", "suite_pin", "request_key",
           "resolve_mode", "save", "credential_name"]
