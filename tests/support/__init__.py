"""What the tests share: paths of the checkout, helpers and servers (no tests here).

- `cli`: the command-line tests' repository of example cases, refusals in both forms, and the
  lifecycle's steps through `cas`.
- `transcripts`: runs of every kind of step, any steps, real traces imported.
- `lifecycle`: a recorded run, JSON Lines, key listings, a saved review, a promotion subject,
  an erasure left pending.
- `citing`: a dataset of two versions to cite (through the library or `cas`), a refused
  command's one line.
- `promoted`: versions promoted from runs of three tenants, hand-authored cases, a run's cases.
- `recordings`: recordings to replay, the organiser agent's run promoted, a plan for it.
- `erasure_world`: two people, three datasets and their versions, and a backend that fails on cue.
- `sample_cases`: small case lists for commits, and reading every id of a version.
- `evals`: suites and their runs, a directory's listing, frozen cases with tool calls,
  cassettes, eval set scenarios, capture records and events and an in-memory capture store.
- `secrets`: hypothesis strategies of secrets and personal data placed in text.
- `person_files`: person index files as the tests need them.
- `backend_contract`: the backend contract, which each backend's test file runs.
- `backends`: backends that count the storage calls made, or intrude at one.
- `seaweed`: a real SeaweedFS S3 server; `faultproxy`: network faults in front of it.
- `browser`: an ASGI app served by uvicorn, and Debian's headless Chromium.
"""

import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]  # the checkout
