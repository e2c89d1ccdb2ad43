"""fsck: read every byte of a repository and report each problem with the key or digest involved.

A read the storage could not answer (UNAVAILABLE: an outage; PERMISSION_DENIED: a refusal) is
no problem of the repository and no pass either: fsck stops with that error, naming the key,
rather than report damage because the network blinked, or "ok" over bytes it never read.
"""

from __future__ import annotations

import datetime
import re
from bisect import bisect_left
from collections import Counter
from typing import Any, NamedTuple

import msgspec

from cas.digest import digest_of, from_bytes, is_digest, to_bytes
from cas.errors import STORAGE_FAILURES, CasError
from cas.format import encoding
from cas.format import keys as K
from cas.format.projection import CONTENT_CLASSES
from cas.format.records import (ADMISSION_RULES, COMMENT_LIMIT, ELIGIBILITY_RULES, KIND_BY_CODE,
                                CassetteLog, DatasetRecord, DatasetTombstone, Eligibility, Erasure,
                                ErasurePlan, Experiment, Fence, IdempotencyRecord, Lease, Metrics,
                                PersonIndex, PersonShards, Proposal, RepoConfig, ReviewBatch,
                                RunAdmission, RunImport, ScoreBatch, ScoreWithdrawal, Settings,
                                TreeLeaf, VersionRecord, VersionRetirement, VersionTombstone,
                                decode_object, exchange_key, parse_record_file,
                                parse_record_file_of)
from cas.repo import checks
from cas.repo.checks import Progress
from cas.repo.retirement import CAUSES
from cas.repo.scores import MAX_REASON
from cas.storage import leases, log_index
from cas.storage import pack as packfmt
from cas.storage import person_index
from cas.storage.tree import LEAF_MAX, Trie

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
    # Erasures left pending (a killed `cas erase`, or one waiting for writers): what each plan
    # names may be gone already, which is their documented state, not damage.
    pending_erasures: tuple[dict, ...] = ()

    @property
    def ok(self) -> bool:
        return not any(p.severity == "error" for p in self.problems)


class _State:
    """What the checkers share: the storage, the key listing told apart by family, what was
    verified so far (objects, trees, records), and the problems found."""

    def __init__(self, ctx, progress: Progress | None) -> None:
        self.backend = ctx.backend
        self.store = ctx.store
        self.progress = progress
        self.keys = list(self.backend.list(""))
        self.keyset = set(self.keys)
        self.family: dict[str, str | None] = {}  # key -> family name (None: unexpected)
        self.by_family: dict[str, list[str]] = {f.name: [] for f in K.FAMILIES}
        for key in self.keys:
            found = K.claimed_by(key)
            self.family[key] = found.name if found else None
            if found:
                self.by_family[found.name].append(key)
        self.problems: list[Problem] = []
        self.objects: dict[str, str] = {}  # digest -> kind, bytes verified
        # Tree nodes as decoded from the verified pack bytes: the tree walk reads these, not the
        # object store, so a damaged index is reported once and cannot abort the walk.
        self.trees: dict[str, object] = {}
        self.indexed: dict[str, dict[bytes, tuple[int, int, int]]] = {}  # pack id -> its rows
        self.in_pack: dict[str, dict[str, int]] = {}  # pack id -> digest -> length, verified
        self.provenances: dict[str, object] = {}  # decoded, to check the reviews they name
        self.answered: dict[str, set[str]] = {}  # suite result -> the case ids it answers
        self.cassettes: dict[str, tuple[str, str, str]] = {}  # digest -> (dataset, case, executor)
        # (shard, pack id) -> {(keyed person, digest)} of every case and run naming a person:
        # what the person index of that pack must list (docs/format.md 4.8.2)
        self.persons_wanted: dict[tuple[str, str], set[tuple[str, str]]] = {}
        # (shard, pack id) -> (key, {(keyed person, digest)} it lists, or None if unreadable):
        # the rows of every person table and person index record
        self.person_rows: dict[tuple[str, str], tuple[str, set[tuple[str, str]] | None]] = {}
        self.person_files: dict[str, str] = {}  # pack id -> a key of its person index files
        self.reachable: set[str] = set()
        self.tree_ok: dict[str, int] = {}  # verified node digest -> ids below it
        self.lenient: dict[str, int] = {}  # the same for retired versions (erased cases allowed)
        self.retired: set[tuple[str, int]] = set()
        self.erased: set[str] = set()  # ids of every erased case
        self.erasures = {"reviews": set(), "runs": set()}  # what erasures deleted besides cases
        # What pending erasure plans name (cases, runs) and the plans (for the report): reads
        # refuse it and the next writer deletes it, so its absence anywhere is expected.
        self.pending: dict[str, set[str]] = {"cases": set(), "runs": set()}
        self.pending_plans: list[dict] = []
        self.sealed: dict[tuple[str, str], int] = {}  # (dataset, proposal token) -> version
        self.cited: dict[str, tuple[str, str]] = {}  # provenance -> (severity, first naming)
        self.seen: dict[str, list] = {"reviews": [], "proposals": []}
        # (log, record number) -> the (row key, number) pairs its log index must hold
        self.log_rows: dict[tuple[str, int], set[tuple[bytes, int]]] = {}
        self.n_versions = 0
        # Whose data objects are (digest of a case, run or cassette naming a person -> its
        # keyed person), the keyed persons of completed erasures, and the runs of those
        # persons that imports name ((key, number, entry, keyed)), checked against the
        # admissions (number -> keyed persons they admit): docs/format.md 4.7.2.1, 4.10
        self.people: dict[str, str] = {}
        self.erased_persons: set[str] = set()
        self.readmitted: list[tuple[str, int, object, str]] = []
        self.admitted: dict[int, set[str]] = {}
        self.ever_named: set[str] | None = None  # datasets with a revision or a tombstone

    def of(self, *families: str) -> list[str]:
        """The keys the checkers of `families` take, in key order."""
        wanted = set(families)
        return [k for k in self.keys if self.family[k] in wanted]

    def error(self, where: str, message: str) -> None:
        self.problems.append(Problem("error", where, message))

    def notice(self, where: str, message: str) -> None:
        self.problems.append(Problem("notice", where, message))

    def read(self, key: str, types):
        """The record at `key` (of the type, or one of the tuple of types), or None once the
        reason it is not one has been reported."""
        return self.read_file(key, types)[1]

    def read_file(self, key: str, types) -> tuple[bytes | None, object]:
        """(file bytes, record) of `read`; (None, None) once reported."""
        if isinstance(types, tuple):
            return self.parsed(key, lambda data, k: parse_record_file_of(data, types, k))
        return self.parsed(key, lambda data, k: parse_record_file(data, types, k))

    def parsed(self, key: str, parse) -> tuple[bytes | None, Any]:
        """(file bytes, `parse(bytes, key)`) of the file at `key`; (None, None) once the reason
        it cannot be parsed has been reported."""
        try:
            data = self.backend.get(key)
            return data, parse(data, key)
        except STORAGE_FAILURES:
            raise  # a read that was not made: no verdict (module docstring)
        except CasError as exc:
            self.error(key, exc.message)
            return None, None


def check(ctx, progress: Progress | None = None) -> Report:
    """Read every byte of the repository; `progress(stage, done, total)` hears how far."""
    checks.progress(progress)
    st = _State(ctx, progress)
    _check_leases(st)
    st.read(K.CONFIG, RepoConfig)
    _check_packs(st)
    by_dataset = _dataset_refs(st)
    _check_erasures(st)
    _check_person_index(st)
    gone = {K.parse_tombstone_key(k)[0] for k in st.by_family["dataset.tombstone"]}
    for name in sorted(by_dataset):
        _check_dataset(st, name, by_dataset[name], gone)
    _check_logs(st)
    _check_log_indexes(st)
    _check_admissions(st)
    _check_readmissions(st)
    _check_withdrawals(st)
    _check_cassette_logs(st)
    _check_cassette_persons(st)
    _check_proposals(st)
    _check_references(st)
    _check_citations(st)
    for key in st.keys:
        if st.family[key] is None:
            st.error(key, "unexpected key in the repository")
    orphans, orphan_bytes = _unreferenced(st)
    return Report(st.problems, len(st.objects), len(st.by_family["pack"]), st.n_versions,
                  len(set(by_dataset) - gone), orphans, orphan_bytes,
                  pending_erasures=tuple(st.pending_plans))


__all__ = ["Problem", "Report", "check"]


# -- packs and indexes --------------------------------------------------------------------------
def _check_packs(st: _State) -> None:
    pack_keys = st.by_family["pack"]
    index_keys = set(st.by_family["pack.index"])
    for n, pkey in enumerate(pack_keys):
        if st.progress:
            st.progress("packs", n, len(pack_keys))
        pid = pkey[len(K.PACKS):-len(".pack")]
        ikey = K.index_key(pid)
        data = st.backend.get(pkey)
        try:
            spans = {off: (length, kind) for off, length, kind in packfmt.parse_pack(data, pkey)}
            if packfmt.pack_id(data) != pid:
                st.error(pkey, f"pack is named {pid} but its trailer is {packfmt.pack_id(data)}")
        except CasError as exc:
            st.error(pkey, exc.message)
            spans = None
        if ikey not in index_keys:
            held = (f"its {_objects(len(spans))} ({sum(n for n, _ in spans.values())} bytes)"
                    if spans is not None else "its objects")
            st.notice(pkey, "pack has no index (an interrupted write or pack deletion), so "
                            f"nothing reads {held}; `cas gc` deletes it once it is older than "
                            "the grace period (default 24h)")
            continue
        index = st.parsed(ikey, packfmt.parse_index)[1]
        if index is None:
            continue
        ipid, entries = index
        if ipid != pid:
            st.error(ikey, f"index names pack {ipid}, expected {pid}")
        st.indexed[pid] = {e.digest: (e.offset, e.length, e.kind) for e in entries}
        for e in entries:
            _check_object(st, pid, pkey, ikey, data, spans, e)
    for ikey in sorted(index_keys):
        if ikey[:-len(".idx")] + ".pack" not in st.keyset:
            st.error(ikey, "index has no pack: every object it lists is missing")
    for mkey in sorted(st.by_family["multi.index"]):
        _check_multi_index(st, mkey)


def _check_object(st: _State, pid, pkey, ikey, data, spans, e) -> None:
    """One row of a pack index: the object it points at, its digest, and what it names."""
    digest = from_bytes(e.digest)
    kind = KIND_BY_CODE.get(e.kind)
    if kind is None:
        st.error(digest, f"unknown kind code {e.kind} in {ikey}")
        return
    body = data[e.offset:e.offset + e.length]
    if spans is not None and spans.get(e.offset) != (e.length, e.kind):
        st.error(digest, f"{ikey} points at offset {e.offset} of {pkey}, which holds no "
                         "such object")
        return
    got = digest_of(kind, body)
    if got != digest:
        st.error(digest, f"object bytes in {pkey} hash to {got}")
        return
    try:
        obj = decode_object(kind, body, f"object {digest}")
    except CasError as exc:
        st.error(digest, exc.message)
        return
    st.objects[digest] = kind
    st.in_pack.setdefault(pid, {})[digest] = e.length
    if kind.startswith("tree."):
        st.trees[digest] = obj
    elif kind == "provenance":
        st.provenances[digest] = obj
    elif kind == "cassette":
        st.cassettes[digest] = (obj.dataset, obj.case_id, obj.executor)
        _check_request_keys(st, digest, obj)
    elif kind == "suite.result":
        st.answered[digest] = {r.id for r in obj.results}
    if kind in ("case", "run", "cassette") and obj.person is not None:
        keyed = st.store.person_digest(obj.person)
        st.people[digest] = keyed
        st.persons_wanted.setdefault((K.person_shard(keyed), pid), set()).add((keyed, digest))


def _check_multi_index(st: _State, mkey: str) -> None:
    """A multi-pack index must say exactly what the indexes of the packs it covers say."""
    data, parsed = st.parsed(mkey, packfmt.parse_multi_index)
    if parsed is None:
        return
    packs, rows = parsed
    name = mkey[len(K.PACKS):-len(".midx")]
    if name != data[-packfmt.DIGEST_LEN:].hex():
        st.error(mkey, "multi-pack index is not named by its checksum")
    want: dict[bytes, tuple[str, tuple[int, int, int]]] = {}
    for pid in packs:
        if pid not in st.indexed:
            gone = K.pack_key(pid) not in st.keyset and K.index_key(pid) not in st.keyset
            st.error(mkey, f"covers pack {pid}, which is gone: readers look past this index, "
                     "and `cas gc` deletes it" if gone else
                     f"covers pack {pid}, which is missing or has no valid index")
            return
        for digest, row in st.indexed[pid].items():
            want.setdefault(digest, (pid, row))
    got = {e.digest: (packs[i], (e.offset, e.length, e.kind)) for e, i in rows}
    if got.keys() != want.keys():
        st.error(mkey, f"lists {len(got)} objects, its packs hold {len(want)}")
        return
    for digest, (pid, row) in got.items():
        if st.indexed[pid].get(digest) != row:
            st.error(mkey, f"row of {from_bytes(digest)} disagrees with the index of pack {pid}")
            return


def _unreferenced(st: _State) -> tuple[int, int]:
    """One notice per pack, not per object: an interrupted import of 200,000 runs is one line."""
    orphans = orphan_bytes = 0
    for pid in sorted(st.in_pack):
        unreferenced = {d: n for d, n in st.in_pack[pid].items() if d not in st.reachable}
        if not unreferenced:
            continue
        kinds = Counter(st.objects[d] for d in unreferenced)
        size = sum(unreferenced.values())
        orphans += len(unreferenced)
        orphan_bytes += size
        st.notice(K.pack_key(pid), (
            f"{_objects(len(unreferenced), 'unreferenced ')} ({size} bytes: "
            + ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items()))
            + f"); {GC_HINT}"))
    return orphans, orphan_bytes


def _objects(n: int, what: str = "") -> str:
    return f"{n} {what}object{'' if n == 1 else 's'}"


# -- refs: dataset metadata and versions ----------------------------------------------------------
def _dataset_refs(st: _State) -> dict[str, dict[str, list[int]]]:
    """Dataset name -> the numbers of its "meta" and "versions" records; every key under
    datasets/ that no family takes is reported here (and again as unexpected)."""
    by_dataset: dict[str, dict[str, list[int]]] = {}
    for key in st.keys:
        if not key.startswith(K.DATASETS):
            continue
        family = st.family[key]
        if family is None:
            st.error(key, "unexpected key under datasets/")
        elif family in ("dataset", "version"):
            name, number = K.BY_NAME[family].parse(key)
            group = "meta" if family == "dataset" else "versions"
            by_dataset.setdefault(name, {"versions": [], "meta": []})[group].append(number)
    return by_dataset


def _deleted_numbers(st: _State) -> dict[str, set[int]]:
    out: dict[str, set[int]] = {}
    for key in st.by_family["version.tombstone"]:
        found = K.parse_deleted_key(key)
        if found is not None:
            out.setdefault(found[0], set()).add(found[1])
    return out


def _check_dataset(st: _State, name: str, groups: dict[str, list[int]], gone: set) -> None:
    if name in gone:
        st.notice(f"{K.DATASETS}{name}/", "records left by an interrupted deletion of this "
                                          "dataset; run `cas dataset delete` again to finish it")
        return
    # a deleted version's number stays used (its tombstone)
    deleted = _deleted_numbers(st).get(name, set())
    first = None  # the dataset's first metadata revision
    witnessed: list[int] = []  # the operator-retired versions the revisions so far name
    for group, type_ in (("meta", DatasetRecord), ("versions", VersionRecord)):
        numbers = sorted(groups[group])
        _contiguous(st, f"{K.DATASETS}{name}/{group}/",
                    set(numbers) | (deleted if group == "versions" else set()))
        for number in numbers:
            key = (K.meta_key if group == "meta" else K.version_key)(name, number)
            record = st.read(key, type_)
            if record is None:
                continue
            if group == "meta":
                if record.name != name or record.revision != number:
                    st.error(key, f"record says {record.name!r} revision {record.revision}")
                first = record if number == 1 else first
                _check_admission(st, key, record, first)
                witnessed = _check_witnessed(st, key, name, record, witnessed)
                continue
            st.n_versions += 1
            if st.progress:
                st.progress("versions", st.n_versions, 0)
            _check_version(st, key, name, number, record, deleted)
            _check_commit(st, key, record, first)
    if not groups["meta"]:
        st.error(f"{K.DATASETS}{name}/", "dataset has versions but no metadata record")


def _check_admission(st: _State, key: str, record, first) -> None:
    """A rule this cas knows, fixed at creation: every revision carries the first one's."""
    if record.admission is not msgspec.UNSET and record.admission not in ADMISSION_RULES:
        st.error(key, f"admission {record.admission!r} is not a rule; known: "
                      f"{', '.join(ADMISSION_RULES)}")
    elif first is not None and first.admission != record.admission:
        st.error(key, f"admission {record.admits!r} differs from the one the dataset was "
                      f"created with ({first.admits!r}); a dataset's rule never changes")


def _check_witnessed(st: _State, key: str, name: str, record, before: list[int]) -> list[int]:
    """The versions a revision names as retired by an operator (docs/format.md 4.8.1): sorted,
    every earlier revision's kept (retirement is for ever), and each one's retirement record
    present unless its version was deleted (which may take the record with it)."""
    named = [] if record.retired is msgspec.UNSET else record.retired
    if named != sorted(set(named)) or any(n < 1 for n in named):
        st.error(key, f"retired {named} is not ascending version numbers without repeats")
    if dropped := sorted(set(before) - set(named)):
        st.error(key, f"no longer names {', '.join(f'{name}@{n}' for n in dropped)} as retired, "
                      "as an earlier revision does (a retirement is for ever)")
    for number in sorted(set(named) - set(before)):
        if K.retired_key(name, number) not in st.keyset and \
                K.deleted_key(name, number) not in st.keyset:
            st.error(K.retired_key(name, number),
                     f"is missing: {name}@{number} was retired by an operator ({key} names it), "
                     "so it reads as ACTIVE again; retire it again with `cas retire "
                     f"{name}@{number} --cause CAUSE --note NOTE` (the cause and note are lost "
                     "with the record; a backup or the team's notes hold them)")
    return sorted(set(before) | set(named))


def _check_commit(st: _State, key: str, record, first) -> None:
    """What a `commit` version must hold by its dataset's rule (docs/format.md 4.4, 4.7.7)."""
    if record.operation != "commit" or first is None:
        return  # (no first revision: reported with the numbering)
    _check_reviewed_commit(st, key, record, first.admission)
    _check_commit_provenance(st, key, record, first.admission)
    _check_committed_by(st, key, record)


def _check_reviewed_commit(st: _State, key: str, record, rule) -> None:
    """A `reviewed` dataset takes cases only by promotion; a commit may only remove."""
    if record.added and rule == "reviewed":
        st.error(key, f"a commit added {record.added} case(s) to a dataset whose admission is "
                      "'reviewed': only a promotion adds cases there (4.4)")


def _check_commit_provenance(st: _State, key: str, record, rule) -> None:
    """A dataset whose record states its rule was created since commits record provenance:
    each of its commits that added cases names their author (older datasets' need not)."""
    if record.added and rule is not msgspec.UNSET and record.provenance is None:
        st.error(key, f"a commit added {record.added} case(s) with no provenance: a dataset "
                      f"created with an admission rule ({rule!r}) records who committed each "
                      "case it added (4.7.7)")


def _check_committed_by(st: _State, key: str, record) -> None:
    """A commit's provenance names the version's author as each added case's (4.7.7): the
    author is recorded there alone, never in the case's bytes."""
    prov = st.provenances.get(record.provenance) if record.provenance else None
    if prov is None:
        return  # none, or missing: reported with the version
    authors = ({prov.committed_by} if prov.committed_by is not msgspec.UNSET
               else {e.committed_by for e in prov.entries})
    wrong = sorted(repr(a) if isinstance(a, str) else "none" for a in authors
                   if a != record.author)
    if wrong:
        st.error(key, f"provenance {record.provenance} gives committed_by {', '.join(wrong)}, "
                      f"but the commit's author is {record.author!r}: a commit's provenance "
                      "names its author as each added case's (4.7.7)")


def _contiguous(st: _State, where: str, used: set[int]) -> None:
    numbers = sorted(used)
    if numbers != list(range(1, len(numbers) + 1)):
        missing = sorted(set(range(1, (numbers[-1] if numbers else 0) + 1)) - used)
        st.error(where, f"numbers are not contiguous from 1; missing {missing}")


def _check_version(st: _State, key, name, number, record, deleted) -> None:
    """A retired version may lack the cases an erasure deleted (and their provenance)."""
    was_retired = (name, number) in st.retired
    # An active version may lack only a case a pending erasure names: the writer that finishes
    # the erasure retires it (a crash can come between the purge and that retirement).
    erased = st.erased if was_retired else st.pending["cases"]
    if record.dataset != name or record.number != number:
        st.error(key, f"record says {record.dataset!r} version {record.number}")
    # The parent is the version below; numbers of versions deleted before this one was sealed
    # are skipped (a version built on N after N+1 was deleted is N+2 with parent N).
    below = number - 1
    while below >= 1 and below in deleted and below != record.parent:
        below -= 1
    if record.parent != (below or None):
        st.error(key, f"parent is {record.parent}, expected {below or None}")
    if record.provenance is not None:
        if st.objects.get(record.provenance) == "provenance":
            st.reachable.add(record.provenance)
            compact = st.provenances.get(record.provenance)
            if compact is not None and compact.committed_by is not msgspec.UNSET and \
                    record.parent is not None:
                st.error(key, f"provenance {record.provenance} says the version committed "
                              f"every case it holds, but it has a parent ({record.parent})")
        elif not (was_retired and erased):
            st.error(key, f"names provenance {record.provenance}, which is missing")
    # (tree_ok: lenient towards pending erasures' cases alone, as proposals are)
    memo = st.lenient if was_retired else st.tree_ok
    result = _check_node(st, record.content_digest, "", memo, erased)
    if result is not None and result != record.item_count:
        st.error(key, f"item_count is {record.item_count} but the tree holds {result}")
    if record.proposal is not None:
        st.sealed.setdefault((name, record.proposal), number)
    if record.provenance is not None and not was_retired:
        # (a retired version may have lost reviews to an erasure whose record a mirror in
        # progress has not copied yet; its provenance cannot be read)
        st.cited.setdefault(record.provenance, ("error", key))


def _check_node(st: _State, digest, prefix, memo, erased=frozenset()):
    """Verify a subtree once (memoised by digest in `memo`): shape rule, order, counts, cases
    present (or, in a retired version, erased)."""
    done = memo.get(digest)
    if done is not None:
        return done
    kind = st.objects.get(digest)
    if kind is None or not kind.startswith("tree."):
        st.error(digest, "tree node is missing" if kind is None else f"expected a tree node, "
                                                                     f"found a {kind}")
        return None
    st.reachable.add(digest)
    node = st.trees[digest]
    if isinstance(node, TreeLeaf):
        result = _check_leaf(st, digest, node, prefix, erased)
    else:
        result = _check_inner(st, digest, node, prefix, memo, erased)
    if result is not None:
        memo[digest] = result
    return result


def _check_leaf(st: _State, digest, node, prefix, erased):
    ids = node.ids
    bad = [i for i in ids if not is_digest(i) or not i[3:].startswith(prefix)]
    if bad or ids != sorted(set(ids)) or len(ids) > LEAF_MAX:
        st.error(digest, "leaf breaks the shape rule (ids must be unique, sorted, share the "
                         f"prefix {prefix!r} and number at most {LEAF_MAX})")
        return None
    for case_id in ids:
        kind = st.objects.get(case_id, "")
        if not kind and case_id in erased:
            continue
        if kind != "case":
            st.error(case_id, "case is missing" if not kind else
                     f"expected a case, found {kind}")
        else:
            st.reachable.add(case_id)
    return len(ids)


def _check_inner(st: _State, digest, node, prefix, memo, erased):
    total = 0
    nibbles = [c.nibble for c in node.children]
    if nibbles != sorted(set(nibbles)) or node.count <= LEAF_MAX:
        st.error(digest, "inner node breaks the shape rule (children unique and ordered, "
                         f"count above {LEAF_MAX})")
        return None
    for c in node.children:
        sub = _check_node(st, c.node, prefix + "0123456789abcdef"[c.nibble], memo, erased)
        if sub is None:
            return None
        if sub != c.count or sub == 0:
            st.error(digest, f"child {c.nibble} claims {c.count} ids, its subtree holds {sub}")
            return None
        total += sub
    if total != node.count:
        st.error(digest, f"node claims {node.count} ids, its children hold {total}")
        return None
    return total


# -- retirements, erasures and the person index ---------------------------------------------------
def _check_erasures(st: _State) -> None:
    """Retirements, erasure records and plans, and the person index records, in key order.
    Fills the retired versions, the erased cases, what erasures deleted besides cases and the
    person index records read."""
    for key in st.of("retirement", "erasure", "erasure.plan", "person.shards", "person.index",
                     "person.table"):
        family = st.family[key]
        if family == "retirement":
            _check_retirement(st, key)
        elif family in ("erasure", "erasure.plan"):
            _check_erasure(st, key, family == "erasure.plan")
        elif family == "person.shards":
            _check_person_shards(st, key)
        elif family == "person.table":
            _check_person_table(st, key)
        else:
            _check_person_record(st, key)


def _check_retirement(st: _State, key: str) -> None:
    record = st.read(key, VersionRetirement)
    if record is None:
        return
    name, _, tail = K.split_dataset_key(key)
    number = K.parse_number(tail)
    if record.dataset != name or record.number != number:
        st.error(key, f"retirement says {record.dataset!r} version {record.number}")
    elif record.cause not in CAUSES:
        st.error(key, f"unknown retirement cause {record.cause!r}")
    elif K.version_key(name, number) not in st.keyset and \
            K.deleted_key(name, number) not in st.keyset:
        # A mirror copies a retirement before the version it retires: one numbered above
        # every version and version tombstone here is a copy in progress.
        top = 0
        for group in ("versions", "deleted"):
            prefix = f"{K.DATASETS}{name}/{group}/"
            i = bisect_left(st.keys, prefix + "~")  # keys are sorted; '~' after any key
            last = st.keys[i - 1][len(prefix):] if i and st.keys[i - 1].startswith(prefix) \
                else ""
            top = max(top, int(last) if last.isdigit() else 0)
        if number > top:
            st.notice(key, f"retires version {number}, which is not here yet (a mirror in "
                           "progress copies retirements first; mirroring again copies it)")
        else:
            st.error(key, "retires a version that does not exist")
    else:
        st.retired.add((record.dataset, record.number))


def _check_erasure(st: _State, key: str, pending: bool) -> None:
    record = st.read(key, ErasurePlan if pending else Erasure)
    if record is None:
        return
    found = (K.parse_pending_key if pending else K.parse_log_key)(key)
    # (a key of another form under the prefix is read all the same: its id is its last part)
    if record.id != (found[0] if found else K.last_segment(key)):
        st.error(key, f"erasure record has id {record.id!r}")
    st.erased.update(record.cases)
    st.erasures["reviews"].update(record.reviews)
    st.erasures["runs"].update(record.runs)
    if not pending:
        st.erased_persons.add(record.person)
        _check_erasure_retired(st, key, record)
    if pending:
        # A killed erasure leaves exactly this (docs/concepts.md, "Opening a repository"):
        # what the plan names may be gone from packs, versions not yet retired, proposals and
        # log records not yet cleaned. The checks below accept that absence for what the plan
        # names, and only for it: a loss the plan does not explain stays damage.
        st.pending["cases"].update(record.cases)
        st.pending["runs"].update(record.runs)
        st.pending_plans.append({"erasure": record.id, "key": key,
                                 "started_at": record.started_at, "cases": len(record.cases),
                                 "runs": len(record.runs), "reviews": len(record.reviews)})
        st.notice(key, f"erasure {record.id} is pending (started {record.started_at}; "
                       f"{len(record.cases)} case(s) and {len(record.runs)} run(s) to "
                       "delete): what it names may already be gone, which is expected, and "
                       "reads refuse it meanwhile; the next command that writes to the "
                       "repository (e.g. `cas gc`) finishes it, as does `cas erase --person "
                       f"ID --confirm-token {record.id}` again")


def _check_erasure_retired(st: _State, key: str, record: Erasure) -> None:
    """Every version a completed erasure retired keeps its retirement record (which its own
    deletion, or its dataset's, may take with it): the erasure record is its witness."""
    for ref in record.retired:
        name, number = ref.dataset, ref.number
        if not (K.retired_key(name, number) in st.keyset
                or K.deleted_key(name, number) in st.keyset
                or K.tombstone_key(name) in st.keyset
                or K.meta_key(name, 1) not in st.keyset):  # a dataset deleted and collected
            st.error(K.retired_key(name, number),
                     f"is missing: {name}@{number} was retired by erasure {record.id} ({key} "
                     "names it), so it reads as ACTIVE again although cases of it are erased")


def _check_person_shards(st: _State, key: str) -> None:
    """A pack's person-shards record: its name and content agree, and every person index file
    it promises exists while the pack is published (an erasure trusts exactly these)."""
    parsed = K.parse_person_shards_key(key)
    if parsed is not None:
        st.person_files.setdefault(parsed[0], key)
    record = st.read(key, PersonShards)
    if record is None:
        return
    if parsed is None or parsed != (record.pack, set(record.shards)):
        st.error(key, "person-shards record does not match its key")
        return
    if K.index_key(record.pack) not in st.keyset:
        st.notice(key, "person-shards record of a pack that is gone (left by an interrupted gc "
                       "or erasure; gc removes it)")
        return
    for shard in record.shards:
        if K.person_index_key(shard, record.pack) not in st.keyset:
            st.error(key, f"pack {record.pack} has no person index file for shard {shard} "
                          f"({K.person_index_key(shard, record.pack)} is missing): an erasure "
                          "scans the pack instead, but the index is damaged")


def _check_person_table(st: _State, key: str) -> None:
    """A pack's person table: every byte checked, its name and content agree, and each row
    names an object of the pack."""
    named = K.parse_person_table_key(key)
    if named is not None:
        st.person_files.setdefault(named[0], key)
    table = st.parsed(key, person_index.parse_table)[1]
    if table is None:
        for shard in named[1] if named is not None else ():
            st.person_rows[(shard, named[0])] = (key, None)
        return
    pid, shards = table
    if named is None or named != (pid, set(shards)):
        st.error(key, "person table does not match its key")
        return
    # (a table lists every shard: one it has no rows in lists no one there)
    _check_person_rows(st, key, pid, {shard: set(shards.get(shard, ()))
                                      for shard in K.SHARD_NAMES})


def _check_person_record(st: _State, key: str) -> None:
    """A person index record (one shard of a pack written before person tables)."""
    record = st.read(key, PersonIndex)
    parsed = K.split_person_index_key(key)
    if parsed is not None:
        st.person_files.setdefault(parsed[1], key)
    if record is None:
        if parsed is not None:
            st.person_rows[parsed] = (key, None)
        return
    if parsed is None or record.pack != parsed[1] or any(
            K.person_shard(e.person) != parsed[0] for e in record.entries):
        st.error(key, "person index does not match its key")
        return
    _check_person_rows(st, key, record.pack,
                       {parsed[0]: {(e.person, e.digest) for e in record.entries}})


def _check_person_rows(st: _State, key: str, pid: str,
                       shards: dict[str, set[tuple[str, str]]]) -> None:
    for shard, rows in shards.items():
        st.person_rows[(shard, pid)] = (key, rows)
    if K.index_key(pid) not in st.keyset:
        st.notice(key, "person index of a pack that is gone (left by an interrupted gc or "
                       "erasure; gc removes it)")
    elif pid in st.indexed:
        absent = sorted(d for rows in shards.values() for _, d in rows
                        if to_bytes(d) not in st.indexed[pid])
        if absent:
            st.error(key, f"lists {absent[0]}, which pack {pid} does not hold")


def _check_person_index(st: _State) -> None:
    """Every case and run naming a person is listed, under its keyed person, by the person index
    of its pack in that person's shard: an erasure finds a person's data only through these
    files, so a lost one leaves the person's bytes behind after their erasure."""
    rows_of, wanted = st.person_rows, st.persons_wanted
    for (shard, pid), want in sorted(wanted.items()):
        key, rows = rows_of.get((shard, pid), (None, None))
        example = min(want)[1]
        if rows is None:
            if key is None:  # where the pack's person index should be
                key = st.person_files.get(pid)
                if key is None:  # none at all: where a writer puts it
                    key = K.person_table_key(pid, {s for s, p in wanted if p == pid})
                elif not key.startswith(K.PERSON_TABLES):  # written before person tables
                    key = K.person_index_key(shard, pid)
            st.error(key, f"{'missing' if (shard, pid) not in rows_of else 'unreadable'}: "
                          f"pack {pid} holds {len(want)} objects of people in shard {shard} "
                          f"(e.g. {example}) that an erasure finds only through it")
            continue
        absent = sorted(want - rows)
        if absent:
            st.error(key, f"does not list {absent[0][1]} of pack {pid} under its person "
                          f"{absent[0][0]} (shard {shard}; {len(absent)} of {len(want)} "
                          "entries missing): an erasure of that person would miss it")
    # The reverse: an entry for an object of the pack under a person it does not name. A
    # provenance object may be indexed under the people of the cases it describes, a suite
    # result under those of the cases it answers.
    case_person = {d: keyed for want in wanted.values() for keyed, d in want}
    described = {d: {case_person[e.case_id] for e in obj.entries if e.case_id in case_person}
                 for d, obj in st.provenances.items()}
    described.update({d: {case_person[c] for c in ids if c in case_person}
                      for d, ids in st.answered.items()})
    for (shard, pid), (key, rows) in sorted(rows_of.items()):
        if rows is None or pid not in st.in_pack:
            continue
        held = st.in_pack[pid]
        want = wanted.get((shard, pid), set())
        wrong = sorted((person, d) for person, d in rows if d in held
                       and (person, d) not in want and person not in described.get(d, ()))
        if wrong:
            st.error(key, f"lists {wrong[0][1]} under {wrong[0][0]}, a person that "
                          "object does not name")


# -- run imports, review batches, settings, proposals and idempotency claims ----------------------
_LOGS = (("run.import", K.IMPORTS, RunImport), ("review.batch", K.REVIEWS, ReviewBatch),
         ("settings", K.SETTINGS, Settings), ("eligibility", K.ELIGIBILITY, Eligibility),
         ("metrics", K.METRICS, Metrics))


_INDEXED = {"run.import": log_index.RUNS, "review.batch": log_index.REVIEWS}


def _check_logs(st: _State) -> None:
    """The repository-wide numbered logs: each record verified, the numbering contiguous; the
    reviews read are kept for _check_references, the runs imports name are reachable, and the
    rows the log indexes must hold are kept for _check_log_indexes."""
    for family, prefix, type_ in _LOGS:
        numbers = []
        for key in sorted(k for k in st.keys if k.startswith(prefix)):
            if st.family[key] != family:
                st.error(key, f"unexpected key under {prefix}")
                continue
            (number,) = K.BY_NAME[family].parse(key)
            numbers.append(number)
            data, record = st.read_file(key, type_)
            if record is None:
                continue
            log = _INDEXED.get(family)
            if log is not None:
                st.log_rows[log.name, number] = {(row[:16], number) for row in log_index.rows_of(
                    log, number, data, record, st.store.person_key)}
            if getattr(record, "number", getattr(record, "revision", None)) != number:
                st.error(key, "record number does not match its key")
            if type_ is Settings:
                _check_settings(st, key, record)
            elif type_ is Eligibility:
                _check_eligibility(st, key, record)
            elif type_ is Metrics:
                _check_metrics(st, key, record)
            if type_ is ReviewBatch:
                st.seen["reviews"].extend((key, r) for r in record.reviews)
                for review in record.reviews:
                    _check_review(st, key, review)
            if type_ is RunImport:
                _note_readmitted(st, key, number, record)
                for entry in record.runs:
                    if st.objects.get(entry.run) == "run":
                        st.reachable.add(entry.run)
                    elif entry.run not in st.pending["runs"]:  # (else: redacted once finished)
                        st.error(key, f"run {entry.run_id!r} ({entry.run}) is missing")
        if numbers != list(range(1, len(numbers) + 1)):
            missing = sorted(set(range(1, numbers[-1] + 1)) - set(numbers))
            st.error(prefix, f"numbers are not contiguous from 1; missing {missing}")


def _check_settings(st: _State, key: str, record: Settings) -> None:
    """A content policy revision (docs/format.md 4.7.4): known classes, sorted and each once; a
    list in the repository default (null is only an override's "follow the default"); an
    override names a dataset that exists or existed."""
    override = record.dataset is not msgspec.UNSET
    if record.withheld is None:
        if not override:
            st.error(key, "the repository default's withheld is null: only an override may "
                          "follow the default; the default names its classes ([] for none)")
    else:
        unknown = sorted(set(record.withheld) - set(CONTENT_CLASSES))
        if unknown:
            st.error(key, f"withholds unknown content class(es) {', '.join(map(repr, unknown))}"
                          f"; known: {', '.join(CONTENT_CLASSES)}")
        if record.withheld != sorted(set(record.withheld)):
            st.error(key, "withheld content classes are not sorted, each once")
    if override and record.dataset not in _ever_named(st):
        # A notice: a mirror copies the settings log before the datasets (4.6 step order), so
        # a copy in progress looks the same; the override holds for a dataset made later.
        st.notice(key, f"overrides the content policy of dataset {record.dataset!r}, which "
                       "has no revision and no tombstone: it never existed here (or a mirror "
                       "has not copied it yet); it applies if a dataset of that name is made")


def _ever_named(st: _State) -> set[str]:
    """The datasets that exist or existed: a `dataset` revision or a tombstone (computed once)."""
    if st.ever_named is None:
        st.ever_named = {K.BY_NAME["dataset"].parse(k)[0] for k in st.by_family["dataset"]}
        st.ever_named.update(K.parse_tombstone_key(k)[0]
                             for k in st.by_family["dataset.tombstone"])
    return st.ever_named


def _check_eligibility(st: _State, key: str, record: Eligibility) -> None:
    """An eligibility revision (docs/format.md 4.7.4.1): a metric and at least one accepted
    label, each 1-256 printable characters, the labels sorted and each once."""
    if not record.accepted or record.accepted != sorted(set(record.accepted)):
        st.error(key, "accepted labels must be at least one, sorted, each once; they are "
                      f"{record.accepted!r}")
    for what, text in [("metric", record.metric)] + [("label", a) for a in record.accepted]:
        problem = encoding.text_problem(text, 256)
        if problem is not None:
            st.error(key, f"the {what} {encoding.describe(text)} is not 1-256 printable "
                          f"characters: it {problem}")
    if record.reviewers is not msgspec.UNSET and not 1 <= record.reviewers <= 100:
        st.error(key, f"reviewers is {record.reviewers}: from 1 to 100")
    if record.rule is not msgspec.UNSET and record.rule not in ELIGIBILITY_RULES:
        st.error(key, f"rule {record.rule!r} is not one of {', '.join(ELIGIBILITY_RULES)}")
    if (record.reviewers is msgspec.UNSET) != (record.rule is msgspec.UNSET) or (
            record.reviewers == 1 and record.rule == "unanimous"):
        st.error(key, "reviewers and rule are both present (and not 1, unanimous: that rule "
                      "is written by leaving both out) or both absent")


def _check_metrics(st: _State, key: str, record: Metrics) -> None:
    """A metrics revision (docs/format.md 4.7.4.2): metrics sorted by name, each once; each
    with at least one label, each label once; names and labels 1-256 printable characters."""
    names = [m.name for m in record.metrics]
    if names != sorted(set(names)):
        st.error(key, f"declared metrics are not sorted by name, each once: {names!r}")
    for m in record.metrics:
        if not m.labels or len(set(m.labels)) != len(m.labels):
            st.error(key, f"metric {m.name!r} must have at least one label, each once; it has "
                          f"{m.labels!r}")
        for what, text in [("metric", m.name)] + [("label", x) for x in m.labels]:
            problem = encoding.text_problem(text, 256)
            if problem is not None:
                st.error(key, f"the {what} {encoding.describe(text)} is not 1-256 printable "
                              f"characters: it {problem}")


def _check_review(st: _State, key: str, review) -> None:
    """A review's comment (1 to COMMENT_LIMIT characters, no control character but line
    breaks and tabs) and correction (not null), when present (docs/format.md 4.7.2)."""
    comment = review.comment
    if comment is not msgspec.UNSET:
        if not comment.strip() or len(comment) > COMMENT_LIMIT or any(
                not (c.isprintable() or c in "\n\t") for c in comment):
            st.error(key, f"review {review.annotation_id}'s comment is not 1 to {COMMENT_LIMIT} "
                          "characters without control characters (but line breaks and tabs)")
    if review.correction is None:
        st.error(key, f"review {review.annotation_id}'s correction is null: a judgment without "
                      "a correction has none (the field is absent)")


def _check_log_indexes(st: _State) -> None:
    """Each segment of a log index whole (checksum, order, fan-out, its name), over records the
    log holds, with a row for every entry those records hold now. Rows an erasure's redaction
    left (naming entries the records no longer hold) are expected and name no plain value."""
    for key in st.by_family["log.index"]:
        parsed = K.parse_log_segment_key(key)
        if parsed is None:
            st.error(key, "not a log index key (indexes/<runs|reviews>/<lo>-<hi>.<64 hex>)")
            continue
        name, lo, hi, checksum = parsed
        log = log_index.LOGS[name]
        data, segment = st.parsed(key, log_index.parse_segment)
        if segment is None:
            continue
        got_lo, got_hi, rows = segment
        if (got_lo, got_hi) != (lo, hi) or data[-32:].hex() != checksum:
            st.error(key, f"holds records ({got_lo}, {got_hi}] and checksum "
                          f"{data[-32:].hex()}, not what its name says")
            continue
        if log.key_of(hi) not in st.keyset:
            st.error(key, f"indexes records up to {hi}, which {log.key_of(hi)} is not")
            continue
        held = {(row[:16], int.from_bytes(row[16:20], "big")) for row in rows}
        for number in range(lo + 1, hi + 1):
            # (a record missing or damaged has no rows here: _check_logs reports it)
            missing = st.log_rows.get((name, number), set()) - held
            if missing:
                st.error(key, f"lacks {len(missing)} row(s) of {log.key_of(number)}: a lookup "
                              "would not find what that record holds")
                break


def _check_admissions(st: _State) -> None:
    """Each admission of erased persons names its import; one whose import record never came
    (an import interrupted between the two) is a harmless leftover."""
    for key in st.by_family["run.admission"]:
        record = st.read(key, RunAdmission)
        if record is None:
            continue
        (number,) = K.parse_admission_key(key)
        if record.number != number:
            st.error(key, "record number does not match its key")
            continue
        st.admitted[number] = set(record.persons)
        if K.import_key(number) not in st.keyset:
            st.notice(key, f"admits erased persons for import {number}, which was never "
                           "recorded (an interrupted import)")


def _note_readmitted(st: _State, key: str, number: int, record) -> None:
    """The runs import `number` names of persons a completed erasure deleted: each needs the
    admission of that import (kept for _check_readmissions, which runs once they are read)."""
    if not st.erased_persons:
        return
    for entry in record.runs:
        keyed = st.people.get(entry.run)
        if keyed in st.erased_persons:
            st.readmitted.append((key, number, entry, keyed))


def _check_readmissions(st: _State) -> None:
    """An erasure redacts every import naming the person's runs, so a run of an erased person
    that an import names came back later, which only an admission allows (4.7.2.1). Without
    one, a deleted or edited admission would hide that the person's data returned unasked."""
    for key, number, entry, keyed in st.readmitted:
        if keyed not in st.admitted.get(number, ()):
            st.error(key, f"run {entry.run_id!r} ({entry.run}) is of person {keyed}, whom an "
                          f"erasure deleted, but {K.admission_key(number)} does not admit "
                          "that person: an import of an erased person's data needs a "
                          "run.admission (4.7.2.1)")


def _check_withdrawals(st: _State) -> None:
    """Each withdrawal names a score batch that exists, by its own key."""
    for key in st.by_family["score.withdrawal"]:
        record = st.read(key, ScoreWithdrawal)
        if record is None:
            continue
        name, number = K.parse_withdrawal_key(key)
        if (record.dataset, record.batch) != (name, number):
            st.error(key, "withdrawal does not match its key")
            continue
        if not record.reason.strip() or len(record.reason) > MAX_REASON:
            st.error(key, f"a withdrawal's reason is 1-{MAX_REASON} characters, not only white "
                          f"space (docs/format.md 4.6.1.1); this one has {len(record.reason)}")
        batch = K.score_batch_key(name, number)
        if batch not in st.keyset:
            st.error(key, f"withdraws score batch {number}, which does not exist")
            continue
        try:
            found = parse_record_file_of(st.backend.get(batch), (ScoreBatch, Fence), batch)
        except STORAGE_FAILURES:
            raise
        except CasError:
            continue  # the citation checks report a damaged batch
        if isinstance(found, Fence):
            st.error(key, f"withdraws {batch}, which is a fence, not a score batch")


def _check_cassette_logs(st: _State) -> None:
    """Each dataset's cassette log: numbered from 1 without a gap, and every entry names a
    stored cassette of that dataset, case and executor, unless an erasure deleted the case
    (and with it, the cassette: they name one person)."""
    numbers: dict[str, set[int]] = {}
    for key in st.by_family["cassette.log"]:
        found = K.parse_cassette_log_key(key)
        if found is None:
            st.error(key, "malformed cassette log key (datasets/<name>/cassettes/<10 digits>)")
            continue
        name, number = found
        numbers.setdefault(name, set()).add(number)
        record = st.read(key, CassetteLog)
        if record is None:
            continue
        if (record.dataset, record.number) != (name, number):
            st.error(key, "cassette log record does not match its key")
            continue
        pairs = [(e.case_id, e.executor) for e in record.entries]
        if not pairs or pairs != sorted(set(pairs)):
            st.error(key, "cassette log entries must be at least one, sorted by case and "
                          "executor, each pair once")
        for e in record.entries:
            if e.cassette in st.cassettes:
                st.reachable.add(e.cassette)
                if st.cassettes[e.cassette] != (name, e.case_id, e.executor):
                    st.error(key, f"cassette {e.cassette} is not of case {e.case_id} under "
                                  f"executor {e.executor!r} of {name!r}")
            elif e.case_id not in st.erased:
                kind = st.objects.get(e.cassette)
                st.error(key, f"cassette {e.cassette} of case {e.case_id} is " +
                         ("missing" if kind is None else f"a {kind}, not a cassette"))
    for name, used in sorted(numbers.items()):
        _contiguous(st, f"{K.DATASETS}{name}/cassettes/", used)


def _check_request_keys(st: _State, digest: str, cassette) -> None:
    """Each exchange's key is the request key of its own request (4.10): replay finds an
    exchange only by its key, so a wrong one is a recording nothing can ever match."""
    for i, exchange in enumerate(cassette.exchanges):
        want = exchange_key(exchange)
        if exchange.key != want:
            st.error(digest, f"exchange {i} ({exchange.name!r}) has request key {exchange.key}, "
                             f"but its request's is {want} (4.10)")
            return


def _check_cassette_persons(st: _State) -> None:
    """A cassette names its case's person (4.10): an erasure of that person finds the cassette
    only through it, so another person (or none) leaves the recording behind."""
    for digest, (_, case_id, _) in sorted(st.cassettes.items()):
        if st.objects.get(case_id) != "case":
            continue  # a missing case: an erasure's (its cassette goes too), or reported
        want, got = st.people.get(case_id), st.people.get(digest)
        if want != got:
            st.error(digest, f"cassette names person {got or 'none'}, but its case {case_id} "
                             f"names {want or 'none'}: an erasure of the case's person would "
                             "not find it (4.10)")


def _check_proposals(st: _State) -> None:
    """Staged proposals and idempotency claims, in key order."""
    for key in st.of("proposal", "idempotency"):
        name, group, _ = K.split_dataset_key(key)
        try:
            if group == "keys":
                claim = parse_record_file(st.backend.get(key), IdempotencyRecord, key)
                if K.idempotency_key(name, claim.key) != key or claim.dataset != name:
                    st.error(key, "idempotency record does not match its key")
                elif K.proposal_key(name, claim.token) not in st.keyset:
                    st.error(key, f"names proposal {claim.token}, which is missing")
                continue
            proposal = parse_record_file(st.backend.get(key), Proposal, key)
        except STORAGE_FAILURES:
            raise
        except CasError as exc:
            st.error(key, exc.message)
            continue
        _check_proposal(st, key, name, proposal)


def _check_proposal(st: _State, key: str, name: str, proposal) -> None:
    st.seen["proposals"].append((key, proposal))
    if proposal.dataset != name:
        st.error(key, f"proposal is for dataset {proposal.dataset!r}")
    # A proposal holding a case a pending erasure names is one that erasure deletes, with
    # the provenance naming the case: until then its case (and provenance) may be gone.
    for digest in proposal.add:
        if st.objects.get(digest) == "case":
            st.reachable.add(digest)
        elif digest not in st.pending["cases"]:
            st.error(key, f"proposed case {digest} is missing")
    if proposal.provenance is not None:
        if st.objects.get(proposal.provenance) == "provenance":
            st.reachable.add(proposal.provenance)
            st.cited.setdefault(proposal.provenance, ("notice", key))
        elif not _holds_pending(st, proposal):
            st.error(key, f"provenance {proposal.provenance} is missing")
    count = _check_node(st, proposal.proposed_root, "", st.tree_ok, st.pending["cases"])
    if count != proposal.proposed_count:
        st.error(key, "the proposed tree does not hold proposed_count cases")


def _holds_pending(st: _State, proposal) -> bool:
    """Whether a proposal adds or holds a case a pending erasure names (a damaged tree,
    reported by the tree check, holds none)."""
    pending = st.pending["cases"]
    if not pending:
        return False
    if not pending.isdisjoint(proposal.add):
        return True
    try:
        return Trie(st.trees.__getitem__).holding([proposal.proposed_root], sorted(pending))[0]
    except (KeyError, CasError):
        return False


def _check_references(st: _State) -> None:
    """What logs say of each other, where a deletion leaves no gap in any numbering: reviews
    name stored runs, provenance names saved reviews, a sealed proposal keeps its idempotency
    claim. What erasures deleted (their records list it) is allowed to be gone."""
    for key, review in st.seen["reviews"]:
        if st.objects.get(review.run) != "run" and review.run not in st.erasures["runs"]:
            st.error(key, f"review {review.annotation_id} is of run {review.run_id!r} "
                          f"({review.run}), which is missing")
    saved = {review.annotation_id for _, review in st.seen["reviews"]}
    for digest, (severity, where) in sorted(st.cited.items()):
        prov = st.provenances.get(digest)
        if prov is None:
            continue  # a missing provenance is reported where it is named
        # (entry, a judgment it names that no batch holds): the admitting one, or another of
        # the K reviewers' (admitted_by)
        lost = [(e, a) for e in prov.entries if e.promoted and e.case_id not in st.erased
                for a in [e.annotation_id, *(e.admitted_by or ())]
                if a not in saved and a not in st.erasures["reviews"]]
        if lost:
            more = f" (and {len(lost) - 1} more)" if len(lost) > 1 else ""
            entry, annotation = lost[0]
            # Only an active version's is damage for sure: a staged proposal may be one an
            # erasure is about to delete (a mirror deletes it last); sealing it would tell.
            st.problems.append(Problem(severity, where, (
                f"provenance {digest} names review {annotation} of run {entry.run_id!r}{more}, "
                "which no review batch holds")))
    for key, proposal in st.seen["proposals"]:
        _check_claimed(st, key, proposal)


def _check_claimed(st: _State, key: str, proposal) -> None:
    name, _, token = K.split_dataset_key(key)
    ikey = K.idempotency_key(name, proposal.idempotency_key)
    if ikey in st.keyset:
        return  # a claim naming another token: this proposal lost a race, harmless
    number = st.sealed.get((name, token))
    if number is not None:
        # Its token was handed out only after the claim was stored, and nothing deletes the
        # claim of a sealed proposal: the claim was lost, and the key can now stage another
        # request. A notice, not an error, only because a mirror copies versions before
        # proposals and claims: one in progress looks the same.
        st.notice(key, f"sealed as version {number}, but the idempotency claim of its key "
                       f"({ikey}) is missing: it was deleted (the key can now stage another "
                       "request), or a mirror into this repository has not copied it yet")
    else:
        st.notice(key, f"staged proposal without the idempotency claim of its key ({ikey}): "
                       "staging or a gc was interrupted (or the claim was deleted); the same "
                       "key stages anew")


# -- pins, scores, experiments and deletion (cas/repo/citations.py, deletion.py) ----------------
_CITATIONS = {"version.tombstone": "deleted", "experiment": "experiments",
              "score.batch": "scores"}


def _citation_logs(st: _State) -> dict[str, dict[str, list[int]]]:
    """Dataset -> group -> numbers of its tombstones and citation logs (every dataset with a
    tombstone has an entry); a malformed number is reported here."""
    families: dict[str, dict[str, list[int]]] = {}
    for key in st.of("dataset.tombstone", *_CITATIONS):
        name, group, tail = K.split_dataset_key(key)
        if tail is None:  # the dataset's tombstone
            families.setdefault(name, {})
            continue
        number = K.parse_number(tail)
        if number is None:
            st.error(key, "unexpected key under datasets/")
            continue
        families.setdefault(name, {}).setdefault(group, []).append(number)
    return families


def _check_citations(st: _State) -> None:
    """Tombstones, experiments and score batches: each record verified, the logs contiguous,
    every citation naming a live version with its content_digest (and a case and an experiment
    of it); a deleted dataset keeps only its tombstone and fences."""
    families = _citation_logs(st)
    versions: dict[tuple[str, int], object] = {}

    def live_version(name: str, number: int):
        """The version record cited, or None (missing, deleted or damaged: reported)."""
        if (name, number) not in versions:
            record = None
            key = K.version_key(name, number)
            if number not in families.get(name, {}).get("deleted", ()) and key in st.keyset:
                try:
                    record = parse_record_file(st.backend.get(key), VersionRecord, key)
                except STORAGE_FAILURES:
                    raise
                except CasError:
                    pass  # reported with the versions
            versions[(name, number)] = record
        return versions[(name, number)]

    trie = Trie(st.trees.__getitem__)
    for name in sorted(families):
        fam = families[name]
        dataset_gone = K.tombstone_key(name) in st.keyset
        if dataset_gone:
            key = K.tombstone_key(name)
            tomb = st.read(key, DatasetTombstone)
            if tomb is not None and tomb.dataset != name:
                st.error(key, f"tombstone is for dataset {tomb.dataset!r}")
        _check_version_tombstones(st, name, fam.get("deleted", []), dataset_gone)
        experiments: dict[str, object] = {}
        for log in ("experiments", "scores"):
            for key, entry in _citation_entries(st, name, log, fam.get(log, [])):
                # a withdrawn batch cites nothing: its version (or dataset) may be deleted
                withdrawn = log == "scores" and K.withdrawal_key(name, entry.number) in st.keyset
                if dataset_gone:
                    if not withdrawn:
                        st.error(key, "a citation in a deleted dataset")
                    continue
                cites = ([(f"{key}#{i}", s) for i, s in enumerate(entry.scores)]
                         if log == "scores" else [(key, entry)])
                if log == "experiments":
                    if entry.name in experiments:
                        st.error(key, f"experiment name {entry.name!r} is used twice")
                    experiments.setdefault(entry.name, entry)
                for where, c in cites:
                    version = live_version(name, c.version)
                    if version is None and withdrawn:
                        continue
                    _check_citation(st, where, name, c, version, trie, experiments)
                if log == "scores" and isinstance(getattr(entry, "result", None), str):
                    st.reachable.add(entry.result)  # gc keeps it too (gc.reachable)
                    kind = st.objects.get(entry.result)
                    # An erasure deletes a result answering its person's cases, and retires
                    # the version it is of: gone then is expected, as a retired version's
                    # provenance may be.
                    erased = kind is None and all((name, s.version) in st.retired
                                                  for s in entry.scores)
                    if kind != "suite.result" and not erased:
                        st.error(key, f"cites suite result {entry.result}, which is not "
                                      "stored (or is not a suite.result)")


def _check_version_tombstones(st: _State, name: str, numbers, dataset_gone: bool) -> None:
    for number in sorted(numbers):
        key = K.deleted_key(name, number)
        tomb = st.read(key, VersionTombstone)
        if tomb is None:
            continue
        if tomb.dataset != name or tomb.number != number:
            st.error(key, f"tombstone says {tomb.dataset!r} version {tomb.number}")
        if K.version_key(name, number) in st.keyset and not dataset_gone:
            st.notice(key, f"version {number} is being deleted or its deletion was interrupted "
                           "(the version file is still there); run `cas version delete` again")


def _citation_entries(st: _State, name: str, log: str, numbers):
    """(key, entry) of each citation of a log (fences and damaged records reported and left
    out), after checking the numbering."""
    numbers = sorted(numbers)
    if numbers != list(range(1, len(numbers) + 1)):
        missing = sorted(set(range(1, numbers[-1] + 1)) - set(numbers))
        st.error(f"{K.DATASETS}{name}/{log}/", f"numbers are not contiguous from 1; missing "
                                               f"{missing}")
    type_ = Experiment if log == "experiments" else ScoreBatch
    for number in numbers:
        key = K.citation_key(name, log, number)
        entry = st.read(key, (type_, Fence))
        if entry is None:
            continue
        if entry.dataset != name or entry.number != number:
            st.error(key, f"record says {entry.dataset!r} number {entry.number}")
        if isinstance(entry, Fence):
            if entry.log != log:
                st.error(key, f"fence of the {entry.log!r} log")
            continue
        yield key, entry


def _check_citation(st: _State, where, name, c, version, trie, experiments) -> None:
    if getattr(c, "dataset", name) != name:
        st.error(where, f"cites dataset {c.dataset!r} from the log of {name!r}")
        return
    if version is None:
        st.error(where, f"cites {name}@{c.version}, which is missing or deleted")
        return
    if c.content_digest != version.content_digest:
        st.error(where, f"cites {name}@{c.version} with content_digest {c.content_digest}, "
                        f"but that version has {version.content_digest}")
    item = getattr(c, "item", None)
    if item is not None:
        try:
            held = trie.contains(version.content_digest, item)
        except (KeyError, CasError):
            held = True  # the version's tree is damaged: reported with the versions
        if not held:
            st.error(where, f"cites case {item}, which {name}@{c.version} does not hold")
    exp = getattr(c, "experiment", None)
    if exp is not None:
        known = experiments.get(exp)
        if known is None:
            st.error(where, f"names experiment {exp!r}, which dataset {name!r} does not have")
        elif known.version != c.version:
            st.error(where, f"names experiment {exp!r} of {name}@{known.version}, but cites "
                            f"{name}@{c.version}")


# -- leases (cas/leases.py) -----------------------------------------------------------------------
def _check_leases(st: _State) -> None:
    """Leases are short-lived: each must parse and match its key; one left by a holder that
    died is harmless once it expires (the next gc or erasure stops waiting)."""
    for key in st.by_family["lease"]:
        parsed = K.parse_lease_key(key)
        if parsed is None:
            st.error(key, f"unexpected key under {K.LEASES}")
            continue
        record = st.read(key, Lease)
        if record is not None and (record.role, record.id) != parsed:
            st.error(key, "lease does not match its key")
        elif record is not None:
            _check_lease(st, key, record)


def _check_lease(st: _State, key: str, record: Lease) -> None:
    """A lease's fields hold the values docs/format.md 4.9 lists: an operation of its role,
    its holder, two times of the lease clock with started_at <= expires_at, and the fields of
    the other roles empty."""
    if record.operation not in leases.OPERATIONS[record.role]:
        article = "an" if record.role == leases.ERASURE else "a"
        st.error(key, f"{article} {record.role} lease's operation is one of "
                      f"{', '.join(map(repr, leases.OPERATIONS[record.role]))}, not "
                      f"{record.operation!r}")
    if not record.host or record.pid < 1:
        st.error(key, f"names no holder: host {record.host!r}, pid {record.pid}")
    start, end = (_lease_time(t) for t in (record.started_at, record.expires_at))
    if start is None or end is None:
        st.error(key, "started_at and expires_at are UTC times YYYY-MM-DDTHH:MM:SS.ffffffZ; "
                      f"they are {record.started_at!r} and {record.expires_at!r}")
    elif end < start:
        st.error(key, f"expires at {record.expires_at}, before it started ({record.started_at})")
    gc = record.role == leases.GC
    if (record.packs and not gc) or (record.proposals and record.operation != "gc") or \
            (record.erasure is None) == (record.role == leases.ERASURE):
        st.error(key, "packs are a gc lease's, proposals a gc's (not a merge's), and an erasure "
                      "lease (only) names its plan")
    elif record.packs != sorted(set(record.packs)) or not all(map(_is_pack_id, record.packs)):
        st.error(key, "packs must be sorted pack ids (64 lowercase hex digits), each once")


_LEASE_TIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z")


def _lease_time(text: str) -> str | None:
    """The time as written by cas/storage/leases.py (fixed width: it orders as text), or None."""
    if not _LEASE_TIME.fullmatch(text):
        return None
    try:
        datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ")  # a real date and time
    except ValueError:
        return None
    return text


def _is_pack_id(text: str) -> bool:
    return len(text) == 64 and all(c in "0123456789abcdef" for c in text)
