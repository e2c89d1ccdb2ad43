"""Examples in every command's help: one table of command lines by command path, appended to
each command's epilog (click prints it after the options) by `attach`."""

from __future__ import annotations

import inspect
from typing import NamedTuple

import click


class Example(NamedTuple):
    command: str  # one shell command line (wrapped for display by `lines`)
    why: str      # what it does, one line


E = Example
TOKEN = "ct-5d41402abc4b2a76b9719d911017c592"  # as a preview prints it: ct- and 32 hex digits
PIN = '"support-evals@2#b3:9c1e..."'           # a pin as `cas pin` prints it (digest shortened)
CASE = "b3:052f26e5..."                        # a full case id as `cas items` prints it (shortened)

# The path of a command as typed after `cas` -> its examples. The root (`cas --help`) is the
# list of commands by workflow and has none. tests/test_cli_examples.py checks that every
# command and group is here, that every command line names its command and that every option
# it uses exists.
EXAMPLES: dict[str, tuple[Example, ...]] = {
    # -- runs and reviews ---------------------------------------------------------------------
    "suite": (
        E("cas suite export support-evals 2 -o support-evals-2.jsonl",
          "Write support-evals@2 as a suite file (pinned, redacted)."),
        E("cas suite run support-evals@2 --executor cas:replay --plan plan.json",
          "Replay every case of the version in the sandbox: a verdict."),
    ),
    "cassette": (
        E("cas cassette list support-evals", "The cassette in force for each case and executor."),
        E(f"cas cassette show support-evals {CASE} --executor cas:cassette",
          "The exchanges one case's run recorded."),
    ),
    "cassette list": (
        E("cas cassette list support-evals", "Every case's cassette, newest recording first."),
        E("cas cassette list support-evals --executor my_agent.evals:run_case --json",
          "Only those of your executor, as JSON."),
    ),
    "cassette show": (
        E(f"cas cassette show support-evals {CASE} --executor cas:cassette",
          "What each model, tool or HTTP request was answered with."),
        E(f"cas cassette show support-evals {CASE} --executor my_agent.evals:run_case --json",
          "The cassette record as JSON."),
    ),
    "suite export": (
        E("cas suite export support-evals 2 -o support-evals-2.jsonl",
          "The pinned version as a suite file, scrubbed on the way to disk."),
        E("cas suite export support-evals@2 > suite.jsonl", "The same, to stdout."),
    ),
    "suite run": (
        E("cas suite run support-evals@2 --executor cas:replay --plan plan.json "
          "--record replay-1",
          "Replay each frozen case; record the results as experiment replay-1."),
        E("cas suite run suite.jsonl --executor my_agent.evals:run_case --shard 1/4 "
          "--json > shard-1.json",
          "Run the first of four shards of a suite file with your own executor."),
        E("cas suite run suite.jsonl --executor cas:echo --artefacts artefacts",
          "Try the runner out; each case's evidence goes to artefacts/."),
        E("cas suite run support-evals@2 --executor my_agent.evals:run_case "
          "--cassette-mode record-missing",
          "Run your agent; its cassette records the model and tool calls it lacks."),
        E("cas suite run support-evals@2 --executor my_agent.evals:run_case "
          "--cassette-mode replay",
          "Replay the cassettes (the default under CI): no live call."),
    ),
    "suite merge": (
        E("cas suite merge shard-1.json shard-2.json shard-3.json shard-4.json --json",
          "Merge the shards' results into the result of one unsharded run."),
    ),
    "suite diff": (
        E("cas suite diff before.json after.json",
          "The cases whose answers or outcomes changed between two runs."),
    ),
    "evalset": (
        E("cas evalset list support-regressions --kind failure",
          "The failures of an eval set, oldest first."),
        E("cas evalset regress support-regressions@7 --replay my_agent.evals:replay",
          "Re-run every scenario of version 7 against its baselines."),
    ),
    "evalset list": (
        E("cas evalset list support-regressions", "Every scenario of the head, oldest first."),
        E("cas evalset list support-regressions --kind win --json",
          "Only the wins (the scenarios to protect), as JSON."),
    ),
    "evalset show": (
        E(f"cas evalset show support-regressions {CASE}",
          "One scenario: signature, baseline, replay input, notes."),
    ),
    "evalset capture": (
        E("cas evalset capture support-regressions --session s-42 --kind failure "
          "--signature tool_failed:search --baseline success=0",
          "Keep a failure to fix; seals a version."),
        E("cas evalset capture support-regressions --session s-43 --kind win "
          "--signature refund --baseline success=1 --replay-input '{\"q\": \"refund\"}'",
          "Keep a win to protect, with the input a replay starts from."),
    ),
    "evalset attach": (
        E(f"cas evalset attach support-regressions {CASE} "
          "--replay-input '{\"q\": \"where is my order\"}'",
          "Make a scenario replayable (its id changes; seals a version)."),
    ),
    "evalset matching": (
        E("cas evalset matching support-regressions --signature tool_failed:search",
          "The failures with this condition, newest first."),
    ),
    "evalset renew": (
        E("cas evalset renew support-regressions",
          "After an erasure retired the head, seal a version of what is left."),
    ),
    "evalset regress": (
        E("cas evalset regress support-regressions@7 --replay my_agent.evals:replay "
          "--timeout 60",
          "Re-run each scenario; exit 12: a win regressed, 13: one unchecked."),
        E("cas evalset regress support-regressions@7 --replay my_agent.evals:replay "
          "--scorer my_agent.evals:score --lower-is-better latency_s --json",
          "Score the new runs yourself; lower latency is better."),
        E("cas evalset regress support-regressions@7 --no-record",
          "Without --replay nothing is re-run: every scenario is reported skipped."),
    ),
    "serve": (
        E("cas serve", "Serve the review page at http://127.0.0.1:8300/ (this machine only)."),
        E("cas --repo /srv/evals serve --port 8400",
          "Serve another repository's page on port 8400."),
    ),
    "runs": (
        E("cas runs import --format openai-chat --tenant acme chats-0512.jsonl",
          "Import a day of OpenAI chat logs, all recorded for tenant acme."),
        E("cas runs list --tenant acme --since 2026-05-12",
          "List acme's runs started on or after 12 May, in import order."),
        E("cas runs show r-0104", "Print one recorded run."),
    ),
    "runs import": (
        E("cas runs import runs-0512.jsonl",
          "Import cas's own JSON Lines, all or nothing (stored runs stay as is)."),
        E("cas runs import --format openai-chat --tenant acme chats-0512.jsonl",
          "Convert OpenAI chat logs first; every run is of tenant acme."),
        E("cas runs import --format otel-genai --tenant-from service.name "
          "--person-from user.id traces.json",
          "OpenTelemetry GenAI spans, tenant and person read from span attributes."),
        E("cas runs import --format auto --container vcr --tenant acme support.yaml",
          "Detect the format of the API traffic recorded in a vcrpy cassette."),
        E("cas runs import --allow-erased-person p-2231 runs-0601.jsonl",
          "Admit again an erased person who gave new consent (this import only)."),
        E("cas runs import --from-captures data/eval-captures --tenant acme",
          "The records of a local capture store, as runs ready for review."),
    ),
    "runs list": (
        E("cas runs list --tenant acme --since 2026-05-12 --limit 20",
          "The first 20 acme runs started on or after 12 May."),
        E("cas runs list --cursor r-0120",
          "The next page: the runs after r-0120 (as `# more: --cursor` said)."),
    ),
    "runs show": (
        E("cas runs show r-0104", "Print run r-0104: input, steps, tool calls and outcome."),
        E("cas runs show r-0104 --transcript",
          "Read it as a transcript: turns, tool calls, their arguments and results."),
    ),
    "review": (
        E("cas review queue --tenant acme --limit 20",
          "The 20 oldest acme runs that nobody has judged yet."),
        E("cas review add r-0104 --metric dataset_eligibility --label reviewed",
          "Preview a review; repeat with the printed --confirm-token to save it."),
        E("cas review list r-0104", "The reviews of a run, with their annotation ids."),
    ),
    "review queue": (
        E("cas review queue --tenant acme --limit 20",
          "The 20 oldest acme runs with no judgment on dataset_eligibility."),
        E("cas review queue --metric tone --since 2026-05-12",
          "The runs since 12 May that nobody has judged on the metric tone."),
    ),
    "review add": (
        E("cas review add r-0104 --run r-0105 --metric dataset_eligibility --label reviewed",
          "Preview one judgment of two runs; nothing is saved yet."),
        E("cas review add r-0104 --run r-0105 --metric dataset_eligibility --label reviewed "
          f"--confirm-token {TOKEN}",
          "Save it: the same command with the token the preview printed."),
        E("cas review add --file reviews-0512.jsonl",
          'Preview a batch: one {"run_id", "metric", "label"} per line.'),
    ),
    "review list": (
        E("cas review list r-0104",
          "Every review of r-0104, oldest first, with its annotation id."),
    ),
    "status": (
        E("cas status", "Unsealed proposals, runs awaiting review and unfinished erasures."),
        E("cas status --metric tone", "The same, counting the runs not yet judged on tone."),
    ),
    "config": (
        E('cas config user.name "Ada Lovelace"', "Say who you are (reviews need it)."),
        E("cas config user.email ada@example.com", "Set your email."),
        E("cas config user.name", "Print the name (exit 1 when it is not set)."),
    ),
    # -- datasets and versions ----------------------------------------------------------------
    "dataset": (
        E('cas dataset create support-evals --description "Support agent regressions"',
          "Create an empty dataset; promoting reviewed runs adds its cases."),
        E("cas dataset show support-evals",
          "Its metadata and its newest versions, with their state."),
        E("cas dataset list", "The names of every dataset."),
    ),
    "dataset create": (
        E('cas dataset create support-evals --description "Support agent regressions" '
          "--tag support --tag prod",
          "Create an empty dataset; only promotion of reviewed runs adds cases."),
        E('cas dataset create support-golden --admission direct --tag golden',
          "Hand-authored cases: a direct dataset takes `cas commit --add` too."),
    ),
    "dataset list": (
        E("cas dataset list", "The names of every dataset, sorted."),
        E("cas dataset list --json", 'The same as {"datasets": [...]}, for scripts.'),
    ),
    "dataset show": (
        E("cas dataset show support-evals",
          "Metadata and the 20 newest versions, each ACTIVE or RETIRED (CAUSE)."),
        E("cas dataset show support-evals --before 12",
          "The versions below 12 (as `... more: --before 12` said)."),
    ),
    "dataset edit": (
        E('cas dataset edit support-evals --description "Tier-1 support regressions"',
          "Write a new metadata revision; every revision is kept."),
        E("cas dataset edit support-evals --tag support --tag tier-1",
          "Replace the tags."),
        E("cas dataset edit support-evals --clear-tags", "Remove every tag."),
    ),
    "dataset history": (
        E("cas dataset history support-evals", "Every metadata revision, oldest first."),
    ),
    "dataset delete": (
        E("cas dataset delete support-evals-scratch",
          "Delete a dataset nothing cites; its name can never be used again."),
    ),
    "promote": (
        E("cas promote support-evals --file subjects-0512.json "
          "--idempotency-key promote-2026-05-12",
          "Stage the reviewed runs the file lists and preview the next version."),
        E("cas promote support-evals --reviewed --tenant acme --since 2026-05-12 "
          "--idempotency-key promote-acme-0512",
          "Stage every acme run since 12 May that has an accepting review."),
        E("cas promote support-evals --reviewed --metric dataset_eligibility "
          "--run r-0104 --run r-0105 --idempotency-key promote-r-0104",
          "Stage exactly these two runs (each must have an accepting judgment)."),
    ),
    "remove": (
        E(f"cas remove support-evals {CASE} --idempotency-key remove-dup-0512",
          "Stage the removal of a case (its full id) and preview the next version."),
    ),
    "seal": (
        E(f'cas seal support-evals --confirm-token {TOKEN} -m "reviewed runs of 12 May"',
          "Seal the previewed proposal as version N+1; repeating it is a no-op."),
    ),
    "commit": (
        E('cas commit support-golden --add golden.jsonl -m "first cut"',
          "Seal the first version of a direct dataset from a file of cases."),
        E('cas commit support-golden --base 2 --add refusals.jsonl -m "refusal cases"',
          "Seal version 3: version 2 plus the cases in the file."),
        E(f'cas commit support-evals --base 3 --remove {CASE} -m "duplicate"',
          "Seal version 4: version 3 without one case."),
        E("cas commit support-golden --base 3 --add more.jsonl --retry",
          "If another writer sealed first, apply the change to the new head."),
    ),
    "show": (
        E("cas show support-evals@2", "The record of version 2 and its state."),
        E("cas show support-evals 2 --json", "The same as JSON (DATASET VERSION works too)."),
    ),
    "items": (
        E("cas items support-evals@2 --limit 50",
          "The first 50 cases in id order, with their run, tenant and outcome."),
        E(f"cas items support-evals@2 --cursor {CASE}",
          "The next page: the cases after that id (as `# more: --cursor` said)."),
    ),
    "case": (
        E("cas case support-evals@2 b3:052f26e5",
          "Print a frozen case, named by a unique prefix of at least 8 hex digits."),
        E("cas case support-evals@2 --run r-0104",
          "Print the case promoted from run r-0104."),
    ),
    "diff": (
        E("cas diff support-evals 1 2", "The cases added and removed from version 1 to 2."),
        E("cas diff support-evals@2 billing-evals@1 --limit 20",
          "Compare versions of two datasets, 20 changes a page."),
    ),
    "prove": (
        E(f"cas prove support-evals@2 {CASE} > proof.json",
          "Save a proof that the case is in support-evals@2, checkable offline."),
    ),
    "verify-proof": (
        E("cas verify-proof proof.json --root b3:9c1e...",
          "Check the proof against a content_digest; no repository needed."),
        E(f"cas verify-proof proof.json --pin {PIN}",
          "Check it against the version a pin names (reads the repository)."),
    ),
    "log": (
        E("cas log", "The whole repository's timeline, newest first."),
        E("cas log support-evals --limit 20",
          "The 20 newest seals, retirements, scores ... of one dataset."),
    ),
    "export": (
        E("cas export support-evals@2 --to jsonl > support-evals-2.jsonl",
          "Write an exact version as JSON Lines on stdout."),
        E("cas export support-evals@2 --to parquet -o support-evals-2.parquet",
          "Write a Parquet file, atomically."),
        E(f"cas export {PIN} --to hf -o hf/support-evals-2",
          "Check the pin first, then write a Hugging Face dataset directory."),
    ),
    "replay": (
        E(f"cas replay support-evals@2 {CASE}",
          "Replay a case, every tool call stubbed; nothing is invoked or written."),
        E(f"cas replay support-evals@2 {CASE} --plan plan.json --diff",
          "Replay it under a plan of tool effects; show what differs from the case."),
        E(f"cas replay support-evals@2 {CASE} --against new-run.json",
          "Diff the frozen case against a run recorded since (no replay)."),
    ),
    "settings": (
        E("cas settings show",
          "What promotion copies into cases, what it withholds, and what it needs."),
        E("cas settings content-policy --withhold tool_results",
          "Withhold tool results from the cases frozen from now on."),
    ),
    "settings show": (
        E("cas settings show",
          "The content classes copied and withheld, and what promotion needs."),
    ),
    "settings eligibility": (
        E("cas settings eligibility --accept reviewed",
          "Admit runs to promotion that are judged reviewed on dataset_eligibility."),
        E("cas settings eligibility --metric triage --accept keep --accept gold",
          "Gate promotion on the metric triage instead: either label admits a run."),
    ),
    "settings content-policy": (
        E("cas settings content-policy --withhold input --withhold tool_results",
          "Do not copy user input or tool results into cases frozen from now on."),
        E("cas settings content-policy --copy-all", "Copy every content class again."),
        E("cas settings content-policy --dataset support-evals --withhold tool_arguments",
          "Withhold tool arguments from the cases of support-evals only."),
    ),
    # -- scores and experiments ---------------------------------------------------------------
    "pin": (
        E("cas pin support-evals@2",
          "Print support-evals@2#b3:... to cite the exact set in a report or CI."),
    ),
    "pin-verify": (
        E(f"cas pin-verify {PIN}",
          "Fails when the version was deleted or retired, or holds another set."),
    ),
    "score": (
        E("cas score add support-evals@2 --metric task_success --value 0.82",
          "Record a score of the whole version, citing its pin."),
        E("cas score list support-evals@2", "The scores of version 2, in the order recorded."),
    ),
    "score add": (
        E("cas score add support-evals@2 --metric task_success --value 0.82",
          "Record a number for the whole version, citing its pin."),
        E(f"cas score add support-evals@2 --metric tone --value terse --item {CASE}",
          "Record a label for one case of it."),
        E("cas score add support-evals@2 --file scores.jsonl --experiment baseline",
          'Record a file of {"metric", "value", "item"?} lines as one batch.'),
    ),
    "score list": (
        E("cas score list support-evals", "Every score of the dataset, withdrawn ones marked."),
        E("cas score list support-evals@2", "Only the scores of version 2."),
    ),
    "score withdraw": (
        E('cas score withdraw datasets/support-evals/scores/0000000003 --reason "wrong rubric"',
          "Withdraw a batch: still listed, it no longer cites its version."),
    ),
    "experiment": (
        E("cas experiment create support-evals@2 --name baseline",
          "Record an experiment over version 2."),
        E("cas experiment compare support-evals baseline candidate",
          "Compare the scores of two experiments."),
    ),
    "experiment create": (
        E("cas experiment create support-evals@2 --name baseline",
          "Record experiment baseline over version 2 (a name unique per dataset)."),
    ),
    "experiment list": (
        E("cas experiment list support-evals", "The dataset's experiments, oldest first."),
    ),
    "experiment compare": (
        E("cas experiment compare support-evals baseline candidate",
          "Per-metric aggregates of both, and the cases they scored differently."),
    ),
    # -- erasure and retirement ---------------------------------------------------------------
    "retire": (
        E('cas retire support-evals@2 --cause CONTAMINATED --note "found in a training crawl"',
          "Retire version 2 for good: every read, score and experiment is refused."),
        E('cas retire support-evals 1 --cause INVALID_LABELS --note "rubric v1 was wrong"',
          "Retire version 1 because its labels were wrong."),
    ),
    "erase": (
        E("cas erase --person p-2231",
          "Preview what erasing the person deletes and retires; nothing changes."),
        E(f"cas erase --person p-2231 --confirm-token {TOKEN}",
          "Carry out exactly what the preview showed."),
    ),
    "erasures": (
        E("cas erasures list", "Every completed erasure (keyed digests and counts only)."),
    ),
    "erasures list": (
        E("cas erasures list", "Every completed erasure, oldest first."),
        E("cas erasures list --json", "The erasure records as JSON."),
    ),
    "version": (
        E("cas version delete support-evals 4",
          "Delete version 4 (refused while a score or experiment cites it)."),
    ),
    "version delete": (
        E("cas version delete support-evals 4",
          "Delete version 4; the number 4 is never used again."),
        E("cas version delete support-evals@4", "The same, as DATASET@N."),
    ),
    # -- repository ---------------------------------------------------------------------------
    "init": (
        E("cas init", "Create a repository in ./.cas."),
        E("cas init s3://acme-evals/cas", "Create one in an S3 bucket (docs/s3.md)."),
    ),
    "fsck": (
        E("cas fsck", "Verify every object, pack, index, tree and version record."),
        E("cas --repo s3://acme-evals/cas fsck --json",
          "Verify the repository in S3; the report as JSON (exit 7 on damage)."),
    ),
    "gc": (
        E("cas gc --dry-run", "Report what a gc would delete; delete nothing."),
        E("cas gc --grace 7d", "Collect only packs and unsealed proposals older than a week."),
        E("cas gc --wait 5m", "Wait up to 5 minutes for writers that started first."),
    ),
    "mirror": (
        E("cas mirror ~/evals s3://acme-evals/cas",
          "Copy a local repository to S3; only what is missing there is copied."),
        E("cas mirror s3://acme-evals/cas backups/evals",
          "Back the S3 repository up to a directory; safe to interrupt and rerun."),
    ),
    "cat": (
        E("cas cat b3:9c1e...",
          "Print a stored object (e.g. a version's provenance) exactly as stored."),
    ),
}

WIDTH = 74  # a command line's width in the help: click indents it by 4 within 78 columns
HEADING = "Examples:"


def _words(command: str) -> list[str]:
    """The command split at the spaces outside quotes, each word as written."""
    words, word, quote = [], "", None
    for ch in command:
        if quote:
            quote = None if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch == " ":
            if word:
                words.append(word)
            word = ""
            continue
        word += ch
    return words + ([word] if word else [])


def lines(example: Example, width: int = WIDTH) -> list[str]:
    """An example as the help shows it: `# why`, then the command, broken before an option
    (with a shell continuation) when it is longer than `width`."""
    groups: list[str] = []  # an option with its value (and any argument after it)
    for word in _words(example.command):
        starts = not groups or (word.startswith("-") and len(word) > 1) or word in ("|", ">")
        if starts:
            groups.append(word)
        else:
            groups[-1] += " " + word
    out = [groups[0]]
    for group in groups[1:]:
        if len(out[-1]) + 1 + len(group) + 2 <= width:  # room left for " \"
            out[-1] += " " + group
        else:
            out[-1] += " \\"
            out.append("    " + group)
    return [f"# {example.why}", *out]


def epilog(examples: tuple[Example, ...]) -> str:
    """The `Examples:` section: one `\\b` paragraph per example, so that click keeps its
    line breaks (and the first also holds the heading)."""
    blocks = ["\n".join(["\b"] + ([HEADING] if i == 0 else []) + [f"  {line}" for line in
                                                                   lines(example)])
              for i, example in enumerate(examples)]
    return "\n\n".join(blocks)


def _walk(group: click.Group, prefix: tuple[str, ...] = ()):
    for name, command in group.commands.items():
        path = (*prefix, name)
        yield " ".join(path), command
        if isinstance(command, click.Group):
            yield from _walk(command, path)


def attach(group: click.Group) -> None:
    """Append the Examples section to the epilog of every command and group under `group`
    that the table names; once only (attaching again changes nothing)."""
    for path, command in _walk(group):
        examples = EXAMPLES.get(path)
        if not examples:
            continue  # tests/test_cli_examples.py fails for a command missing from the table
        section = epilog(examples)
        current = inspect.cleandoc(command.epilog) if command.epilog else ""
        if section in current:
            continue
        command.epilog = f"{current}\n\n{section}" if current else section
