"""L3, the repository: one module per operation over a `Context`, and the facade naming them.

- `context`: what every operation works over (storage, objects, refs, clocks).
- `checks`: argument checks shared by every public operation.
- `userconfig`: per-person settings outside any repository (who you are).
- `opening`: creating, opening and finding a repository at a location.
- `repository`: the `Repository` facade: one typed method per operation of these modules.
- `datasets`: datasets, their metadata and version records.
- `sealing`: a new version sealed from a base, its tree stored before its record.
- `ingest`: staging the cases of a commit (and of a large file, with two processes).
- `reads`: reads of an exact version: pages, cases, diffs, proofs, provenance.
- `runs`: recorded runs: validated import, lookup by run id.
- `reviews`: human judgments of runs.
- `agreement`: how much reviewers agree on a metric (kappa, alpha, the disagreeing runs).
- `settings`: the content policy (default and per dataset), the eligibility rule, the declared
  metrics.
- `proposals`: staged proposals as stored: read by token, the version a token sealed, deleted.
- `promotion`: promotion and removal: a staged proposal, its preview and confirm token, a seal.
- `citations`: the citation logs (score batches, experiments) that cite a dataset's versions.
- `pins`: a pin of an exact version, resolved and verified against the repository.
- `experiments`: named runs of evaluations over an exact version.
- `scores`: scores that cite an exact version: values, batches, withdrawal.
- `comparison`: two experiments compared by their scores.
- `deletion`: deleting a version or a dataset that nothing cites.
- `cassettes`: the cassette log: the cassette in force for each (case, executor) of a dataset.
- `retirement`: retiring a version, with a cause and a time.
- `renewal`: the successor of a version an erasure retired: the cases the erasure left.
- `erased`: the keyed digests of the persons an erasure deleted.
- `erasure`: deleting a person's bytes everywhere and retiring what held them.
- `gc`: garbage collection of what nothing reaches.
- `fsck`: reading every byte and reporting each problem.
- `mirror`: copying a repository between locations, verifying every digest.
- `timeline`: what happened to a repository, and the state of work.
"""
