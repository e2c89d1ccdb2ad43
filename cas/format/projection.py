"""The run-to-case projection: the case a recorded run becomes, less the content classes a
policy withholds (named in the case). Pure: no I/O."""

from __future__ import annotations

import msgspec

from cas.format.records import Case, RunRecord

# The content classes a content policy may withhold from the cases promoted into a dataset.
CONTENT_CLASSES = ("input", "output", "tool_arguments", "tool_results", "metadata")
# The metadata member an importer sets on every run it converts: the format (and container)
# it came from. Such a run's other metadata may repeat its content (see `withhold`).
IMPORT_KEY = "import"

# The fields of a tool_call step each content class withholds: the arguments as recorded, kept
# verbatim when they were not JSON (importers), and the reply with what else it recorded.
_STEP_FIELDS = {"tool_arguments": ("arguments", "arguments_raw", "arguments_error"),
                "tool_results": ("result", "error", "reply")}


def freeze(run: RunRecord, withheld: list[str]) -> Case:
    """The case a run becomes under a content policy: withheld classes are left out and named."""
    return withhold(Case(run_id=run.run_id, started_at=run.started_at, input=run.input,
                         output=run.output, steps=run.steps, outcome=run.outcome,
                         metadata=run.metadata, tenant=run.tenant, person=run.person),
                    withheld)


def withhold(case: Case, withheld: list[str]) -> Case:
    """`case` with the content classes `withheld` left out, and named in its `withheld`. The
    metadata of a run converted from another format keeps what the format recorded beside
    the conversation, which may repeat it: withholding any content of such a run withholds
    its metadata too."""
    w = set(withheld)
    if w - {"metadata"} and isinstance(case.metadata, dict) and IMPORT_KEY in case.metadata:
        w.add("metadata")
    steps = []
    for step in case.steps:
        if step.get("type") == "tool_call":
            step = dict(step)
            for cls, fields in _STEP_FIELDS.items():
                if cls in w:
                    for field in fields:
                        step.pop(field, None)
        steps.append(step)
    return msgspec.structs.replace(
        case, input=None if "input" in w else case.input,
        output=None if "output" in w else case.output, steps=steps,
        metadata={} if "metadata" in w else case.metadata,
        withheld=sorted(w.union(case.withheld)))
