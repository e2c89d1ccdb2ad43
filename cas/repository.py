"""Repository operations: datasets, sealing versions, exact reads, diffs and proofs."""

from __future__ import annotations

import datetime as _dt
import errno
import gc
import getpass
import inspect
import os
import re
import secrets
import time as _time
from typing import IO, Any, Callable, Iterable, Iterator, NamedTuple

import msgspec

from . import claims, encoding, leases
from .backends import is_remote, remote_backend
from .backends.local import LocalBackend
from .digest import digest_of, parse_digest, person_key
from .errors import (AlreadyExists, CasError, DataLoss, FailedPrecondition, InvalidArgument,
                     NotFound, Unavailable, VersionConflict)
from .objects import (FORMAT, Case, DatasetRecord, Object, RepoConfig, TreeLeaf, TreeNode,
                      VersionRecord, check_format, format_record_file, parse_record_file)
from .refs import RefsLog, check_dataset_name, meta_key, version_key
from .retirement import ACTIVE, RETIRED, refuse_retired
from .store import ObjectStore
from .tree import EMPTY_ROOT, Proof, Trie

CONFIG_KEY = "config"
REPO_DIR = ".cas"


class EncodedCase(NamedTuple):
    """A case already in canonical bytes, with its id (made only by cas's own decoders)."""

    case_id: str
    data: bytes
    person: str | None = None  # the case's person, for the person index (cas/erasure.py)


MAX_PAGE = 500  # the largest page of ids a read returns; a larger limit is refused


class ItemsPage(NamedTuple):
    items: list[str]
    next_cursor: str | None  # pass as `after` for the next page; None at the end

    @property
    def has_more(self) -> bool:
        return self.next_cursor is not None


class VersionsPage(NamedTuple):
    versions: list[VersionRecord]
    next_before: int | None


class RunImportResult(NamedTuple):
    new: list[str]       # run ids imported now
    unchanged: int       # runs already stored with identical content


class SealResult(NamedTuple):
    version: VersionRecord | None   # None: the proposal changes nothing, no version sealed
    already_sealed: bool            # the token was sealed before; this is that version


class Diff(NamedTuple):
    added: list[str]
    removed: list[str]


class DiffPage(NamedTuple):
    """Up to `limit` changes in id order, split by kind; pass `next_cursor` as `cursor`."""

    added: list[str]
    removed: list[str]
    next_cursor: str | None  # None at the end

    @property
    def has_more(self) -> bool:
        return self.next_cursor is not None


def now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def default_author() -> str:
    """The configured person (`CAS_USER`, else `cas config user.name/user.email`), else the
    login name."""
    from .userconfig import configured_person
    user = configured_person()
    if user:
        return user
    try:
        return getpass.getuser()
    except Exception:
        return "unknown"


# -- cases --------------------------------------------------------------------------------
_CASE_DECODER = msgspec.json.Decoder(Case)


# The EncodedCases cas's own codec made (encode_case, read_cases_jsonl) are of this subclass
# and trusted as they are; any other EncodedCase is checked as a caller's input, so a forged
# one can never store bytes under an id that is not their digest, or bytes that are no case.
_Encoded = type("EncodedCase", (EncodedCase,), {"__slots__": ()})


def encode_case(item: Any) -> EncodedCase:
    """Canonical bytes and id of a case given as a Case, a dict, or an EncodedCase."""
    if type(item) is _Encoded:
        return item
    if isinstance(item, EncodedCase):
        return _check_encoded(item)
    if isinstance(item, dict):
        encoding.check_json(item)
        try:
            item = msgspec.convert(item, Case)
        except msgspec.ValidationError as exc:
            raise InvalidArgument(f"not a case: {exc}") from None
    elif isinstance(item, Case):
        encoding.check_json(item)
        try:  # a Case built by hand is not validated: its fields may have any type
            item = _CASE_DECODER.decode(encoding.encode(item))
        except msgspec.ValidationError as exc:
            raise InvalidArgument(f"not a case: {exc}") from None
    else:
        raise InvalidArgument(f"a case must be a dict or cas.Case, not {type(item).__name__}")
    check_format(item, "a case")
    data = encoding.encode(item)
    return _Encoded(digest_of("case", data), data, item.person)


def _check_encoded(item: EncodedCase) -> EncodedCase:
    case_id, data, person = item
    if not isinstance(data, bytes) or not isinstance(case_id, str):
        raise InvalidArgument("an EncodedCase holds a case id (str) and canonical bytes")
    try:
        case = encoding.decode(data, Case, "the EncodedCase's data")
    except CasError as exc:
        raise InvalidArgument(f"not a case: {exc.message}") from None
    check_format(case, "a case")
    if encoding.encode(case) != data or digest_of("case", data) != case_id or \
            case.person != person:
        raise InvalidArgument(f"EncodedCase {encoding.describe(case_id)} does not hold its own "
                              "canonical bytes, digest and person (make one with "
                              "cas.encode_case)")
    return _Encoded(case_id, data, person)


def read_cases_jsonl(stream: IO[bytes] | Iterable[bytes], source: str = "input") -> Iterator[EncodedCase]:
    """Cases from JSON Lines (one case object per line; blank lines skipped).

    Decoding is strict JSON, so the values can always be written canonically; a bad line is
    refused with its line number and the path of the offending field.
    """
    if not isinstance(source, str):
        raise InvalidArgument(f"source names the input: a string, not "
                              f"{encoding.describe(source)}")
    encoding.lines_of(stream, source)  # refuses what is no stream of lines, before any line
    decode, encode, most = _CASE_DECODER.decode, encoding.encode, encoding.MAX_DEPTH
    for lineno, line in enumerate(stream, 1):
        try:  # a line with more brackets than the depth limit takes the checked path
            case = decode(line) if line.count(b"[") + line.count(b"{") <= most else None
        except (msgspec.DecodeError, RecursionError, TypeError, AttributeError):
            if isinstance(line, (bytes, bytearray, str)) and (not line or line.isspace()):
                continue
            case = None
        if case is None or case.format != FORMAT:
            try:  # the slow path, only for a line refused: name the problem and its place
                case = check_format(encoding.parse_json(line, _CASE_DECODER), "the case")
            except CasError as exc:
                raise encoding.in_context(exc, f"{source} line {lineno}", line=lineno) \
                    from None
        data = encode(case)
        yield _Encoded(digest_of("case", data), data, case.person)


# -- opening ------------------------------------------------------------------------------
def _local_root(path: str) -> str:
    path = os.path.abspath(path)
    return path if os.path.basename(path) == REPO_DIR else os.path.join(path, REPO_DIR)


def init(path: str = ".") -> "Repository":
    """Create a repository in `path/.cas` (or at an `s3://BUCKET/PREFIX` URL); an existing one
    is refused."""
    path = _check_path(path, "path")
    if is_remote(path):
        return Repository.create(remote_backend(path))
    root = _local_root(path)
    if os.path.exists(root):
        raise AlreadyExists(f"a repository already exists at {root}", location=root)
    try:
        os.makedirs(root)
    except OSError as exc:  # a file on the way, a name too long: the path; else the storage
        bad_path = isinstance(exc, (NotADirectoryError, FileExistsError)) or \
            exc.errno == errno.ENAMETOOLONG
        raise (InvalidArgument if bad_path else Unavailable)(
            f"cannot create a repository at {root}: {exc.strerror}", location=root) from None
    backend = LocalBackend(root)
    config = RepoConfig(repository_id=secrets.token_hex(16), created_at=now())
    if not backend.put_if_absent(CONFIG_KEY, format_record_file(config)):
        raise AlreadyExists(f"a repository already exists at {root}", location=root)
    return Repository(backend)


def open(path: str = ".") -> "Repository":  # noqa: A001 - the API name is cas.open
    """Open the repository at `path/.cas` (or `path` itself if it is the .cas directory, or an
    `s3://BUCKET/PREFIX` URL)."""
    path = _check_path(path, "path")
    if is_remote(path):
        backend = remote_backend(path)
        if not backend.exists(CONFIG_KEY):
            raise NotFound(f"no cas repository at {path} (run `cas init {path}` to create one)",
                           location=path)
        return Repository(backend)
    root = _local_root(path)
    if not os.path.isfile(os.path.join(root, CONFIG_KEY)):
        raise NotFound(f"no cas repository at {root} (run `cas init` to create one)", location=root)
    return Repository(LocalBackend(root))


def find(start: str = ".") -> str:
    """The nearest directory at or above `start` holding a `.cas` repository."""
    start = _check_path(start, "start")
    here = os.path.abspath(start)
    while True:
        if os.path.isfile(os.path.join(here, REPO_DIR, CONFIG_KEY)):
            return here
        parent = os.path.dirname(here)
        if parent == here:
            raise NotFound(f"no cas repository in {os.path.abspath(start)} or any parent "
                           "(run `cas init`, or pass --repo / set CAS_REPO)")
        here = parent


class Repository:
    def __init__(self, backend, clock: Callable[[], str] = now,
                 time: Callable[[], float] = _time.time) -> None:
        self.backend = backend
        self.refs = RefsLog(backend)
        self.clock = clock  # the timestamps written into records
        # "Now" in seconds for leases and gc's grace period (a test can run gc in the future).
        self.time = time
        self.config: RepoConfig = parse_record_file(backend.get(CONFIG_KEY), RepoConfig, CONFIG_KEY)
        self.store = ObjectStore(backend, getattr(backend, "cache_dir", None),
                                 person_key(self.config.repository_id))
        from .erasure import recover
        recover(self)  # an erasure interrupted anywhere is finished before anything else

    @classmethod
    def create(cls, backend, clock: Callable[[], str] = now) -> "Repository":
        config = RepoConfig(repository_id=secrets.token_hex(16), created_at=clock())
        if not backend.put_if_absent(CONFIG_KEY, format_record_file(config)):
            raise AlreadyExists(f"a repository already exists at {backend.url}")
        return cls(backend, clock)

    @property
    def location(self) -> str:
        return self.backend.url

    def _trie(self, emit=None) -> Trie:
        return Trie(self._tree_node, emit)

    def _tree_node(self, digest: str):
        """A node of a tree some record names: one that is not stored is data loss."""
        try:
            return self.store.get(digest, (TreeLeaf, TreeNode))
        except NotFound:
            raise DataLoss(f"tree node {digest} is missing from the repository (run `cas "
                           "fsck`)", reason="OBJECT_MISSING", digest=digest) from None

    # -- datasets -------------------------------------------------------------------------
    def create_dataset(self, name: str, description: str = "", tags: Iterable[str] = (),
                       author: str | None = None) -> DatasetRecord:
        _check_name(name)
        encoding.check_text(description, "description")
        author = _check_author(author)
        record = DatasetRecord(name=name, revision=1, description=description,
                               tags=_check_tags(tags), author=author or default_author(),
                               edited_at=self.clock())
        if self.refs.read_dataset_tombstone(name) is not None:
            raise self._name_deleted(name)
        if not self.refs.append_meta(record):
            raise AlreadyExists(f"dataset {name!r} already exists", dataset=name)
        if self.refs.read_dataset_tombstone(name) is not None:  # deleted as we created it
            self.backend.delete(meta_key(name, 1))
            raise self._name_deleted(name)
        return record

    def _name_deleted(self, name: str) -> AlreadyExists:
        gone = self.refs.read_dataset_tombstone(name)
        when = f" ({gone.deleted_at} by {gone.author})" if gone is not None else ""
        return AlreadyExists(f"dataset {name!r} was deleted{when}; the name of a deleted "
                             "dataset cannot be used again", reason="DATASET_DELETED",
                             dataset=name)

    def _no_dataset(self, name: str) -> NotFound:
        """NotFound for a dataset that does not exist, saying so if it was deleted."""
        gone = self.refs.read_dataset_tombstone(name)
        if gone is not None:
            return NotFound(f"dataset {name!r} was deleted ({gone.deleted_at} by "
                            f"{gone.author})", reason="DATASET_DELETED", dataset=name)
        return NotFound(f"no dataset named {name!r}", dataset=name)

    def edit_dataset(self, name: str, description: str | None = None,
                     tags: Iterable[str] | None = None, author: str | None = None) -> DatasetRecord:
        encoding.check_text(description, "description", optional=True)
        author = _check_author(author)
        current = self.dataset(name)
        record = DatasetRecord(
            name=name, revision=current.revision + 1,
            description=current.description if description is None else description,
            tags=current.tags if tags is None else _check_tags(tags),
            author=author or default_author(), edited_at=self.clock())
        if not self.refs.append_meta(record):
            raise VersionConflict(name, current.revision, self.refs.meta_head(name))
        return record

    def dataset(self, name: str) -> DatasetRecord:
        """The dataset's current metadata (its latest revision)."""
        _check_name(name)
        head = self.refs.meta_head(name)
        if head == 0:
            raise self._no_dataset(name)
        return self.refs.read_meta(name, head)

    def dataset_history(self, name: str) -> list[DatasetRecord]:
        head = self.dataset(name).revision
        return [self.refs.read_meta(name, r) for r in range(1, head + 1)]

    def datasets(self) -> list[str]:
        return self.refs.dataset_names()

    # -- versions -------------------------------------------------------------------------
    def head(self, name: str) -> int:
        """The newest version number that is not deleted (0 if none). For writers choosing a
        base, not for reads."""
        self.dataset(name)
        return self.refs.head(name)

    def version(self, name: str, number: int) -> VersionRecord:
        _check_name(name)
        check_version_number(number)
        if not self.refs.dataset_exists(name):
            raise self._no_dataset(name)
        return self.refs.read_version(name, number)

    def versions(self, name: str, before: int | None = None, limit: int = 20) -> VersionsPage:
        """Version records newest first, starting below `before` (a version number)."""
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
            raise InvalidArgument(f"limit must be a positive integer, not "
                                  f"{encoding.describe(limit)}")
        if before is not None and (not isinstance(before, int) or isinstance(before, bool)
                                   or before < 1):
            raise InvalidArgument(f"before must be a positive integer (a version number), "
                                  f"not {encoding.describe(before)}")
        top = self.head(name) if before is None else min(before - 1, self.head(name))
        deleted = set(self.refs.deleted_numbers(name)) if top else set()  # skipped
        records: list[VersionRecord] = []
        n = top
        while n >= 1 and len(records) < limit:
            if n not in deleted:
                try:
                    records.append(self.refs.read_version(name, n))
                except NotFound as exc:
                    if exc.reason != "VERSION_DELETED":  # deleted since the listing: skip
                        raise
            n -= 1
        more = any(k not in deleted for k in range(n, 0, -1))
        nxt = records[-1].number if records and more else None
        return VersionsPage(records, nxt)

    def commit(self, name: str, *, base: int | None, add: Iterable[Any] = (),
               remove: Iterable[str] = (), message: str = "", author: str | None = None,
               operation: str = "commit", retry: bool = False) -> VersionRecord:
        """Seal version base+1 = (version `base` - remove) | add (numbers of deleted versions
        are skipped: a number is never used twice).

        `base` is None (or 0) for a dataset's first version. If another writer sealed base+1
        first, this raises VersionConflict naming the head, or with `retry` re-applies the
        same change on the new head. Objects are written before the version record claims
        its number, so a crash leaves only unreferenced objects.
        """
        self.dataset(name)
        if base is not None and base != 0:
            check_version_number(base, "base")
        base = base or 0
        _check_many(add, "add", "cases (dicts, cas.Case or EncodedCase)",
                    (Case, EncodedCase, str, bytes, bytearray, dict))
        remove = _check_strings(remove, "remove", "case ids")
        encoding.check_text(message, "message")
        encoding.check_text(operation, "operation")
        author = _check_author(author)
        removes = sorted({parse_digest(r, "case id") for r in remove})
        base = self._check_base(name, base, retry)
        author = author or default_author()
        with leases.writing(self, operation) as lease, \
                self.store.writer(lease.avoid_packs) as writer:
            ids = set()
            # The bulk loop allocates millions of small objects and frees none of them: the
            # cyclic garbage collector would only rescan them (about a fifth of ingest time).
            collecting = gc.isenabled()
            gc.disable()
            try:
                for item in add:
                    enc = encode_case(item)
                    writer.add_encoded("case", enc.data, enc.case_id, enc.person)
                    ids.add(enc.case_id)
            finally:
                if collecting:
                    gc.enable()
            both = ids.intersection(removes)
            if both:
                raise InvalidArgument(f"case {min(both)} is both added and removed",
                                      case_id=min(both))
            inserts = sorted(ids)
            for _ in claims.attempts(f"a version of dataset {name!r}", dataset=name):
                record = self._seal(name, base, inserts, removes, writer, message, author,
                                    operation)
                lease.check()
                if self.refs.append_version(record):
                    self.settle(record)
                    return record
                head = self.refs.head(name)
                if not retry:
                    raise VersionConflict(name, base, head)
                base = head

    def _check_base(self, name: str, base: int, retry: bool) -> int:
        """The base to build on: `base` itself, or with `retry` the head if `base` is stale."""
        if base and not self.backend.exists(version_key(name, base)):
            self.refs.read_version(name, base)  # NotFound, saying so if it was deleted
            raise NotFound(f"dataset {name!r} has no version {base}", dataset=name, version=base)
        if self.backend.exists(version_key(name, self.refs.next_number(name, base))):
            head = self.refs.head(name)
            if not retry:
                raise VersionConflict(name, base, head)
            return head
        return base

    def _seal(self, name, base, inserts, removes, writer, message, author, operation) -> VersionRecord:
        trie = self._trie(writer.add)
        retired = False
        if base:
            parent = self.refs.read_version(name, base)
            old_root, old_count = parent.content_digest, parent.item_count
            retired = self.refs.read_retirement(name, base) is not None
        else:
            old_root, old_count = EMPTY_ROOT, 0
        for case_id in removes:
            if not trie.contains(old_root, case_id):
                raise NotFound(f"case {case_id} is not in {name}@{base}", case_id=case_id,
                               dataset=name, version=base)
        if retired:  # a version cut from a retired one holds exactly the cases that are left
            adding = set(inserts)
            lost = [c for c in self.lost_cases(parent) if c not in adding]
            removes = sorted(set(removes).union(lost))
        if not base:
            root = trie.build(inserts)
        else:
            root = trie.apply(old_root, inserts, removes)
        if root == old_root and base and not retired:
            raise FailedPrecondition(f"nothing to seal: {name}@{base} already holds exactly "
                                     "this set of cases", reason="NO_CHANGES")
        count = trie.count(root)
        writer.add(trie.node(root))  # the root itself, even when it is the shared empty leaf
        writer.flush()  # objects and tree are stored before the record that names them
        return VersionRecord(
            dataset=name, number=self.refs.next_number(name, base), parent=base or None,
            content_digest=root,
            item_count=count, operation=operation, added=count - old_count + len(removes),
            removed=len(removes), author=author, sealed_at=self.clock(), message=message)

    def retirement(self, name: str, number: int):
        """The VersionRetirement of `name@number`, or None while it is ACTIVE."""
        self.version(name, number)
        return self.refs.read_retirement(name, number)

    def version_state(self, name: str, number: int) -> str:
        """`ACTIVE`, or `RETIRED` once the version can no longer be honoured (for ever)."""
        return RETIRED if self.retirement(name, number) is not None else ACTIVE

    def _active(self, name: str, number: int, what: str) -> VersionRecord:
        """The record of a version a read may use; a retired one is refused."""
        record = self.version(name, number)
        retired = self.refs.read_retirement(name, number)
        if retired is not None:
            raise refuse_retired(name, number, retired, what)
        return record

    def lost_cases(self, record: VersionRecord) -> list[str]:
        """The erased cases a version holds whose bytes are gone: a version cut from it leaves
        them out. (An erased case promoted again has its bytes back, and is not lost.)"""
        _check_record(record)
        from .erasure import erased_cases
        trie = self._trie()
        return sorted(c for c in erased_cases(self) if trie.contains(record.content_digest, c)
                      and not self.store.contains(c))

    def settle(self, record: VersionRecord) -> None:
        """After sealing: if an erasure retired the base while this version was being built on
        it, this version holds cases whose bytes are gone, and is retired the same way (the
        erasure's own final sweep covers versions sealed before it ends; this, the rest)."""
        _check_record(record)
        if not record.parent:
            return
        base = self.refs.read_retirement(record.dataset, record.parent)
        if base is None or base.erasure is None:
            return
        if self.lost_cases(record):
            from .retirement import write_erased
            write_erased(self.backend, record, base.erasure, base.author, self.clock())

    def retire(self, name: str, number: int, cause: str, note: str,
               author: str | None = None):
        """Retire `name@number` for an operator's cause (CONTAMINATED, INVALID_LABELS,
        OPERATOR_REQUEST; any letter case) with a note. Deletes nothing; permanent."""
        from .retirement import OPERATOR_CAUSES, retire
        if not isinstance(cause, str):
            raise InvalidArgument(f"unknown retirement cause {encoding.describe(cause)}; "
                                  "accepted: " + ", ".join(OPERATOR_CAUSES) + " (any letter "
                                  "case)", reason="CAUSE_INVALID", accepted=list(OPERATOR_CAUSES))
        author = _check_author(author)
        return retire(self, name, number, cause, note, _person(author), self.clock())

    def erase(self, person: str, confirm_token: str | None = None,
              author: str | None = None, wait: float | None = None, progress=None):
        """Preview (no token: a dict with `confirm_token`) or carry out the erasure of a
        person's cases, runs and reviews; returns the Erasure record. It first waits (up to
        `wait` seconds, telling `progress(stage, done, total)`) for writers that started
        before it."""
        from .erasure import erase
        if not isinstance(person, str):
            raise InvalidArgument(f"a person id is a string, not {encoding.describe(person)}")
        encoding.check_text(person, "person id")
        if confirm_token is not None and (not isinstance(confirm_token, str)
                                          or not _TOKEN_RE.match(confirm_token)):
            raise InvalidArgument(f"{encoding.describe(confirm_token)} is not a confirm token "
                                  "(ct- and 32 hex digits)")
        _check_seconds(wait, "wait", optional=True)
        _check_progress(progress)
        author = _check_author(author)
        return erase(self, person, confirm_token, _person(author), self.clock(), wait,
                     progress)

    def erasures(self) -> list:
        from .erasure import erasures
        return erasures(self)

    def gc(self, dry_run: bool = False, grace: float = 86400.0, wait: float | None = None,
           progress=None):
        """Delete objects nothing reaches, in packs older than `grace` seconds, once the
        writers that started before it are done (waiting up to `wait` seconds)."""
        from .gc import collect
        if isinstance(grace, str):
            if not _GRACE_RE.match(grace):
                raise InvalidArgument(f"invalid grace period {encoding.describe(grace)}; use "
                                      "seconds or a number with s, m, h or d, e.g. 0, 90, 15m, "
                                      "24h, 7d")
        else:
            _check_seconds(grace, "grace period")
        _check_seconds(wait, "wait", optional=True)
        _check_progress(progress)
        return collect(self, dry_run=dry_run, grace=grace, wait=wait, progress=progress)

    # -- reads of an exact version ---------------------------------------------------------
    def items(self, name: str, number: int, after: str | None = None,
              limit: int = 100) -> ItemsPage:
        """One page of case ids of `name@number` in id order, strictly after `after`.

        `limit` is 1..MAX_PAGE (500); anything else is refused, never clamped. `after` need
        not be a member: the page starts strictly after it in id order."""
        _check_page_limit(limit)
        _check_digest(after, "cursor", optional=True)
        record = self._active(name, number, "listing its cases")
        after = parse_digest(after, "cursor") if after is not None else None
        ids = self._trie().page(record.content_digest, after, limit + 1)
        more = len(ids) > limit
        ids = ids[:limit]
        return ItemsPage(ids, ids[-1] if more else None)

    def case(self, name: str, number: int, case_id: str) -> Case:
        """A case of `name@number`; refused if the version does not hold it."""
        _check_digest(case_id, "case id")
        record = self._active(name, number, "reading its cases")
        case_id = parse_digest(case_id, "case id")
        if not self._trie().contains(record.content_digest, case_id):
            raise NotFound(f"case {case_id} is not in {name}@{number}", case_id=case_id,
                           dataset=name, version=number)
        try:
            return self.store.get(case_id, Case)
        except NotFound:  # the version holds it: its absence is damage, not an answer
            raise DataLoss(f"case {case_id} of {name}@{number} is missing from the repository "
                           "(run `cas fsck`)", reason="OBJECT_MISSING", case_id=case_id,
                           dataset=name, version=number) from None

    def object(self, digest: str) -> Object:
        """Any stored object by digest, verified."""
        _check_digest(digest, "digest")
        return self.store.get(parse_digest(digest))

    def diff(self, name: str, old: int, new: int, new_dataset: str | None = None) -> Diff:
        if new_dataset is not None:
            _check_name(new_dataset)
        a = self._active(name, old, "listing its cases")
        b = self._active(new_dataset or name, new, "listing its cases")
        return Diff(*self._trie().diff(a.content_digest, b.content_digest))

    def diff_page(self, name: str, old: int, new: int, cursor: str | None = None,
                  limit: int = 100, new_dataset: str | None = None) -> DiffPage:
        """One page of the changes from `name@old` to `new_dataset or name`@`new`: the
        id-ordered list of added and removed ids, strictly after `cursor`, up to `limit`
        (1..500) changes. Costs O(page x depth), not O(diff)."""
        _check_page_limit(limit)
        _check_digest(cursor, "cursor", optional=True)
        if new_dataset is not None:
            _check_name(new_dataset)
        a = self._active(name, old, "listing its cases")
        b = self._active(new_dataset or name, new, "listing its cases")
        cursor = parse_digest(cursor, "cursor") if cursor is not None else None
        added: list[str] = []
        removed: list[str] = []
        last = None
        changes = self._trie().iter_diff(a.content_digest, b.content_digest, cursor)
        for n, (case_id, is_added) in enumerate(changes):
            if n == limit:  # one change beyond the page: there is more
                return DiffPage(added, removed, last)
            (added if is_added else removed).append(case_id)
            last = case_id
        return DiffPage(added, removed, None)

    def prove(self, name: str, number: int, case_id: str) -> Proof:
        """An inclusion proof of `case_id` in `name@number`; refused if the version does not
        hold it (there is nothing to prove)."""
        _check_digest(case_id, "case id")
        record = self._active(name, number, "proving its cases")
        case_id = parse_digest(case_id, "case id")
        trie = self._trie()
        if not trie.contains(record.content_digest, case_id):
            raise NotFound(f"case {case_id} is not in {name}@{number}", case_id=case_id,
                           dataset=name, version=number)
        return trie.prove(record.content_digest, case_id)

    # -- recorded runs, reviews, promotion (cas/runs.py, reviews.py, proposals.py) -----------
    @property
    def run_index(self):
        if getattr(self, "_run_index", None) is None:
            from .runs import RunIndex
            self._run_index = RunIndex(self.backend)
        return self._run_index

    @property
    def review_index(self):
        if getattr(self, "_review_index", None) is None:
            from .reviews import ReviewIndex
            self._review_index = ReviewIndex(self.backend)
        return self._review_index

    def import_runs(self, source, author: str | None = None) -> "RunImportResult":
        """Import runs from a binary JSON Lines stream (or a list of dicts): all or nothing.
        An identical run again is a no-op; a known run id with other content is refused."""
        from .runs import import_runs, parse_run, read_runs_jsonl
        author = _check_author(author)
        if isinstance(source, (list, tuple)):
            runs = [parse_run(obj, f"$[{i}]") for i, obj in enumerate(source)]
        else:
            name = getattr(source, "name", "input")
            runs = read_runs_jsonl(source, name if isinstance(name, str) else "input")
        new, unchanged = import_runs(self, runs, author or default_author(), self.clock())
        return RunImportResult(new, unchanged)

    def runs(self) -> list[str]:
        return sorted(self.run_index.all())

    def run(self, run_id: str):
        from .runs import get_run
        if not isinstance(run_id, str):
            raise InvalidArgument(f"a run id is a string, not {encoding.describe(run_id)}")
        return get_run(self, run_id)

    def add_reviews(self, requests: list, confirm_token: str | None = None,
                    reviewer: str | None = None) -> dict:
        """Preview (no token) or save (the preview's token) reviews of runs by the configured
        person. Each request is {"run_id", "metric", "label"}."""
        import msgspec as _m

        from .reviews import ReviewRequest, check_token, plan_reviews, save_reviews
        from .userconfig import require_person
        _check_many(requests, "requests", 'reviews ({"run_id", "metric", "label"})',
                    (str, bytes, bytearray, dict, ReviewRequest))
        encoding.check_text(confirm_token, "confirm token", optional=True)
        encoding.check_text(reviewer, "reviewer", optional=True)
        reviewer = reviewer or require_person("a review")
        try:
            reqs = [r if isinstance(r, ReviewRequest) else _m.convert(r, ReviewRequest)
                    for r in requests]
        except _m.ValidationError as exc:
            raise InvalidArgument(f"a review is {{run_id, metric, label}}: {exc}") from None
        rows, token = plan_reviews(self, reqs, reviewer)
        if not check_token(confirm_token, token):
            return {"confirm_token": token, "reviews": rows}
        saved = save_reviews(self, rows, self.clock(), token)
        return {"annotation_ids": [r.annotation_id for r in saved],
                "reviews": [msgspec.to_builtins(r) for r in saved]}

    def reviews(self, run_id: str) -> list:
        self.run(run_id)
        return self.review_index.of_run(run_id)

    def settings(self):
        from .proposals import current_settings
        return current_settings(self)

    def set_content_policy(self, withheld: list[str], author: str | None = None):
        from .proposals import set_withheld
        withheld = _check_strings(withheld, "withheld", "content classes")
        author = _check_author(author)
        return set_withheld(self, withheld, author or default_author(), self.clock())

    def promote(self, name: str, subjects, idempotency_key: str,
                author: str | None = None) -> dict:
        """Stage a promotion and return its preview (with `confirm_token`); seals nothing."""
        from .proposals import convert_subjects, stage_promotion
        author = _check_author(author)
        subs = convert_subjects(subjects, "subjects")
        return stage_promotion(self, name, subs, idempotency_key, author or default_author(),
                               self.clock())

    def remove(self, name: str, item_ids: list[str], idempotency_key: str,
               author: str | None = None) -> dict:
        from .proposals import stage_removal
        item_ids = _check_strings(item_ids, "item_ids", "case ids")
        author = _check_author(author)
        return stage_removal(self, name, item_ids, idempotency_key,
                             author or default_author(), self.clock())

    def seal(self, name: str, confirm_token: str, author: str | None = None,
             message: str = "") -> "SealResult":
        from .proposals import seal
        _check_name(name)
        encoding.check_text(confirm_token, "confirm token")
        encoding.check_text(message, "message")
        author = _check_author(author)
        record, already = seal(self, name, confirm_token, author or default_author(), message)
        return SealResult(record, already)

    def provenance(self, name: str, number: int) -> list:
        """Per case a version promoted: the run, the review annotation, the reviewer and the
        review time (empty for versions not sealed by a promotion)."""
        from .objects import Provenance
        record = self._active(name, number, "reading its provenance")
        if record.provenance is None:
            return []
        return self.store.get(record.provenance, Provenance).entries

    # -- pins, scores, experiments and deletion (cas/scores.py) ---------------------------
    def pin(self, name: str, number: int):
        """A `cas.Pin` of an ACTIVE version: dataset, version and its content_digest."""
        from .scores import pin
        return pin(self, name, number)

    def resolve_pin(self, pin):
        """The VersionRecord a pin (or its string) names, re-read; refused if its digest no
        longer matches (PIN_MISMATCH) or the version was deleted (NotFound)."""
        from .scores import resolve_pin
        return resolve_pin(self, pin)

    def record_score(self, pin, *, metric: str, value, item: str | None = None,
                     experiment: str | None = None, author: str | None = None):
        """Store one score citing `pin`; returns it as a RecordedScore (with `score_id`)."""
        return self.record_scores(pin, [{"metric": metric, "value": value, "item": item,
                                         "experiment": experiment}], author=author)[0]

    def record_scores(self, pin, scores: list, author: str | None = None) -> list:
        """Store many scores citing `pin` as one batch (dicts of metric, value, item,
        experiment); all are checked before any is stored."""
        from .scores import record_scores
        author = _check_author(author)
        return record_scores(self, pin, scores, _person(author), self.clock())

    def scores(self, name: str, version: int | None = None) -> list:
        """The scores of a dataset, or of one version, in the order recorded."""
        from .scores import scores
        return scores(self, name, version)

    def create_experiment(self, name: str, version: int, experiment_name: str,
                          author: str | None = None):
        from .scores import create_experiment
        author = _check_author(author)
        return create_experiment(self, name, version, experiment_name, _person(author),
                                 self.clock())

    def experiments(self, name: str) -> list:
        from .scores import experiments
        return experiments(self, name)

    def delete_version(self, name: str, number: int, author: str | None = None):
        """Delete a version no score or experiment cites; its number is never used again."""
        from .scores import delete_version
        author = _check_author(author)
        return delete_version(self, name, number, _person(author), self.clock())

    def delete_dataset(self, name: str, author: str | None = None):
        """Delete a dataset none of whose versions is cited; its name is never used again."""
        from .scores import delete_dataset
        _check_name(name)
        author = _check_author(author)
        return delete_dataset(self, name, _person(author), self.clock())

    def fsck(self, progress: Callable[[str, int, int], None] | None = None):
        from .fsck import check
        _check_progress(progress)
        return check(self, progress)


def _check_progress(progress) -> None:
    """A progress callback is None or a function of (stage, done, total)."""
    if progress is None:
        return
    try:
        if not callable(progress):
            raise TypeError
        inspect.signature(progress).bind("", 0, 0)
    except TypeError:
        raise InvalidArgument(f"progress must be a function of (stage, done, total), "
                              f"not {encoding.describe(progress)}") from None
    except ValueError:
        pass  # no signature to check (some builtins): trusted


def _check_page_limit(limit: Any) -> None:
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_PAGE:
        raise InvalidArgument(f"limit must be a positive integer from 1 to {MAX_PAGE}, "
                              f"not {encoding.describe(limit)}", minimum=1, maximum=MAX_PAGE)


def _person(author: str | None) -> str:
    """Who records a score or deletes: given, else the configured person, else the login."""
    from .userconfig import configured_person
    return author or configured_person() or default_author()


def _check_tags(tags: Iterable[str]) -> list[str]:
    if isinstance(tags, str):
        raise InvalidArgument("tags must be a list of strings, not one string")
    tags = _check_strings(tags, "tags", "strings")
    for t in tags:
        problem = encoding.text_problem(t, 64)
        if problem is not None:
            raise InvalidArgument(f"invalid tag {encoding.describe(t)}: 1-64 printable "
                                  f"characters; it {problem}")
    return sorted(set(tags))


# -- argument checks: every public method refuses a bad argument with a CasError -------------
MAX_VERSION = 9_999_999_999  # version numbers are written with 10 digits in keys
_TOKEN_RE = re.compile(r"ct-[0-9a-f]{32}\Z")
_GRACE_RE = re.compile(r"\s*[0-9]{1,12}[smhdSMHD]?\s*\Z")


def check_version_number(number: Any, what: str = "version") -> int:
    """A version number: an int from 1 to MAX_VERSION (a bool, a float or a digit string is
    refused; the CLI reads only ASCII digits)."""
    if not isinstance(number, int) or isinstance(number, bool) or number < 1:
        raise InvalidArgument(f"{what} must be a positive integer, not "
                              f"{encoding.describe(number)}")
    if number > MAX_VERSION:
        raise InvalidArgument(f"{what} must be a positive integer of at most 10 digits (up to "
                              f"{MAX_VERSION}), not {encoding.describe(number)}")
    return number


def _check_path(path: Any, what: str) -> str:
    if isinstance(path, os.PathLike):
        path = os.fspath(path)
    if not isinstance(path, str):
        raise InvalidArgument(f"{what} must be a path (a str or os.PathLike), not "
                              f"{encoding.describe(path)}")
    if "\x00" in path:
        raise InvalidArgument(f"{what} {encoding.describe(path)} holds a NUL character")
    return encoding.check_text(path, what)


def _check_name(name: Any) -> str:
    if not isinstance(name, str):
        shown = encoding.describe(name)
        raise InvalidArgument(f"invalid dataset name {shown}: a dataset name is a string of "
                              "1-128 characters from a-z, 0-9, '.', '_', '-'", name=shown)
    return check_dataset_name(name)


def _check_digest(value: Any, what: str, optional: bool = False) -> None:
    if value is None and optional:
        return
    if not isinstance(value, str):
        shown = encoding.describe(value)
        raise InvalidArgument(f"{what} {shown} is not a digest; expected 'b3:' followed by 64 "
                              "hex digits", value=shown)


def _check_author(author: Any) -> str | None:
    return encoding.check_text(author, "author", optional=True)


def _check_record(record: Any) -> None:
    if not isinstance(record, VersionRecord):
        raise InvalidArgument(f"expected a cas.VersionRecord, not {encoding.describe(record)}")


def _check_many(values: Any, what: str, items: str, single: tuple) -> None:
    """`values` is an iterable of items (not one item, a string or a dict by mistake)."""
    if isinstance(values, single) or not hasattr(values, "__iter__"):
        raise InvalidArgument(f"{what} must be an iterable of {items}, not "
                              f"{encoding.describe(values)}")


def _check_strings(values: Any, what: str, items: str) -> list[str]:
    _check_many(values, what, items, (str, bytes, bytearray, dict))
    out = list(values)
    for v in out:
        if not isinstance(v, str):
            raise InvalidArgument(f"{what} must be an iterable of {items} (strings), but holds "
                                  f"{encoding.describe(v)}")
    return out


def _check_seconds(value: Any, what: str, optional: bool = False) -> None:
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            not 0 <= value <= 10 ** 9:  # NaN and a bigint that overflows a float too
        raise InvalidArgument(f"{what} must be a number of seconds from 0 to 10**9, not "
                              f"{encoding.describe(value)}")
