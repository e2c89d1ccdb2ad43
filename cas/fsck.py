"""fsck: read every byte of a repository and report each problem with the key or digest involved."""

from __future__ import annotations

from typing import Callable, NamedTuple

from . import pack as packfmt
from .digest import digest_of, from_bytes, is_digest, to_bytes
from .errors import CasError
from .objects import (KIND_BY_CODE, DatasetRecord, RepoConfig, TreeLeaf,
                      VersionRecord, decode_object, parse_record_file,
                      parse_record_file_of)
from .refs import DATASETS
from .store import PACKS
from .tree import LEAF_MAX

Progress = Callable[[str, int, int], None]


class Problem(NamedTuple):
    severity: str   # "error": the repository is damaged; "notice": harmless leftovers
    where: str      # the key or digest involved
    message: str


class Report(NamedTuple):
    problems: list[Problem]
    objects: int
    packs: int
    versions: int
    datasets: int

    @property
    def ok(self) -> bool:
        return not any(p.severity == "error" for p in self.problems)


def check(repo, progress: Progress | None = None) -> Report:
    backend = repo.backend
    problems: list[Problem] = []

    def error(where: str, message: str) -> None:
        problems.append(Problem("error", where, message))

    keys = list(backend.list(""))
    objects: dict[str, str] = {}  # digest -> kind, bytes verified
    # Tree nodes as decoded from the verified pack bytes: the tree walk below reads these, not
    # the object store, so a damaged index is reported once (above) and cannot abort the walk.
    trees: dict[str, object] = {}
    pack_keys = [k for k in keys if k.startswith(PACKS) and k.endswith(".pack")]
    index_keys = {k for k in keys if k.startswith(PACKS) and k.endswith(".idx")}
    multi_keys = sorted(k for k in keys if k.startswith(PACKS) and k.endswith(".midx"))
    known = {"config"} | set(pack_keys) | index_keys | set(multi_keys)
    indexed: dict[str, dict[bytes, tuple[int, int, int]]] = {}  # pack id -> rows of its index

    try:
        parse_record_file(backend.get("config"), RepoConfig, "config")
    except CasError as exc:
        error("config", exc.message)

    # -- packs and indexes ----------------------------------------------------------------
    for n, pkey in enumerate(pack_keys):
        if progress:
            progress("packs", n, len(pack_keys))
        pid = pkey[len(PACKS):-len(".pack")]
        ikey = f"{PACKS}{pid}.idx"
        data = backend.get(pkey)
        try:
            spans = {off: (length, kind) for off, length, kind in packfmt.parse_pack(data, pkey)}
            if packfmt.pack_id(data) != pid:
                error(pkey, f"pack is named {pid} but its trailer is {packfmt.pack_id(data)}")
        except CasError as exc:
            error(pkey, exc.message)
            spans = None
        if ikey not in index_keys:
            problems.append(Problem("notice", pkey, "pack has no index (an interrupted write); "
                                                    "its objects are unreferenced"))
            continue
        try:
            ipid, entries = packfmt.parse_index(backend.get(ikey), ikey)
        except CasError as exc:
            error(ikey, exc.message)
            continue
        if ipid != pid:
            error(ikey, f"index names pack {ipid}, expected {pid}")
        indexed[pid] = {e.digest: (e.offset, e.length, e.kind) for e in entries}
        for e in entries:
            digest = from_bytes(e.digest)
            kind = KIND_BY_CODE.get(e.kind)
            if kind is None:
                error(digest, f"unknown kind code {e.kind} in {ikey}")
                continue
            body = data[e.offset:e.offset + e.length]
            if spans is not None and spans.get(e.offset) != (e.length, e.kind):
                error(digest, f"{ikey} points at offset {e.offset} of {pkey}, which holds no "
                              "such object")
                continue
            got = digest_of(kind, body)
            if got != digest:
                error(digest, f"object bytes in {pkey} hash to {got}")
                continue
            try:
                obj = decode_object(kind, body, f"object {digest}")
            except CasError as exc:
                error(digest, exc.message)
                continue
            objects[digest] = kind
            if kind.startswith("tree."):
                trees[digest] = obj
    for ikey in sorted(index_keys):
        if ikey[:-len(".idx")] + ".pack" not in pack_keys:
            error(ikey, "index has no pack: every object it lists is missing")
    for mkey in multi_keys:
        _check_multi_index(backend, mkey, indexed, error)

    # -- refs: dataset metadata and versions ------------------------------------------------
    reachable: set[str] = set()
    tree_ok: dict[str, int] = {}  # verified node digest -> ids below it
    by_dataset: dict[str, dict[str, list[int]]] = {}
    for key in keys:
        if not key.startswith(DATASETS):
            continue
        parts = key.split("/")
        if len(parts) == 4 and parts[2] in ("proposals", "keys", "retired"):
            continue  # checked with the other lifecycle records below
        if parts[2:] == ["tombstone"] or len(parts) == 4 and parts[2] in CITATION_FAMILIES:
            continue  # checked with pins, scores and deletions below
        if len(parts) != 4 or parts[2] not in ("versions", "meta") or not (
                parts[3].isdigit() and len(parts[3]) == 10):
            error(key, "unexpected key under datasets/")
            continue
        known.add(key)
        by_dataset.setdefault(parts[1], {"versions": [], "meta": []})[parts[2]].append(
            int(parts[3]))
    n_versions = 0
    retired, erased = _check_erasures(backend, keys, known, problems, indexed)
    lenient: dict[str, int] = {}  # verified subtrees of retired versions (erased cases allowed)
    deleted = _deleted_numbers(keys)  # a deleted version's number stays used (its tombstone)
    gone = {k.split("/")[1] for k in keys if k.startswith(DATASETS) and
            k.split("/")[2:] == ["tombstone"]}
    for name in sorted(by_dataset):
        groups = by_dataset[name]
        if name in gone:
            problems.append(Problem("notice", f"{DATASETS}{name}/", "records left by an "
                                    "interrupted deletion of this dataset; run `cas dataset "
                                    "delete` again to finish it"))
            continue
        for group, type_ in (("meta", DatasetRecord), ("versions", VersionRecord)):
            numbers = sorted(groups[group])
            used = sorted(set(numbers) | (deleted.get(name, set()) if group == "versions"
                                          else set()))
            if used != list(range(1, len(used) + 1)):
                missing = sorted(set(range(1, (used[-1] if used else 0) + 1)) - set(used))
                error(f"{DATASETS}{name}/{group}/", f"numbers are not contiguous from 1; "
                                                    f"missing {missing}")
            for number in numbers:
                key = f"{DATASETS}{name}/{group}/{number:010d}"
                record = _read(backend, key, type_, error)
                if record is None:
                    continue
                if group == "meta":
                    if record.name != name or record.revision != number:
                        error(key, f"record says {record.name!r} revision {record.revision}")
                    continue
                n_versions += 1
                if progress:
                    progress("versions", n_versions, 0)
                was_retired = (name, number) in retired
                _check_version(key, name, number, record, objects,
                               lenient if was_retired else tree_ok, reachable, error,
                               trees.__getitem__, deleted.get(name, set()),
                               erased if was_retired else frozenset())
        if not groups["meta"]:
            error(f"{DATASETS}{name}/", "dataset has versions but no metadata record")

    _check_lifecycle(backend, keys, objects, trees, tree_ok, reachable, known, error)
    _check_citations(backend, keys, trees, known, problems)
    for key in keys:
        if key not in known:
            error(key, "unexpected key in the repository")
    for digest in sorted(set(objects) - reachable):
        problems.append(Problem("notice", digest, f"unreferenced {objects[digest]} object"))
    return Report(problems, len(objects), len(pack_keys), n_versions,
                  len(set(by_dataset) - gone))


def _check_version(key, name, number, record, objects, tree_ok, reachable, error, load,
                   deleted=frozenset(), erased=frozenset()) -> None:
    """`erased`: cases an erasure deleted, which a retired version may lack (with the
    provenance naming them)."""
    if record.dataset != name or record.number != number:
        error(key, f"record says {record.dataset!r} version {record.number}")
    # The parent is the version below; numbers of versions deleted before this one was sealed
    # are skipped (a version built on N after N+1 was deleted is N+2 with parent N).
    below = number - 1
    while below >= 1 and below in deleted and below != record.parent:
        below -= 1
    if record.parent != (below or None):
        error(key, f"parent is {record.parent}, expected {below or None}")
    if record.provenance is not None:
        if objects.get(record.provenance) == "provenance":
            reachable.add(record.provenance)
        elif not erased:
            error(key, f"names provenance {record.provenance}, which is missing")
    result = _check_node(record.content_digest, "", objects, tree_ok, reachable, error, load,
                         erased)
    if result is not None and result != record.item_count:
        error(key, f"item_count is {record.item_count} but the tree holds {result}")


def _check_node(digest, prefix, objects, tree_ok, reachable, error, load, erased=frozenset()):
    """Verify a subtree once (memoised by digest): shape rule, order, counts, cases present
    (or, in a retired version, erased)."""
    done = tree_ok.get(digest)
    if done is not None:
        return done
    kind = objects.get(digest)
    if kind is None or not kind.startswith("tree."):
        error(digest, "tree node is missing" if kind is None else f"expected a tree node, "
                                                                  f"found a {kind}")
        return None
    reachable.add(digest)
    node = load(digest)
    if isinstance(node, TreeLeaf):
        ids = node.ids
        bad = [i for i in ids if not is_digest(i) or not i[3:].startswith(prefix)]
        if bad or ids != sorted(set(ids)) or len(ids) > LEAF_MAX:
            error(digest, "leaf breaks the shape rule (ids must be unique, sorted, share the "
                          f"prefix {prefix!r} and number at most {LEAF_MAX})")
            return None
        for case_id in ids:
            kind = objects.get(case_id, "")
            if not kind and case_id in erased:
                continue
            if kind != "case":
                error(case_id, "case is missing" if not kind else f"expected a case, found {kind}")
            else:
                reachable.add(case_id)
        result = len(ids)
    else:
        total = 0
        nibbles = [c.nibble for c in node.children]
        if nibbles != sorted(set(nibbles)) or node.count <= LEAF_MAX:
            error(digest, "inner node breaks the shape rule (children unique and ordered, "
                          f"count above {LEAF_MAX})")
            return None
        for c in node.children:
            sub = _check_node(c.node, prefix + "0123456789abcdef"[c.nibble],
                              objects, tree_ok, reachable, error, load, erased)
            if sub is None:
                return None
            if sub != c.count or sub == 0:
                error(digest, f"child {c.nibble} claims {c.count} ids, its subtree holds {sub}")
                return None
            total += sub
        if total != node.count:
            error(digest, f"node claims {node.count} ids, its children hold {total}")
            return None
        result = total
    tree_ok[digest] = result
    return result


__all__ = ["Problem", "Report", "check"]


def _check_erasures(backend, keys, known, problems, indexed) -> tuple[set, set]:
    """Retirements, erasure records and journals, and the person index. Returns the retired
    versions and the ids of every erased case."""
    from .erasure import LOG, PENDING
    from .objects import Erasure, ErasurePlan, PersonIndex, VersionRetirement
    from .retirement import CAUSES
    from .store import PERSONS, person_shard

    def error(where: str, message: str) -> None:
        problems.append(Problem("error", where, message))

    retired: set[tuple[str, int]] = set()
    erased: set[str] = set()
    keyset = set(keys)
    for key in keys:
        parts = key.split("/")
        if key.startswith(DATASETS) and len(parts) == 4 and parts[2] == "retired":
            known.add(key)
            record = _read(backend, key, VersionRetirement, error)
            if record is None:
                continue
            number = int(parts[3]) if parts[3].isdigit() and len(parts[3]) == 10 else None
            if record.dataset != parts[1] or record.number != number:
                error(key, f"retirement says {record.dataset!r} version {record.number}")
            elif record.cause not in CAUSES:
                error(key, f"unknown retirement cause {record.cause!r}")
            elif f"{DATASETS}{parts[1]}/versions/{parts[3]}" not in keyset and \
                    f"{DATASETS}{parts[1]}/deleted/{parts[3]}" not in keyset:
                error(key, "retires a version that does not exist")
            else:
                retired.add((record.dataset, record.number))
        elif key.startswith(LOG) or key.startswith(PENDING):
            known.add(key)
            pending = key.startswith(PENDING)
            record = _read(backend, key, ErasurePlan if pending else Erasure, error)
            if record is None:
                continue
            if record.id != key.rsplit("/", 1)[1]:
                error(key, f"erasure record has id {record.id!r}")
            erased.update(record.cases)
            if pending:
                problems.append(Problem("notice", key, "an erasure in progress (the next cas "
                                                       "command that opens the repository "
                                                       "finishes it)"))
        elif key.startswith(PERSONS):
            known.add(key)
            record = _read(backend, key, PersonIndex, error)
            if record is None:
                continue
            if len(parts) != 3 or record.pack != parts[2] or any(
                    person_shard(e.person) != parts[1] for e in record.entries):
                error(key, "person index does not match its key")
            elif f"{PACKS}{record.pack}.idx" not in keyset:
                problems.append(Problem("notice", key, "person index of a pack that is gone "
                                                       "(left by an interrupted gc or erasure; "
                                                       "gc removes it)"))
            elif record.pack in indexed:
                absent = [e.digest for e in record.entries
                          if to_bytes(e.digest) not in indexed[record.pack]]
                if absent:
                    error(key, f"lists {absent[0]}, which pack {record.pack} does not hold")
    return retired, erased


def _check_multi_index(backend, mkey, indexed, error) -> None:
    """A multi-pack index must say exactly what the indexes of the packs it covers say."""
    try:
        packs, rows = packfmt.parse_multi_index(backend.get(mkey), mkey)
    except CasError as exc:
        error(mkey, exc.message)
        return
    name = mkey[len(PACKS):-len(".midx")]
    if name != backend.get(mkey)[-packfmt.DIGEST_LEN:].hex():
        error(mkey, "multi-pack index is not named by its checksum")
    want: dict[bytes, tuple[str, tuple[int, int, int]]] = {}
    for pid in packs:
        if pid not in indexed:
            error(mkey, f"covers pack {pid}, which is missing or has no valid index")
            return
        for digest, row in indexed[pid].items():
            want.setdefault(digest, (pid, row))
    got = {e.digest: (packs[i], (e.offset, e.length, e.kind)) for e, i in rows}
    if got.keys() != want.keys():
        error(mkey, f"lists {len(got)} objects, its packs hold {len(want)}")
        return
    for digest, (pid, row) in got.items():
        if indexed[pid].get(digest) != row:
            error(mkey, f"row of {from_bytes(digest)} disagrees with the index of pack {pid}")
            return


def _check_lifecycle(backend, keys, objects, trees, tree_ok, reachable, known, error) -> None:
    """Run imports, review batches, settings, proposals and idempotency keys."""
    from .objects import IdempotencyRecord, Proposal, ReviewBatch, RunImport, Settings
    from .proposals import idempotency_key
    logs = (("runs/imports/", RunImport), ("reviews/", ReviewBatch), ("settings/", Settings))
    for prefix, type_ in logs:
        mine = sorted(k for k in keys if k.startswith(prefix))
        numbers = []
        for key in mine:
            tail = key[len(prefix):]
            if not (tail.isdigit() and len(tail) == 10):
                error(key, f"unexpected key under {prefix}")
                continue
            known.add(key)
            numbers.append(int(tail))
            record = _read(backend, key, type_, error)
            if record is None:
                continue
            if getattr(record, "number", getattr(record, "revision", None)) != int(tail):
                error(key, "record number does not match its key")
            if type_ is RunImport:
                for entry in record.runs:
                    if objects.get(entry.run) != "run":
                        error(key, f"run {entry.run_id!r} ({entry.run}) is missing")
                    else:
                        reachable.add(entry.run)
        if numbers != list(range(1, len(numbers) + 1)):
            error(prefix, "numbers are not contiguous from 1")
    for key in keys:
        parts = key.split("/")
        if not (key.startswith(DATASETS) and len(parts) == 4 and
                parts[2] in ("proposals", "keys")):
            continue
        known.add(key)
        try:
            if parts[2] == "keys":
                claim = parse_record_file(backend.get(key), IdempotencyRecord, key)
                if idempotency_key(parts[1], claim.key) != key or claim.dataset != parts[1]:
                    error(key, "idempotency record does not match its key")
                elif f"{DATASETS}{parts[1]}/proposals/{claim.token}" not in keys:
                    error(key, f"names proposal {claim.token}, which is missing")
                continue
            proposal = parse_record_file(backend.get(key), Proposal, key)
        except CasError as exc:
            error(key, exc.message)
            continue
        if proposal.dataset != parts[1]:
            error(key, f"proposal is for dataset {proposal.dataset!r}")
        for digest in proposal.add:
            if objects.get(digest) != "case":
                error(key, f"proposed case {digest} is missing")
            else:
                reachable.add(digest)
        if proposal.provenance is not None:
            if objects.get(proposal.provenance) != "provenance":
                error(key, f"provenance {proposal.provenance} is missing")
            else:
                reachable.add(proposal.provenance)
        if _check_node(proposal.proposed_root, "", objects, tree_ok, reachable, error,
                       trees.__getitem__) != proposal.proposed_count:
            error(key, "the proposed tree does not hold proposed_count cases")


# -- pins, scores, experiments and deletion (cas/scores.py) -----------------------------------
CITATION_FAMILIES = ("deleted", "scores", "experiments")


def _deleted_numbers(keys) -> dict[str, set[int]]:
    out: dict[str, set[int]] = {}
    for key in keys:
        parts = key.split("/")
        if (key.startswith(DATASETS) and len(parts) == 4 and parts[2] == "deleted"
                and parts[3].isdigit() and len(parts[3]) == 10):
            out.setdefault(parts[1], set()).add(int(parts[3]))
    return out


def _check_citations(backend, keys, trees, known, problems) -> None:
    """Tombstones, experiments and score batches: each record verified, the logs contiguous,
    every citation naming a live version with its content_digest (and a case and an experiment
    of it); a deleted dataset keeps only its tombstone and fences."""
    from .objects import DatasetTombstone, Experiment, Fence, ScoreBatch, VersionTombstone
    from .refs import version_key
    from .tree import Trie

    def error(where: str, message: str) -> None:
        problems.append(Problem("error", where, message))

    families: dict[str, dict[str, list[int]]] = {}
    for key in keys:
        parts = key.split("/")
        if not key.startswith(DATASETS):
            continue
        if parts[2:] == ["tombstone"]:
            known.add(key)
            families.setdefault(parts[1], {})
            continue
        if len(parts) != 4 or parts[2] not in CITATION_FAMILIES:
            continue
        known.add(key)  # reported once, here
        if not (parts[3].isdigit() and len(parts[3]) == 10):
            error(key, "unexpected key under datasets/")
            continue
        families.setdefault(parts[1], {}).setdefault(parts[2], []).append(int(parts[3]))

    versions: dict[tuple[str, int], object] = {}

    def live_version(name: str, number: int):
        """The version record cited, or None (missing, deleted or damaged: reported)."""
        if (name, number) not in versions:
            record = None
            key = version_key(name, number)
            if number not in families.get(name, {}).get("deleted", ()) and key in keyset:
                try:
                    record = parse_record_file(backend.get(key), VersionRecord, key)
                except CasError:
                    pass  # reported with the versions
            versions[(name, number)] = record
        return versions[(name, number)]

    keyset = set(keys)
    trie = Trie(trees.__getitem__)
    for name in sorted(families):
        fam = families[name]
        prefix = f"{DATASETS}{name}/"
        dataset_gone = f"{prefix}tombstone" in keyset
        if dataset_gone:
            key = f"{prefix}tombstone"
            try:
                tomb = parse_record_file(backend.get(key), DatasetTombstone, key)
                if tomb.dataset != name:
                    error(key, f"tombstone is for dataset {tomb.dataset!r}")
            except CasError as exc:
                error(key, exc.message)
        for number in sorted(fam.get("deleted", [])):
            key = f"{prefix}deleted/{number:010d}"
            tomb = _read(backend, key, VersionTombstone, error)
            if tomb is None:
                continue
            if tomb.dataset != name or tomb.number != number:
                error(key, f"tombstone says {tomb.dataset!r} version {tomb.number}")
            if version_key(name, number) in keyset and not dataset_gone:
                problems.append(Problem("notice", key, f"version {number} is being deleted or "
                                        "its deletion was interrupted (the version file is "
                                        "still there); run `cas version delete` again"))
        experiments: dict[str, object] = {}
        for log, type_ in (("experiments", Experiment), ("scores", ScoreBatch)):
            numbers = sorted(fam.get(log, []))
            if numbers != list(range(1, len(numbers) + 1)):
                missing = sorted(set(range(1, numbers[-1] + 1)) - set(numbers))
                error(f"{prefix}{log}/", f"numbers are not contiguous from 1; missing {missing}")
            for number in numbers:
                key = f"{prefix}{log}/{number:010d}"
                entry = _read(backend, key, (type_, Fence), error)
                if entry is None:
                    continue
                if entry.dataset != name or entry.number != number:
                    error(key, f"record says {entry.dataset!r} number {entry.number}")
                if isinstance(entry, Fence):
                    if entry.log != log:
                        error(key, f"fence of the {entry.log!r} log")
                    continue
                if dataset_gone:
                    error(key, "a citation in a deleted dataset")
                    continue
                cites = ([(f"{key}#{i}", s) for i, s in enumerate(entry.scores)]
                         if log == "scores" else [(key, entry)])
                if log == "experiments":
                    if entry.name in experiments:
                        error(key, f"experiment name {entry.name!r} is used twice")
                    experiments.setdefault(entry.name, entry)
                for where, c in cites:
                    _check_citation(where, name, c, live_version(name, c.version), trie,
                                    experiments, error)


def _check_citation(where, name, c, version, trie, experiments, error) -> None:
    if getattr(c, "dataset", name) != name:
        error(where, f"cites dataset {c.dataset!r} from the log of {name!r}")
        return
    if version is None:
        error(where, f"cites {name}@{c.version}, which is missing or deleted")
        return
    if c.content_digest != version.content_digest:
        error(where, f"cites {name}@{c.version} with content_digest {c.content_digest}, but "
                     f"that version has {version.content_digest}")
    item = getattr(c, "item", None)
    if item is not None:
        try:
            held = trie.contains(version.content_digest, item)
        except (KeyError, CasError):
            held = True  # the version's tree is damaged: reported with the versions
        if not held:
            error(where, f"cites case {item}, which {name}@{c.version} does not hold")
    exp = getattr(c, "experiment", None)
    if exp is not None:
        known = experiments.get(exp)
        if known is None:
            error(where, f"names experiment {exp!r}, which dataset {name!r} does not have")
        elif known.version != c.version:
            error(where, f"names experiment {exp!r} of {name}@{known.version}, but cites "
                         f"{name}@{c.version}")


def _read(backend, key: str, types, error):
    """The record at `key` (of the type, or one of the tuple of types), or None once the reason
    it is not one has been reported."""
    try:
        data = backend.get(key)
        if isinstance(types, tuple):
            return parse_record_file_of(data, types, key)
        return parse_record_file(data, types, key)
    except CasError as exc:
        error(key, exc.message)
        return None
