"""fsck: read every byte of a repository and report each problem with the key or digest involved."""

from __future__ import annotations

from collections import Counter
from typing import Callable, NamedTuple

from . import pack as packfmt
from .digest import digest_of, from_bytes, is_digest, to_bytes
from .errors import CasError
from .objects import (KIND_BY_CODE, DatasetRecord, RepoConfig, TreeLeaf,
                      VersionRecord, decode_object, parse_record_file,
                      parse_record_file_of)
from .refs import DATASETS
from .store import PACKS, pack_key, person_index_key, person_shard
from .tree import LEAF_MAX

Progress = Callable[[str, int, int], None]
GC_HINT = ("`cas gc` reclaims them once the pack is older than the grace period "
           "(default 24h)")


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
    unreferenced: int = 0        # objects in indexed packs that nothing reaches (gc's garbage)
    unreferenced_bytes: int = 0

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
    _check_leases(backend, keys, known, problems)
    indexed: dict[str, dict[bytes, tuple[int, int, int]]] = {}  # pack id -> rows of its index
    in_pack: dict[str, dict[str, int]] = {}  # pack id -> digest -> length, objects verified
    provenances: dict[str, object] = {}  # decoded, to check the reviews they name
    # (shard, pack id) -> {(keyed person, digest)} of every case and run naming a person: what
    # the person index of that pack must list (docs/format.md 4.8.2)
    persons_wanted: dict[tuple[str, str], set[tuple[str, str]]] = {}

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
            held = (f"its {_objects(len(spans))} ({sum(n for n, _ in spans.values())} bytes)"
                    if spans is not None else "its objects")
            problems.append(Problem("notice", pkey, "pack has no index (an interrupted write "
                                    f"or pack deletion), so nothing reads {held}; `cas gc` "
                                    "deletes it once it is older than the grace period "
                                    "(default 24h)"))
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
            in_pack.setdefault(pid, {})[digest] = e.length
            if kind.startswith("tree."):
                trees[digest] = obj
            elif kind == "provenance":
                provenances[digest] = obj
            elif kind in ("case", "run") and obj.person is not None:
                keyed = repo.store.person_digest(obj.person)
                persons_wanted.setdefault((person_shard(keyed), pid), set()).add(
                    (keyed, digest))
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
    erasures = {"reviews": set(), "runs": set()}  # what erasures deleted besides cases
    person_records: dict[str, object] = {}  # person index key -> record (None: unreadable)
    retired, erased = _check_erasures(backend, keys, known, problems, indexed, erasures,
                                      person_records)
    # A provenance object may be indexed under the people of the cases it describes.
    case_person = {d: keyed for want in persons_wanted.values() for keyed, d in want}
    described = {d: {case_person[e.case_id] for e in obj.entries if e.case_id in case_person}
                 for d, obj in provenances.items()}
    _check_person_index(persons_wanted, person_records, in_pack, error, described)
    sealed: dict[tuple[str, str], int] = {}  # (dataset, proposal token) -> version it sealed
    cited: dict[str, tuple[str, str]] = {}  # provenance -> (severity, first record naming it)
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
                if record.proposal is not None:
                    sealed.setdefault((name, record.proposal), number)
                if record.provenance is not None and not was_retired:
                    # (a retired version may have lost reviews to an erasure whose record a
                    # mirror in progress has not copied yet; its provenance cannot be read)
                    cited.setdefault(record.provenance, ("error", key))
        if not groups["meta"]:
            error(f"{DATASETS}{name}/", "dataset has versions but no metadata record")

    seen: dict[str, list] = {"reviews": [], "proposals": []}
    _check_lifecycle(backend, keys, objects, trees, tree_ok, reachable, known, error, seen,
                     cited)
    _check_references(set(keys), seen, sealed, cited, provenances, objects, erased, erasures,
                      problems)
    _check_citations(backend, keys, trees, known, problems)
    for key in keys:
        if key not in known:
            error(key, "unexpected key in the repository")
    # One notice per pack, not per object: an interrupted import of 200,000 runs is one line.
    orphans = orphan_bytes = 0
    for pid in sorted(in_pack):
        unreferenced = {d: n for d, n in in_pack[pid].items() if d not in reachable}
        if not unreferenced:
            continue
        kinds = Counter(objects[d] for d in unreferenced)
        size = sum(unreferenced.values())
        orphans += len(unreferenced)
        orphan_bytes += size
        problems.append(Problem("notice", pack_key(pid), (
            f"{_objects(len(unreferenced), 'unreferenced ')} ({size} bytes: "
            + ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items()))
            + f"); {GC_HINT}")))
    return Report(problems, len(objects), len(pack_keys), n_versions,
                  len(set(by_dataset) - gone), orphans, orphan_bytes)


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


def _check_erasures(backend, keys, known, problems, indexed, erasures=None,
                    person_records=None) -> tuple[set, set]:
    """Retirements, erasure records and journals, and the person index. Returns the retired
    versions and the ids of every erased case; fills `erasures` ("reviews", "runs": what the
    erasures deleted) and `person_records` (key -> person index record, None if unreadable)."""
    from .erasure import LOG, PENDING
    from .objects import Erasure, ErasurePlan, PersonIndex, VersionRetirement
    from .retirement import CAUSES
    from .store import PERSONS, SHARDS, person_shard

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
                # A mirror copies a retirement before the version it retires: one numbered
                # above every version and version tombstone here is a copy in progress.
                from bisect import bisect_left
                top = 0
                for group in ("versions", "deleted"):
                    prefix = f"{DATASETS}{parts[1]}/{group}/"
                    i = bisect_left(keys, prefix + "~")  # keys are sorted; '~' after any key
                    last = keys[i - 1][len(prefix):] if i and keys[i - 1].startswith(prefix) \
                        else ""
                    top = max(top, int(last) if last.isdigit() else 0)
                if number > top:
                    problems.append(Problem("notice", key, f"retires version {number}, which "
                                            "is not here yet (a mirror in progress copies "
                                            "retirements first; mirroring again copies it)"))
                else:
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
            if erasures is not None:
                erasures["reviews"].update(record.reviews)
                erasures["runs"].update(record.runs)
            if pending:
                problems.append(Problem("notice", key, "an erasure in progress (the next cas "
                                                       "command that opens the repository "
                                                       "finishes it)"))
        elif key.startswith(SHARDS):
            known.add(key)
            _check_person_shards(backend, key, keyset, problems)
        elif key.startswith(PERSONS):
            known.add(key)
            record = _read(backend, key, PersonIndex, error)
            if person_records is not None:
                person_records[key] = record
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


def _check_lifecycle(backend, keys, objects, trees, tree_ok, reachable, known, error,
                     seen=None, cited=None) -> None:
    """Run imports, review batches, settings, proposals and idempotency keys. Collects into
    `seen` the reviews ("reviews": (key, review)) and proposals ("proposals": (key, proposal))
    read, and into `cited` the provenance objects proposals name (for _check_references)."""
    from .objects import IdempotencyRecord, Proposal, ReviewBatch, RunImport, Settings
    from .proposals import idempotency_key
    seen = {"reviews": [], "proposals": []} if seen is None else seen
    cited = {} if cited is None else cited
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
            if type_ is ReviewBatch:
                seen["reviews"].extend((key, r) for r in record.reviews)
            if type_ is RunImport:
                for entry in record.runs:
                    if objects.get(entry.run) != "run":
                        error(key, f"run {entry.run_id!r} ({entry.run}) is missing")
                    else:
                        reachable.add(entry.run)
        if numbers != list(range(1, len(numbers) + 1)):
            missing = sorted(set(range(1, numbers[-1] + 1)) - set(numbers))
            error(prefix, f"numbers are not contiguous from 1; missing {missing}")
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
        seen["proposals"].append((key, proposal))
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
                cited.setdefault(proposal.provenance, ("notice", key))
        if _check_node(proposal.proposed_root, "", objects, tree_ok, reachable, error,
                       trees.__getitem__) != proposal.proposed_count:
            error(key, "the proposed tree does not hold proposed_count cases")


def _objects(n: int, what: str = "") -> str:
    return f"{n} {what}object{'' if n == 1 else 's'}"


def _check_person_index(wanted, records, in_pack, error, described=None) -> None:
    """Every case and run naming a person is listed, under its keyed person, by the person index
    of its pack in that person's shard: an erasure finds a person's data only through these
    records, so a lost one leaves the person's bytes behind after their erasure."""
    for (shard, pid), want in sorted(wanted.items()):
        key = person_index_key(shard, pid)
        example = min(want)[1]
        if key not in records:
            error(key, f"missing: pack {pid} holds {len(want)} objects of people in shard "
                       f"{shard} (e.g. {example}) that an erasure finds only through it")
            continue
        record = records[key]
        if record is None:
            error(key, f"unreadable: pack {pid} holds {len(want)} objects of people in shard "
                       f"{shard} (e.g. {example}) that an erasure finds only through it")
            continue
        absent = sorted(want - {(e.person, e.digest) for e in record.entries})
        if absent:
            error(key, f"does not list {absent[0][1]} of pack {pid} under its person "
                       f"{absent[0][0]} (shard {shard}; {len(absent)} of {len(want)} "
                       "entries missing): an erasure of that person would miss it")
    # The reverse: an entry for an object of the pack under a person it does not name.
    for key, record in sorted(records.items()):
        parts = key.split("/")
        if record is None or len(parts) != 3 or record.pack not in in_pack:
            continue
        held = in_pack[record.pack]
        want = wanted.get((parts[1], record.pack), set())
        described = described or {}
        wrong = [e for e in record.entries if e.digest in held and (e.person, e.digest) not in want
                 and e.person not in described.get(e.digest, ())]
        if wrong:
            error(key, f"lists {wrong[0].digest} under {wrong[0].person}, a person that object "
                       "does not name")


def _check_references(keyset, seen, sealed, cited, provenances, objects, erased, erasures,
                      problems) -> None:
    """What logs say of each other, where a deletion leaves no gap in any numbering: reviews
    name stored runs, provenance names saved reviews, a sealed proposal keeps its idempotency
    claim. What erasures deleted (their records list it) is allowed to be gone."""
    from .proposals import idempotency_key
    for key, review in seen["reviews"]:
        if objects.get(review.run) != "run" and review.run not in erasures["runs"]:
            problems.append(Problem("error", key, f"review {review.annotation_id} is of run "
                                    f"{review.run_id!r} ({review.run}), which is missing"))
    saved = {review.annotation_id for _, review in seen["reviews"]}
    for digest, (severity, where) in sorted(cited.items()):
        prov = provenances.get(digest)
        if prov is None:
            continue  # a missing provenance is reported where it is named
        lost = [e for e in prov.entries if e.annotation_id not in saved
                and e.annotation_id not in erasures["reviews"] and e.case_id not in erased]
        if lost:
            more = f" (and {len(lost) - 1} more)" if len(lost) > 1 else ""
            # Only an active version's is damage for sure: a staged proposal may be one an
            # erasure is about to delete (a mirror deletes it last); sealing it would tell.
            problems.append(Problem(severity, where, (
                f"provenance {digest} names review {lost[0].annotation_id} of run "
                f"{lost[0].run_id!r}{more}, which no review batch holds")))
    for key, proposal in seen["proposals"]:
        name, token = key.split("/")[1], key.rsplit("/", 1)[1]
        ikey = idempotency_key(name, proposal.idempotency_key)
        if ikey in keyset:
            continue  # a claim naming another token: this proposal lost a race, harmless
        number = sealed.get((name, token))
        if number is not None:
            # Its token was handed out only after the claim was stored, and nothing deletes the
            # claim of a sealed proposal: the claim was lost, and the key can now stage another
            # request. A notice, not an error, only because a mirror copies versions before
            # proposals and claims: one in progress looks the same.
            problems.append(Problem("notice", key, f"sealed as version {number}, but the "
                                    f"idempotency claim of its key ({ikey}) is missing: it "
                                    "was deleted (the key can now stage another request), "
                                    "or a mirror into this repository has not copied it yet"))
        else:
            problems.append(Problem("notice", key, f"staged proposal without the idempotency "
                                    f"claim of its key ({ikey}): staging or a gc was "
                                    "interrupted (or the claim was deleted); the same key "
                                    "stages anew"))


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


def _check_leases(backend, keys, known, problems) -> None:
    """Leases (cas/leases.py) are short-lived: each must parse and match its key; one left by a
    holder that died is harmless once it expires (the next gc or erasure stops waiting)."""
    from .leases import LEASES, parse_lease_key
    from .objects import Lease
    for key in keys:
        if not key.startswith(LEASES):
            continue
        known.add(key)
        parsed = parse_lease_key(key)
        if parsed is None:
            problems.append(Problem("error", key, f"unexpected key under {LEASES}"))
            continue
        try:
            record = parse_record_file(backend.get(key), Lease, key)
        except CasError as exc:
            problems.append(Problem("error", key, exc.message))
            continue
        if (record.role, record.id) != parsed:
            problems.append(Problem("error", key, "lease does not match its key"))


def _check_person_shards(backend, key, keyset, problems) -> None:
    """A pack's person-shards record: its name and content agree, and every person index file
    it promises exists while the pack is published (an erasure trusts exactly these)."""
    from .objects import PersonShards
    from .store import parse_person_shards_key, person_index_key

    def error(message: str) -> None:
        problems.append(Problem("error", key, message))
    parsed = parse_person_shards_key(key)
    record = _read(backend, key, PersonShards, lambda where, message: error(message))
    if record is None:
        return
    if parsed is None or parsed != (record.pack, set(record.shards)):
        error("person-shards record does not match its key")
        return
    if f"{PACKS}{record.pack}.idx" not in keyset:
        problems.append(Problem("notice", key, "person-shards record of a pack that is gone "
                                               "(left by an interrupted gc or erasure; gc "
                                               "removes it)"))
        return
    for shard in record.shards:
        if person_index_key(shard, record.pack) not in keyset:
            error(f"pack {record.pack} has no person index file for shard {shard} "
                  f"({person_index_key(shard, record.pack)} is missing): an erasure scans the "
                  "pack instead, but the index is damaged")
