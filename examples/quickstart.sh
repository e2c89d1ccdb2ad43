#!/bin/sh
# The main job end to end on a fresh local repository in a temporary directory:
# recorded runs -> human review -> promotion of the accepted runs (preview, then seal with the
# confirm token) -> sealed versions 1 and 2 -> exact, paged reads -> diff -> pin and score ->
# lock v2 in cas.lock -> erase a person (v2 is retired, the lock check fails) -> renew (v3) and
# move the lock to it -> a suite run through the lock -> fsck and gc.
#
#   PATH="$PWD/.venv/bin:$PATH" sh examples/quickstart.sh
#
# Needs only `cas` on PATH and a POSIX shell (sed). Stops at the first error.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
command -v cas >/dev/null 2>&1 || { echo "quickstart: cas is not on PATH (pip install . first)" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/cas-quickstart.XXXXXX")
cd "$work"
unset CAS_REPO  # use the repository created here, whatever the caller's environment says
DS=support-evals

say() { printf '\n== %s\n' "$*"; }
run() { printf '$ %s\n' "$*"; "$@"; }
# keep FILE CMD...: run a command, print its output and keep it in FILE
keep() { out=$1; shift; printf '$ %s\n' "$*"; "$@" > "$out"; cat "$out"; }
# abridged N CMD...: run a command, print the first N lines of its output and its last line
abridged() {
  n=$1; shift; printf '$ %s\n' "$*"; "$@" > out.txt
  total=$(wc -l < out.txt)
  if [ "$total" -le $((n + 2)) ]; then cat out.txt; else
    head -n "$n" out.txt; echo "    ... ($((total - n - 1)) more lines)"; tail -n 1 out.txt; fi
}
# token FILE: the confirm token a preview printed (its last line names it)
token() { sed -n 's/.*--confirm-token \(ct-[0-9a-f]*\).*/\1/p' "$1" | tail -n 1; }

say "A repository, and who reviews"
run cas init
if [ -n "${CAS_USER:-}" ]; then
  echo "reviewer from CAS_USER: $CAS_USER"
else
  # A scratch config file, so the demo identity does not land in your own ~/.config/cas.
  export CAS_CONFIG="$work/cas-config.json"
  run cas config user.name "Ada Lovelace"
  run cas config user.email ada@example.com
fi
run cas dataset create "$DS" --description "Reviewed support and ops agent runs" --tag demo

say "Import recorded runs (all or nothing; importing the same file again changes nothing)"
run cas runs import "$here/runs.jsonl"
run cas runs import "$here/runs.jsonl"
run cas runs list --tenant acme --limit 3
run cas runs show r-0104 --transcript

say "Review: what waits for a judgment, then a batch (preview, then confirm with its token)"
run cas review queue --limit 3
abridged 3 cas review add --file "$here/reviews.jsonl"
run cas review add --file "$here/reviews.jsonl" --confirm-token "$(token out.txt)" > saved.txt
echo "saved $(grep -c '^saved review' saved.txt) reviews"
run cas review list r-0101

say "Promotion needs an accepting judgment: a rejected run is refused, before anything is stored"
if cas promote "$DS" --reviewed --run r-0603 --idempotency-key quickstart-rejected \
    >/dev/null 2>err.txt; then
  echo "quickstart: a rejected run was promoted" >&2; exit 1
fi
echo "\$ cas promote $DS --reviewed --run r-0603 ...   -> refused: $(tail -n 1 err.txt)"

say "Promote acme's accepted runs: the preview names each case's run, and seals nothing"
abridged 4 cas promote "$DS" --reviewed --tenant acme --idempotency-key quickstart-v1
say "Seal version 1 with the preview's confirm token (sealing it again changes nothing)"
run cas seal "$DS" --confirm-token "$(token out.txt)" -m "accepted acme runs"
run cas seal "$DS" --confirm-token "$(token out.txt)"

say "One more review, of a single run, then promote every accepted run"
keep review.txt cas review add r-0705 --metric dataset_eligibility --label reviewed
run cas review add r-0705 --metric dataset_eligibility --label reviewed \
  --confirm-token "$(token review.txt)"
abridged 2 cas promote "$DS" --reviewed --idempotency-key quickstart-v2
say "Seal version 2 (the runs already in v1 are carried as the same cases)"
run cas seal "$DS" --confirm-token "$(token out.txt)" -m "every accepted run through 4 May"
run cas status
run cas dataset show "$DS"

say "Exact reads: every read names a version; page through v1 with the cursor each page ends with"
run cas items "$DS" 1 --limit 4 > page.txt
cat page.txt
cursor=$(sed -n 's/^# more: --cursor //p' page.txt)
run cas items "$DS" 1 --limit 4 --cursor "$cursor"
cas items "$DS" 2 --limit 1 > first.txt
first=$(sed -n '2s/ .*//p' first.txt)
abridged 12 cas case "$DS" 2 --run r-0104      # a case named by the run it was frozen from
abridged 3 cas case "$DS" 2 "$(printf %.11s "$first")"  # or by a unique prefix of its id
run cas show "$DS" 1
if cas items "$DS" >/dev/null 2>err.txt; then echo "quickstart: a read without a version worked" >&2; exit 1; fi
echo "\$ cas items $DS   (no version) -> refused: $(tail -n 1 err.txt)"

say "What changed from v1 to v2"
run cas diff "$DS" 1 2 --limit 5
abridged 9 cas diff "$DS" 1 2 --format markdown --limit 3   # for a pull request comment
echo "\$ cas prove $DS 2 $first > proof.json"
cas prove "$DS" 2 "$first" > proof.json
run cas verify-proof proof.json

say "Pin version 2 and record scores that cite it"
printf '$ cas pin %s 2\n' "$DS"
pin=$(cas pin "$DS" 2)
echo "$pin"
run cas pin-verify "$pin"
run cas experiment create "$DS" 2 --name quickstart
run cas score add "$DS" 2 --metric task_success --value 0.875 --experiment quickstart
run cas score add "$DS" 2 --metric task_success --value 1 --item "$first" --experiment quickstart
run cas score list "$DS" 2
if cas version delete "$DS" 2 >/dev/null 2>err.txt; then
  echo "quickstart: a cited version was deleted" >&2; exit 1
fi
echo "\$ cas version delete $DS 2   -> refused: $(tail -n 1 err.txt)"

say "Lock version 2 in this project's cas.lock (commit it beside your tests), and check it"
run cas lock add "$DS@2"
cat cas.lock
run cas lock check

say "A person asks to be forgotten: erase them (preview, then confirm)"
abridged 4 cas erase --person user-95
run cas erase --person user-95 --confirm-token "$(token out.txt)"
run cas show "$DS" 2
if cas items "$DS" 2 >/dev/null 2>err.txt; then echo "quickstart: a retired version was read" >&2; exit 1; fi
echo "\$ cas items $DS 2   -> refused: $(tail -n 1 err.txt)"
run cas score list "$DS" 2
run cas erasures list

if cas lock check >/dev/null 2>err.txt; then echo "quickstart: a retired pin passed the check" >&2; exit 1; fi
echo "\$ cas lock check   -> exit 5: $(tail -n 1 err.txt)"

say "Renew: seal version 3 from the cases the erasure left, and move the lock to it"
run cas renew "$DS"
run cas lock update
run cas lock check
run cas show "$DS" 3

say "A verdict from a pinned version: export it as a suite, replay it twice, compare the runs"
printf '{"default_effect": "none"}\n' > plan.json   # read-only tools: replay what was recorded
run cas suite export "$DS" 3 -o suite.jsonl
run cas suite run "$DS" --executor cas:replay --plan plan.json --record replay-a  # cas.lock: @3
cas suite run "$DS@3" --executor cas:replay --plan plan.json --json > run-a.json
echo "\$ cas suite run $DS@3 --executor cas:replay --plan plan.json --record replay-b --json > run-b.json"
cas suite run "$DS@3" --executor cas:replay --plan plan.json --record replay-b --json > run-b.json
run cas suite diff run-a.json run-b.json
run cas experiment compare "$DS" replay-a replay-b

say "Check the whole repository, and what garbage collection would reclaim"
run cas fsck
run cas gc --dry-run --grace 0

say "Done"
echo "the repository is in $work/.cas (browse it with: cd $work && cas dataset show $DS)"
