"""The production loop end to end, on a local repository (docs/capture.md, docs/evalset.md):

a small support agent runs with capture on; its failures are captured (content scrubbed by a
redactor) as runs of the repository and as failure scenarios of an eval set; a person reviews
the runs in the queue; the reviewed ones are promoted into a dataset; a known-good scenario is
kept as a win; and a regression run re-runs every scenario of the eval set's version with a
fixed agent, comparing each new run with its baseline.

    python examples/capture_loop.py [DIRECTORY]     # default: a new temporary directory
"""

from __future__ import annotations

import os
import sys
import tempfile

import cas
from cas import capture, evalset, redaction
from cas.capture_records import RecordedTool

REVIEWER = "Ada Lovelace <ada@example.com>"
ORDERS = {"1017": "shipped", "1018": "delayed"}


def lookup_order(order: str) -> dict:
    """The agent's one tool: a failure is an `error` field, as many tools answer."""
    return {"status": ORDERS[order]} if order in ORDERS else {"error": f"no order {order}"}


def order_of(question: str) -> str:
    return question.split("#")[1].split()[0].strip("?.!,")  # IndexError without a '#'


def support_agent(question: str, user: str) -> str:
    """Version 1 of the agent: it crashes on a question without an order number. Each call
    is one captured invocation (a crash makes it `failed`, and is raised on)."""
    with capture.invocation(agent="support", user_id=user, session_id=f"chat-{user}") as inv:
        inv.input_text = question
        order = order_of(question)
        found = lookup_order(order)
        inv.tool("lookup_order", {"order": order}, found)
        inv.output_text = f"Order {order}: {found.get('status', 'unknown')}"
    return inv.output_text


def fixed_agent(question: str) -> str:
    """Version 2: asks for the order number instead of crashing."""
    if "#" not in question:
        return "Which order do you mean? Please give its number."
    order = order_of(question)
    return f"Order {order}: {lookup_order(order).get('status', 'unknown')}"


def scrub(record):
    """The team's content policy: credentials and personal data masked in the texts, tool
    payloads dropped (their schemas may hold anything)."""
    return record.replace(
        input_text=redaction.scrub_text(record.input_text),
        output_text=redaction.scrub_text(record.output_text),
        tool_calls=tuple(RecordedTool(name=t.name, failed=t.failed) for t in record.tool_calls))


def main(directory: str) -> int:
    os.environ.setdefault("CAS_USER", REVIEWER)
    repo = cas.init(directory)

    # 1. Capture: failed invocations and failed tools, into the repository and an eval set.
    capture.reset()
    capture.register_store("support", capture.RepositoryCaptureStore(
        repo, tenant="acme", evalset="support-regressions"))
    capture.rule(lambda event: event.failed or event.tool_error, store="support")
    capture.redactor(scrub)
    traffic = [("Where is order #1017?", "alice"), ("Where is my parcel?", "bob"),
               ("Status of order #2000 please, mail me at bob@example.com", "bob"),
               ("Where is order #1018?", "carol")]
    for question, user in traffic:
        try:
            print(f"agent: {support_agent(question, user)}")
        except IndexError:
            print(f"agent crashed on: {question!r}")
    capture.flush(10)
    print(f"captured: {capture.stats()}")
    capture.reset()

    # 2. Review: the captured runs wait in the queue; a person judges them.
    queue = repo.review_queue()
    print(f"runs awaiting review: {len(queue.runs)}")
    requests = [{"run_id": s["run_id"], "metric": "dataset_eligibility", "label": "reviewed"}
                for s in queue.runs]
    token = repo.add_reviews(requests, reviewer=REVIEWER)["confirm_token"]
    repo.add_reviews(requests, reviewer=REVIEWER, confirm_token=token)

    # 3. Promote the reviewed runs into a dataset: a sealed, immutable version.
    repo.create_dataset("support-failures", description="captured failures, reviewed")
    staged = repo.promote_reviewed("support-failures", "capture-loop-1")
    version = repo.seal("support-failures", staged["confirm_token"]).version
    print(f"sealed support-failures@{version.number}: {version.item_count} cases")

    # 4. The eval set: the captured failures, and a win to protect.
    corpus = evalset.open(repo, "support-regressions")
    corpus.capture("chat-dave", "win", ["order_status"], {"success": 1.0},
                   replay_input={"input_text": "Where is order #1017?"},
                   notes="answers a known order")
    for s in corpus.cases():
        print(f"scenario {s.id[:15]}  {s.kind:<7}  {', '.join(s.signature)}")
    pin = corpus.pin

    # 5. A regression run over that exact version, with the fixed agent.
    def replay(scenario, system_context):
        answer = fixed_agent(scenario.replay_input["input_text"])
        run_id = f"replay-{scenario.id[3:15]}"
        ok = "unknown" not in answer and "no order" not in answer
        repo.import_runs([{"run_id": run_id, "tenant": "acme", "input": scenario.replay_input,
                           "output": answer, "steps": [],
                           "outcome": {"status": "success" if ok else "failure",
                                       "scores": {"success": 1.0 if ok else 0.0}}}])
        return run_id  # a NEW run: never the scenario's own session
    result = evalset.regress(repo, str(pin), replay, timeout=30)
    for r in result.results:
        print(f"{r.id[:15]}  {r.kind:<7}  {r.outcome:<12}  {r.reason or ''}")
    print(f"regression over {result.evalset}@{result.version}: {result.counts}; "
          f"exit {result.exit_code}")
    print(f"fsck: {'ok' if repo.fsck().ok else 'PROBLEMS'}")
    return result.exit_code


if __name__ == "__main__":
    target = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="cas-capture-loop-")
    print(f"repository: {target}")
    sys.exit(main(target))
