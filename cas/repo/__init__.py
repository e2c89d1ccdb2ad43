"""L3, the repository: one module per operation over a `Context`, and the facade naming them.

- `context`: what every operation works over (storage, objects, refs, clocks).
- `checks`: argument checks shared by every public operation.
- `userconfig`: per-person settings outside any repository (who you are).
- `opening`: creating, opening and finding a repository at a location.
- `repository`: the `Repository` facade: one method per operation, each implemented here.
- `datasets`: datasets, their metadata and version records.
- `sealing`: a new version sealed from a base, its tree stored before its record.
- `ingest`: staging the cases of a commit (and of a large file, with two processes).
- `reads`: reads of an exact version: pages, cases, diffs, proofs, provenance.
- `runs`: recorded runs: validated import, lookup by run id.
- `reviews`: human judgments of runs.
- `proposals`: promotion and removal: a staged proposal, its preview and confirm token.
- `scores`: pins, scores and experiments that cite an exact version.
- `retirement`: retiring a version, with a cause and a time.
- `erased`: the keyed digests of the persons an erasure deleted.
- `erasure`: deleting a person's bytes everywhere and retiring what held them.
- `gc`: garbage collection of what nothing reaches.
- `fsck`: reading every byte and reporting each problem.
- `mirror`: copying a repository between locations, verifying every digest.
- `timeline`: what happened to a repository, and the state of work.
"""
