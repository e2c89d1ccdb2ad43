"""Production capture (docs/capture.md); public as `cas.capture` (the pipeline) and
`cas.capture_records`, `cas.capture_stores`, `cas.capture_otel`, `cas.capture_presidio`.

- `pipeline`: registration of a rule, a redactor and stores; sampling; the queue and its worker.
- `records`: what capture sees (an event) and what it keeps (a record).
- `stores`: where captures go: a local JSON Lines store and the repository store.
- `otel`: an OpenTelemetry span processor that turns GenAI spans into capture events.
- `presidio`: a redactor built on Microsoft Presidio.
"""
