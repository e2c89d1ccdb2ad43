"""Production capture (docs/capture.md), public as `cas.capture` (the names below) and
`cas.capture_records`, `cas.capture_stores`, `cas.capture_otel`, `cas.capture_presidio`:

- `pipeline`: registration of a rule, a redactor and stores; sampling; the queue and its worker.
- `records`: what capture sees (an event) and what it keeps (a record).
- `stores`: where captures go: a local JSON Lines store and the repository store.
- `otel`: an OpenTelemetry span processor that turns GenAI spans into capture events.
- `presidio`: a redactor built on Microsoft Presidio.
"""

from cas.evals.capture.pipeline import (enabled, flush, invocation, redactor, register_store, reset,
                                        rule, sample_rate, sampled, stats, submit)
from cas.evals.capture.records import CaptureEvent, CaptureRecord, RecordedTool, ToolCall
from cas.evals.capture.stores import LocalCaptureStore, RepositoryCaptureStore, record_of, run_of

__all__ = ["CaptureEvent", "CaptureRecord", "LocalCaptureStore", "RecordedTool",
           "RepositoryCaptureStore", "ToolCall", "enabled", "flush", "invocation",
           "record_of", "redactor", "register_store", "reset", "rule", "run_of", "sample_rate",
           "sampled", "stats", "submit"]
