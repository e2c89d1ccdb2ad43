"""The Presidio redactor (cas/evals/capture/presidio.py, extra `presidio`).

Presidio's analyzer loads a spaCy model; a trained one (en_core_web_lg) is not on PyPI and is
not fetched here, so the analyzer runs over a blank spaCy pipeline: its pattern recognizers
(e-mail addresses, card numbers, ...) need no trained model, its name and place recognizers
do, and those are not tested.
"""

from __future__ import annotations

from cas.evals.capture import pipeline as capture
from cas.evals.capture.records import ToolCall
from support.evals import ListStore, event


def test_the_presidio_redactor_masks_what_presidio_detects(tmp_path):
    """With a real Presidio analyzer over a blank spaCy pipeline (its pattern recognizers need
    no trained model; a trained one, which PyPI does not carry, adds names and places)."""
    import spacy
    from presidio_analyzer import AnalyzerEngine
    from presidio_analyzer.nlp_engine import SpacyNlpEngine

    from cas.evals.capture.presidio import presidio_redactor
    spacy.blank("en").to_disk(tmp_path / "blank-en")
    engine = SpacyNlpEngine(models=[{"lang_code": "en", "model_name": str(tmp_path / "blank-en")}])
    analyzer = AnalyzerEngine(nlp_engine=engine, supported_languages=["en"])
    store = ListStore()
    capture.register_store("mem", store)
    capture.rule(lambda e: True, store="mem")
    capture.redactor(presidio_redactor(analyzer, entities=["EMAIL_ADDRESS", "CREDIT_CARD"]))
    capture.submit(event(1, input_text="refund to ada.lovelace@example.com, card "
                                       "4111 1111 1111 1111",
                         output_text="done for ada.lovelace@example.com",
                         tool_calls=(ToolCall(name="refund", arguments={"card": "4111"},
                                              error="declined"),)))
    assert capture.flush(10)
    [r] = store.records
    assert r.content == "redacted"
    assert r.input_text == "refund to <EMAIL_ADDRESS>, card <CREDIT_CARD>"
    assert r.output_text == "done for <EMAIL_ADDRESS>"
    assert [(t.name, t.failed, t.arguments, t.error) for t in r.tool_calls] == \
        [("refund", True, None, None)]


def test_the_redactor_keeps_empty_text_and_the_tools_name_and_failure_only(tmp_path):
    from cas.evals.capture.presidio import presidio_redactor
    from cas.evals.capture.records import CaptureRecord, RecordedTool

    class Nothing:
        """An analyzer that is never asked about empty text, and finds nothing."""

        def analyze(self, text, language, entities):
            assert text and language == "en"
            return []
    redact = presidio_redactor(Nothing())
    record = CaptureRecord(id="cr-1", captured_at="2026-12-01T10:00:00.000000Z",
                           agent_name="a", invocation_id="i", reasons=("rule",),
                           status="failed", input_text="", output_text="kept as it is",
                           tool_calls=(RecordedTool(name="t", failed=True, result={"x": 1}),))
    out = redact(record)
    assert (out.input_text, out.output_text) == ("", "kept as it is")
    assert out.tool_calls == (RecordedTool(name="t", failed=True),)
