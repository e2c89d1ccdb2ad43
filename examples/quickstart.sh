#!/bin/sh
# The main job end to end on a fresh local repository in a temporary directory:
# recorded runs -> human review -> promotion (preview, then seal with the confirm token) -> sealed
# versions 1 and 2 -> exact, paged reads -> diff -> pin and score -> erase a person (v2 is
# retired) -> cut v3 -> fsck and gc.
#
#   PATH="$PWD/.venv/bin:$PATH" sh examples/quickstart.sh
#
# Needs only `cas` on PATH and python3 (for reading --json output; no jq). Stops at the first error.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
command -v cas >/dev/null 2>&1 || { echo "quickstart: cas is not on PATH (pip install . first)" >&2; exit 1; }
py=$(command -v python3 || command -v python) || { echo "quickstart: needs python3" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/cas-quickstart.XXXXXX")
cd "$work"
unset CAS_REPO  # use the repository created here, whatever the caller's environment says
DS=support-evals

say() { printf '\n== %s\n' "$*"; }
run() { printf '$ %s\n' "$*"; "$@"; }
# runj FILE CMD...: run a cas command with --json, keep its output in FILE (not printed)
runj() { out=$1; shift; printf '$ %s --json > %s\n' "$*" "$out"; "$@" --json > "$out"; }
# abridged N CMD...: run a command, print the first N lines of its output and its last line
abridged() {
  n=$1; shift; printf '$ %s\n' "$*"; "$@" > out.txt
  total=$(wc -l < out.txt)
  if [ "$total" -le $((n + 2)) ]; then cat out.txt; else
    head -n "$n" out.txt; echo "    ... ($((total - n - 1)) more lines)"; tail -n 1 out.txt; fi
}
# field FILE KEY...: one value of a JSON file (strings raw, anything else as JSON; the key
# "#" gives the length of a list)
field() {
  "$py" - "$@" <<'EOF'
import json, sys
value = json.load(open(sys.argv[1]))
for key in sys.argv[2:]:
    if key == "#":
        value = len(value)
    else:
        value = value[int(key)] if isinstance(value, list) else value[key]
print(value if isinstance(value, str) else json.dumps(value))
EOF
}

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
run cas runs show r-0104

say "Review a batch: preview, then confirm with the token the preview printed"
abridged 3 cas review add --file "$here/reviews.jsonl"
runj preview.json cas review add --file "$here/reviews.jsonl"
token=$(field preview.json confirm_token)
runj annotations.json cas review add --file "$here/reviews.jsonl" --confirm-token "$token"
echo "saved $(field annotations.json annotation_ids "#") reviews"
run cas review list r-0101

# subjects OUT BEFORE [RUN_ID=ANNOTATION_ID ...]: the runs reviewed as eligible (label
# "reviewed"), started before BEFORE, as promotion subjects; the annotation ids come from the
# saved batch (annotations.json lists them in the order of reviews.jsonl).
subjects() {
  "$py" - "$here" "$@" <<'EOF'
import json, sys
here, out, before, *extra = sys.argv[1:]
reviews = [json.loads(line) for line in open(f"{here}/reviews.jsonl") if line.strip()]
started = {r["run_id"]: r["started_at"] for r in map(json.loads, open(f"{here}/runs.jsonl"))}
ids = json.load(open("annotations.json"))["annotation_ids"]
pairs = [(r["run_id"], a) for r, a in zip(reviews, ids)
         if r["label"] == "reviewed" and started[r["run_id"]] < before]
pairs += [tuple(e.split("=", 1)) for e in extra]
subjects = [{"subject_kind": "agent_run", "subject_ref": run, "review_annotation_id": ann}
            for run, ann in pairs]
json.dump(subjects, open(out, "w"), indent=1)
print(f"{out}: {len(subjects)} subjects")
EOF
}

say "Promote the eligible runs recorded on 1 May: the preview seals nothing"
subjects v1-subjects.json 2026-05-02
run cas promote "$DS" --file v1-subjects.json --idempotency-key quickstart-v1
runj proposal1.json cas promote "$DS" --file v1-subjects.json --idempotency-key quickstart-v1
say "Seal version 1 with the preview's confirm token"
run cas seal "$DS" --confirm-token "$(field proposal1.json confirm_token)" -m "reviewed runs of 1 May"
run cas seal "$DS" --confirm-token "$(field proposal1.json confirm_token)"

say "One more review, of a single run, then promote everything eligible so far"
run cas review add r-0705 --metric dataset_eligibility --label reviewed
runj review-preview.json cas review add r-0705 --metric dataset_eligibility --label reviewed
runj review.json cas review add r-0705 --metric dataset_eligibility --label reviewed \
  --confirm-token "$(field review-preview.json confirm_token)"
subjects v2-subjects.json 2026-05-09 "r-0705=$(field review.json annotation_id)"
runj proposal2.json cas promote "$DS" --file v2-subjects.json --idempotency-key quickstart-v2
echo "proposed $DS@2: $(field proposal2.json proposed item_count) cases," \
  "$(field proposal2.json proposed added "#") new," \
  "$(field proposal2.json proposed carried_count) carried from $DS@1 (a run promoted again is the same case)"
say "Seal version 2"
run cas seal "$DS" --confirm-token "$(field proposal2.json confirm_token)" -m "reviewed runs through 4 May"
run cas dataset show "$DS"

say "Exact reads: every read names a version; page through v1 and v2"
# pages DATASET VERSION LIMIT: follow next_cursor until has_more is false
pages() {
  n=0 cursor=""
  while :; do
    n=$((n + 1))
    if [ -z "$cursor" ]; then
      cas items "$1" "$2" --limit "$3" --json > page.json
    else
      cas items "$1" "$2" --limit "$3" --cursor "$cursor" --json > page.json
    fi
    "$py" - "$n" <<'EOF'
import json, sys
p = json.load(open("page.json"))
v, ids = p["version"], [i["id"] for i in p["items"]]
print(f"{v['dataset']}@{v['number']} page {sys.argv[1]}: {len(ids)} ids, {ids[0][:15]}... to "
      f"{ids[-1][:15]}..., has_more={str(p['pagination']['has_more']).lower()} "
      f"(item_count {v['item_count']}, {v['content_digest'][:15]}...)")
EOF
    [ "$(field page.json pagination has_more)" = true ] || break
    cursor=$(field page.json pagination next_cursor)
  done
}
pages "$DS" 1 10
pages "$DS" 2 10
run cas items "$DS" 2 --limit 3
cas items "$DS" 2 --limit 1 --json > first.json
first=$(field first.json items 0 id)
abridged 24 cas case "$DS" 2 "$first"
run cas show "$DS" 1
if cas items "$DS" >/dev/null 2>err.txt; then echo "quickstart: a read without a version worked" >&2; exit 1; fi
echo "\$ cas items $DS   (no version) -> refused: $(tail -n 1 err.txt)"

say "What changed from v1 to v2"
run cas diff "$DS" 1 2 --limit 5
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

say "A person asks to be forgotten: erase them (preview, then confirm)"
abridged 4 cas erase --person user-95
runj erase-preview.json cas erase --person user-95
run cas erase --person user-95 --confirm-token "$(field erase-preview.json confirm_token)"
run cas show "$DS" 2
if cas items "$DS" 2 >/dev/null 2>err.txt; then echo "quickstart: a retired version was read" >&2; exit 1; fi
echo "\$ cas items $DS 2   -> refused: $(tail -n 1 err.txt)"
run cas score list "$DS" 2
run cas erasures list

say "Cut version 3 from the cases that are left: an empty removal, accepted on a retired head"
runj recut.json cas remove "$DS" --idempotency-key quickstart-recut
run cas seal "$DS" --confirm-token "$(field recut.json confirm_token)" -m "v2 without the erased person"
run cas show "$DS" 3

say "Check the whole repository, and what garbage collection would reclaim"
run cas fsck
run cas gc --dry-run --grace 0

say "Done"
echo "the repository is in $work/.cas (browse it with: cd $work && cas dataset show $DS)"
