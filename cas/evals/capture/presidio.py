"""A capture redactor built on Microsoft Presidio (the extra `cas[presidio]`): an example of a
content policy, never a default (docs/capture.md)."""

from __future__ import annotations

from typing import Any, Callable

try:
    from presidio_analyzer import AnalyzerEngine
    from presidio_anonymizer import AnonymizerEngine
except ImportError as exc:  # an extra: say which
    from cas.errors import FailedPrecondition
    raise FailedPrecondition("the Presidio redactor needs Presidio, from the `presidio` extra: "
                             "pip install '.[presidio]' in the cas checkout (and a spaCy "
                             "model for its analyzer)",
                             reason="EXTRA_REQUIRED", extra="presidio") from exc

from cas.evals.capture.records import CaptureRecord, RecordedTool


def presidio_redactor(analyzer: Any = None, anonymizer: Any = None, language: str = "en",
                      entities: list[str] | None = None) -> Callable[[CaptureRecord],
                                                                     CaptureRecord]:
    """A redactor for `@cas.capture.redactor`: the input and output text with what Presidio's
    `analyzer` detects (`entities`, default all it knows) replaced by `anonymizer` (its
    default: `<ENTITY_TYPE>`), and every tool call's arguments, result and error dropped
    (their schemas may hold anything; the tool's name and whether it failed stay).
    `analyzer` defaults to `AnalyzerEngine()`, which loads the spaCy model its configuration
    names: provision it where the agent runs. Detection misses things: "redacted" says the
    policy ran, not that no personal data is left."""
    analyzer = analyzer if analyzer is not None else AnalyzerEngine()
    anonymizer = anonymizer if anonymizer is not None else AnonymizerEngine()

    def mask(text: str) -> str:
        if not text:
            return text
        found = analyzer.analyze(text=text, language=language, entities=entities)
        return anonymizer.anonymize(text=text, analyzer_results=found).text

    def redact(record: CaptureRecord) -> CaptureRecord:
        return record.replace(
            input_text=mask(record.input_text), output_text=mask(record.output_text),
            tool_calls=tuple(RecordedTool(name=t.name, failed=t.failed)
                             for t in record.tool_calls))
    return redact
