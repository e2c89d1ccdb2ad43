"""L2, storage: bytes in a flat key space, typed objects over them, the tree and the refs log.

- `backends/`: the flat key space (local directory, memory, S3, a local cache of a remote).
- `pack`: pack files, their sorted indexes with a fan-out table, multi-pack indexes.
- `store`: the object store: typed objects by digest, written in packs, verified on read.
- `maintenance`: merging small packs and pack indexes; rewriting and deleting packs (gc, erasure).
- `person_index`: which objects of each pack name which person (a person table per pack).
- `log_index`: keyed indexes over the run-import and review logs.
- `tree`: the Merkle tree over case ids (pure: takes a loader, does no I/O).
- `refs`: the append-only refs log: version records and metadata revisions per dataset.
- `leases`: who is writing, collecting garbage or erasing right now.
- `claims`: bounded create-if-absent claim loops with backoff.
"""
