#!/bin/sh
# Refresh evals/baseline.json: the whole locked suite, run as CI runs it (docs/ci.md).
# Run it from your project's root, with the code the baseline stands for (the base branch),
# after a lock move or a change you accept, and commit the file with it.
set -eu
DATASET="${DATASET:-support-evals}"
EXECUTOR="${EXECUTOR:-evals.agent:run_case}"
SCORER="${SCORER:-evals.agent:score}"
REPEAT="${REPEAT:-5}"

cas lock check
mkdir -p evals
cas suite run "$DATASET" --executor "$EXECUTOR" --scorer "$SCORER" --repeat "$REPEAT" \
  --json > evals/baseline.json.part
mv evals/baseline.json.part evals/baseline.json  # only a run where every case completed
echo "baseline: evals/baseline.json ($DATASET, $REPEAT repetitions); commit it"
