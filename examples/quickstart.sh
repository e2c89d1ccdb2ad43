#!/bin/sh
# The main job end to end on a local repository: create one, seal the bundled example cases
# into version 1 of a dataset, read it back exactly, change it, and check the repository.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
cd "$work"
set -x
cas init
cas dataset create support-evals --description "Reviewed agent runs" --tag demo
cas commit support-evals --add "$here/cases.jsonl" -m "first five reviewed runs"
cas show support-evals@1
cas items support-evals@1
first=$(cas items support-evals@1 --limit 1 | head -n 1)
cas case support-evals@1 "$first"
cas commit support-evals --base 1 --remove "$first" -m "drop one case"
cas diff support-evals@1 support-evals@2
cas prove support-evals@1 "$first" > proof.json
cas verify-proof proof.json
cas fsck
