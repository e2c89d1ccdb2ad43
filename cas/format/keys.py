"""The key layout: one format/parse pair per key family of the repository (docs/format.md, 5)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import NamedTuple

from cas.digest import idempotency_claim_name

CONFIG = "config"
PACKS = "packs/"
PERSONS = "persons/"
SHARDS = f"{PERSONS}shards/"
PERSON_TABLES = f"{PERSONS}packs/"
DATASETS = "datasets/"
IMPORTS = "runs/imports/"
ADMISSIONS = "runs/admissions/"
REVIEWS = "reviews/"
SETTINGS = "settings/"
ELIGIBILITY = "eligibility/"
METRICS = "metrics/"
LEASES = "leases/"
ERASURES = "erasures/"
PENDING = f"{ERASURES}pending/"
LOG = f"{ERASURES}log/"
LOG_INDEXES = "indexes/"  # the keyed indexes of the run and review logs (storage/log_index)
ROLES = ("writer", "gc", "erasure")  # the lease roles, told apart by the key alone
CITATION_LOGS = ("scores", "experiments")
# Staging files (docs/format.md 9) live in a local directory's `~tmp/`, which holds no key: a
# staging file this old belongs to no write in flight, whatever its name says.
STAGING_AGE = 60.0

_HEX = frozenset("0123456789abcdef")
_SEGMENT = re.compile(r"[A-Za-z0-9._-]+\Z")
_NUMBER = re.compile(r"[0-9]{10}\Z")  # ASCII digits only (str.isdigit accepts '²')
_TOKEN = re.compile(r"ct-[0-9a-f]{32}\Z")


# -- the parts keys are made of -------------------------------------------------------------
def format_number(n: int) -> str:
    """A number in a key: 10 decimal digits, so listing order is number order."""
    return f"{n:010d}"


def parse_number(text: str) -> int | None:
    return int(text) if isinstance(text, str) and _NUMBER.match(text) else None


def numbers(keys: Iterable[str]) -> list[int]:
    """The sorted numbers of the keys of one numbered log (others ignored): a listing's hint."""
    out = []
    for key in keys:
        n = parse_number(key.rpartition("/")[2])
        if n is not None:
            out.append(n)
    return sorted(out)


def _is_hex(text: str, length: int) -> bool:
    return len(text) == length and _HEX.issuperset(text)


def _segment(text: str) -> bool:
    return bool(_SEGMENT.match(text)) and text not in (".", "..")


def _tail(key, prefix: str) -> str | None:
    """What follows `prefix` in `key` if it is one segment, else None."""
    if not isinstance(key, str) or not key.startswith(prefix):
        return None
    rest = key[len(prefix):]
    return rest if _segment(rest) else None


def split_dataset_key(key) -> tuple[str, str, str | None] | None:
    """(name, group, tail) of a key `datasets/<name>/<group>/<tail>`, tail None for
    `datasets/<name>/<group>`: the shape every dataset family shares, its parts unchecked."""
    if not isinstance(key, str) or not key.startswith(DATASETS):
        return None
    parts = key[len(DATASETS):].split("/")
    if len(parts) == 2 and all(parts):
        return parts[0], parts[1], None
    if len(parts) == 3 and all(parts):
        return parts[0], parts[1], parts[2]
    return None


def dataset_of(key) -> str | None:
    """The dataset a key under `datasets/` belongs to (its first segment), whatever follows."""
    if not isinstance(key, str) or not key.startswith(DATASETS):
        return None
    name = key[len(DATASETS):].partition("/")[0]
    return name or None


def last_segment(key: str) -> str:
    """What follows a key's last `/`: the name a record of a key of no known form gives itself
    (fsck reads such a key under a family's prefix all the same, and reports it)."""
    return key.rpartition("/")[2]


def split_person_index_key(key) -> tuple[str, str] | None:
    """(shard, pack id) of a key `persons/<shard>/<pack id>` as its parts stand, unchecked
    (fsck checks them against the record); None for a key of another shape."""
    if not isinstance(key, str) or not key.startswith(PERSONS):
        return None
    shard, slash, pid = key[len(PERSONS):].partition("/")
    return (shard, pid) if slash and shard and pid and "/" not in pid else None


def _dataset_key(key, group: str) -> tuple[str, str] | None:
    """(name, tail) of a well-formed `datasets/<name>/<group>/<tail>` key."""
    split = split_dataset_key(key)
    if split is None or split[1] != group or split[2] is None:
        return None
    name, _, tail = split
    return (name, tail) if _segment(name) and _segment(tail) else None


def _numbered(group: str):
    def parse(key) -> tuple[str, int] | None:
        found = _dataset_key(key, group)
        n = parse_number(found[1]) if found else None
        return None if n is None else (found[0], n)
    parse.__name__ = f"parse_{group}_key"
    parse.__doc__ = f"(dataset, number) of a `datasets/<name>/{group}/<n>` key, or None."
    return parse


def _log(prefix: str):
    def parse(key) -> tuple[int] | None:
        n = parse_number(_tail(key, prefix) or "")
        return None if n is None else (n,)
    parse.__name__ = f"parse_{prefix.rstrip('/').replace('/', '_')}_key"
    parse.__doc__ = f"(number,) of a `{prefix}<n>` key, or None."
    return parse


# -- config and objects -----------------------------------------------------------------------
def config_key() -> str:
    return CONFIG


def parse_config_key(key) -> tuple[()] | None:
    return () if key == CONFIG else None


def pack_key(pid: str) -> str:
    return f"{PACKS}{pid}.pack"


def index_key(pid: str) -> str:
    return f"{PACKS}{pid}.idx"


def multi_index_key(checksum: str) -> str:
    return f"{PACKS}{checksum}.midx"


def _pack_file(ext: str):
    def parse(key) -> tuple[str] | None:
        if not isinstance(key, str) or not key.endswith(ext):  # (a listing's other files)
            return None
        tail = _tail(key, PACKS)
        if tail is None or not _is_hex(tail[:-len(ext)], 64):
            return None
        return (tail[:-len(ext)],)
    parse.__name__ = f"parse_{ext[1:]}_key"
    parse.__doc__ = f"(id,) of a `packs/<64 hex digits>{ext}` key, or None."
    return parse


parse_pack_key = _pack_file(".pack")
parse_index_key = _pack_file(".idx")
parse_multi_index_key = _pack_file(".midx")


def person_shard(person: str) -> str:
    """The shard of a keyed person digest (`pk:<hex>`): its first two hex digits."""
    return person[3:5]


def person_index_key(shard: str, pid: str) -> str:
    """The person index of pack `pid` for the people whose keyed digest starts with `shard`."""
    return f"{PERSONS}{shard}/{pid}"


def parse_person_index_key(key) -> tuple[str, str] | None:
    """(shard, pack id) of a person index key, or None."""
    found = split_person_index_key(key)
    if found is None or not _is_hex(found[0], 2) or not _is_hex(found[1], 64):
        return None
    return found


def person_shards_key(pid: str, shards: Iterable[str]) -> str:
    """The record of which person index files pack `pid` has. Its name carries the same set as
    a 256-bit map (bit s set for shard s), so that one listing tells an erasure every pack's
    shards without reading a record per pack."""
    return f"{SHARDS}{pid}.{shard_map(shards):064x}"


def shard_map(shards: Iterable[str]) -> int:
    """A set of shards as the 256-bit map a person table's or person-shards record's key
    carries."""
    bits = 0
    for shard in shards:
        bits |= 1 << int(shard, 16)
    return bits


def parse_person_shards_key(key) -> tuple[str, set[str]] | None:
    """(pack id, shards) of a person-shards key, or None if `key` is not one."""
    return _with_shards(split_map_key(key, SHARDS))


def person_table_key(pid: str, shards: Iterable[str]) -> str:
    """The person table of pack `pid` (cas/storage/person_index.py), named with the map of the
    shards it has rows in, as a person-shards record is."""
    return f"{PERSON_TABLES}{pid}.{shard_map(shards):064x}"


def parse_person_table_key(key) -> tuple[str, set[str]] | None:
    """(pack id, shards) of a person table key, or None if `key` is not one."""
    return _with_shards(split_map_key(key, PERSON_TABLES))


def split_map_key(key, prefix: str) -> tuple[str, int] | None:
    """(pack id, map) of a key `<prefix><pack id>.<map>` (a person table's or a person-shards
    record's), or None: what a reader of many keys needs without a set per key."""
    tail = _tail(key, prefix)
    if tail is None:
        return None
    pid, _, bitmap = tail.partition(".")
    if not _is_hex(pid, 64) or not _is_hex(bitmap, 64):
        return None
    return pid, int(bitmap, 16)


SHARD_NAMES = [f"{s:02x}" for s in range(256)]  # every shard, in order


def _with_shards(found: tuple[str, int] | None) -> tuple[str, set[str]] | None:
    if found is None:
        return None
    pid, bits = found
    return pid, {SHARD_NAMES[s] for s in range(bits.bit_length()) if bits >> s & 1}


# -- datasets -------------------------------------------------------------------------------
def meta_key(dataset: str, revision: int) -> str:
    return f"{DATASETS}{dataset}/meta/{format_number(revision)}"


def version_key(dataset: str, number: int) -> str:
    return f"{DATASETS}{dataset}/versions/{format_number(number)}"


def deleted_key(dataset: str, number: int) -> str:
    """The tombstone of a deleted version: its number stays used forever."""
    return f"{DATASETS}{dataset}/deleted/{format_number(number)}"


def retired_key(dataset: str, number: int) -> str:
    """The retirement of a version: written once, never removed."""
    return f"{DATASETS}{dataset}/retired/{format_number(number)}"


def score_batch_key(dataset: str, number: int) -> str:
    return f"{DATASETS}{dataset}/scores/{format_number(number)}"


def withdrawal_key(dataset: str, batch: int) -> str:
    """The withdrawal of score batch `batch` (at most one: created once)."""
    return f"{DATASETS}{dataset}/withdrawn/{format_number(batch)}"


def experiment_key(dataset: str, number: int) -> str:
    return f"{DATASETS}{dataset}/experiments/{format_number(number)}"


def citation_key(dataset: str, log: str, number: int) -> str:
    """The key of entry `number` of a citation log ("scores" or "experiments")."""
    return (score_batch_key if log == "scores" else experiment_key)(dataset, number)


def citation_key_of(dataset: str, log: str) -> Callable[[int], str]:
    return lambda n: citation_key(dataset, log, n)


def cassette_log_key(dataset: str, number: int) -> str:
    """Batch `number` of the cassettes recorded for the cases of `dataset` (docs/suites.md)."""
    return f"{DATASETS}{dataset}/cassettes/{format_number(number)}"


parse_meta_key = _numbered("meta")
parse_cassette_log_key = _numbered("cassettes")
parse_version_key = _numbered("versions")
parse_deleted_key = _numbered("deleted")
parse_retired_key = _numbered("retired")
parse_withdrawal_key = _numbered("withdrawn")
parse_score_batch_key = _numbered("scores")
parse_experiment_key = _numbered("experiments")


def tombstone_key(dataset: str) -> str:
    """The tombstone of a deleted dataset: its name can never be created again."""
    return f"{DATASETS}{dataset}/tombstone"


def parse_tombstone_key(key) -> tuple[str] | None:
    split = split_dataset_key(key)
    if split is None or split[1:] != ("tombstone", None) or not _segment(split[0]):
        return None
    return (split[0],)


def proposal_key(dataset: str, token: str) -> str:
    return f"{DATASETS}{dataset}/proposals/{token}"


def parse_proposal_key(key) -> tuple[str, str] | None:
    """(dataset, token) of a staged proposal's key; a token is `ct-` and 32 hex digits."""
    found = _dataset_key(key, "proposals")
    return found if found and _TOKEN.match(found[1]) else None


def claim_key(dataset: str, hexdigest: str) -> str:
    """The idempotency claim stored under the 64 hex digits naming its request key."""
    return f"{DATASETS}{dataset}/keys/{hexdigest}"


def idempotency_key(dataset: str, request_key: str) -> str:
    """The idempotency claim of a request key (its digest names it: any text is a key)."""
    return claim_key(dataset, idempotency_claim_name(request_key))


def parse_claim_key(key) -> tuple[str, str] | None:
    """(dataset, 64 hex digits) of an idempotency claim's key, or None."""
    found = _dataset_key(key, "keys")
    return found if found and _is_hex(found[1], 64) else None


# -- repository-wide logs, leases and erasures ----------------------------------------------
def import_key(number: int) -> str:
    return f"{IMPORTS}{format_number(number)}"


def admission_key(number: int) -> str:
    """The erased persons import `number` admits again (written before that import)."""
    return f"{ADMISSIONS}{format_number(number)}"


def review_batch_key(number: int) -> str:
    return f"{REVIEWS}{format_number(number)}"


def eligibility_key(revision: int) -> str:
    return f"{ELIGIBILITY}{format_number(revision)}"


def metrics_key(revision: int) -> str:
    return f"{METRICS}{format_number(revision)}"


def settings_key(revision: int) -> str:
    return f"{SETTINGS}{format_number(revision)}"


def log_segment_key(log: str, lo: int, hi: int, checksum: str) -> str:
    """The segment of log `log` ("runs" or "reviews") over its records (lo, hi], named by its
    checksum: two writers building the same range never contend for one key."""
    return f"{LOG_INDEXES}{log}/{format_number(lo)}-{format_number(hi)}.{checksum}"


def parse_log_segment_key(key) -> tuple[str, int, int, str] | None:
    """(log, lo, hi, checksum) of a log segment key, or None."""
    if not isinstance(key, str) or not key.startswith(LOG_INDEXES):
        return None
    log, slash, name = key[len(LOG_INDEXES):].partition("/")
    span, dot, checksum = name.partition(".")
    lo, dash, hi = span.partition("-")
    lo_n, hi_n = parse_number(lo), parse_number(hi)
    if log not in ("runs", "reviews") or not (slash and dot and dash) or lo_n is None or \
            hi_n is None or not lo_n < hi_n or not _is_hex(checksum, 64):
        return None
    return log, lo_n, hi_n, checksum


parse_import_key = _log(IMPORTS)
parse_admission_key = _log(ADMISSIONS)
parse_review_batch_key = _log(REVIEWS)
parse_settings_key = _log(SETTINGS)
parse_eligibility_key = _log(ELIGIBILITY)
parse_metrics_key = _log(METRICS)


def lease_key(role: str, lease_id: str) -> str:
    return f"{LEASES}{role}.{lease_id}"


def parse_lease_key(key) -> tuple[str, str] | None:
    """(role, id) of a lease key, or None if `key` is not one."""
    tail = _tail(key, LEASES)
    if tail is None:
        return None
    role, dot, lease_id = tail.partition(".")
    if role not in ROLES or not dot or not lease_id:
        return None
    return role, lease_id


def pending_key(erasure_id: str) -> str:
    return f"{PENDING}{erasure_id}"


def log_key(erasure_id: str) -> str:
    return f"{LOG}{erasure_id}"


def parse_pending_key(key) -> tuple[str] | None:
    tail = _tail(key, PENDING)
    return None if tail is None else (tail,)


def parse_log_key(key) -> tuple[str] | None:
    tail = _tail(key, LOG)
    return None if tail is None else (tail,)


# -- the families -----------------------------------------------------------------------------
# How a record at a key may change, which decides what a mirror must compare:
IMMUTABLE = "immutable"  # same key, same bytes for ever (content-addressed, or never reused)
REDACTED = "redacted"    # replaced only by an erasure's redaction (section 9, erasure step 8)
# may be deleted and created again with other bytes (a withdrawn tombstone, the claim of a key
# staged again after gc) or be written at either end on its own: a mirror compares the copies
VOLATILE = "volatile"
LOCAL = "local"          # work in progress at one location (leases, plans): never mirrored

# A mirror's copy steps (docs/format.md 9, mirror rules); 0: not copied.
M_CONFIG, M_RETIRED, M_OBJECTS, M_LOGS, M_ERASURES, M_DATASETS = 1, 2, 3, 4, 5, 6
M_LOG_INDEXES = 7  # copied right after the logs (M_LOGS), as bytes, not as records


class Family(NamedTuple):
    """One key family of docs/format.md section 5: what fsck checks it as, how mirror copies it."""

    name: str
    prefix: str            # every key of the family starts with it
    parse: Callable        # key -> parts, or None for a key not of the family
    format: Callable       # parts -> key
    change: str            # IMMUTABLE, REDACTED, VOLATILE or LOCAL
    step: int              # the mirror step that copies it
    rank: int = 0          # order of the dataset families at one dataset (and one number)
    numbered: bool = False  # a log numbered 1, 2, 3...: mirror compares its newest common entry
    outlives: bool = False  # kept by a deleted dataset (its tombstone and citation logs)
    # The keys fsck's checker of the family takes (reporting a malformed one itself, with its
    # own message) when that is more than the well-formed ones; None: those `parse` accepts.
    loose: Callable | None = None

    def claims(self, key: str) -> bool:
        return (self.loose or self.parse)(key) not in (None, False)


def _under(prefix: str, ext: str = "") -> Callable[[str], bool]:
    return lambda key: key.startswith(prefix) and key.endswith(ext)


def _group(group: str) -> Callable[[str], bool]:
    """Any `datasets/<name>/<group>/<tail>` key, its tail unchecked."""
    def loose(key: str) -> bool:
        split = split_dataset_key(key)
        return split is not None and split[1] == group and split[2] is not None
    return loose


FAMILIES: tuple[Family, ...] = (
    Family("config", CONFIG, parse_config_key, config_key, IMMUTABLE, M_CONFIG),
    Family("retirement", DATASETS, parse_retired_key, retired_key, VOLATILE, M_RETIRED, 3,
           loose=_group("retired")),
    Family("person.shards", SHARDS, parse_person_shards_key, person_shards_key, IMMUTABLE,
           M_OBJECTS, loose=_under(SHARDS)),
    Family("person.table", PERSON_TABLES, parse_person_table_key, person_table_key, IMMUTABLE,
           M_OBJECTS, loose=_under(PERSON_TABLES)),
    Family("person.index", PERSONS, parse_person_index_key, person_index_key, IMMUTABLE,
           M_OBJECTS, loose=lambda k: k.startswith(PERSONS)
           and not k.startswith((SHARDS, PERSON_TABLES))),
    Family("pack", PACKS, parse_pack_key, pack_key, IMMUTABLE, M_OBJECTS,
           loose=_under(PACKS, ".pack")),
    Family("pack.index", PACKS, parse_index_key, index_key, IMMUTABLE, M_OBJECTS,
           loose=_under(PACKS, ".idx")),
    Family("multi.index", PACKS, parse_multi_index_key, multi_index_key, IMMUTABLE, M_OBJECTS,
           loose=_under(PACKS, ".midx")),
    # before the import it speaks for, so a copy never holds an import without its consent
    Family("run.admission", ADMISSIONS, parse_admission_key, admission_key, IMMUTABLE, M_LOGS),
    Family("run.import", IMPORTS, parse_import_key, import_key, REDACTED, M_LOGS,
           numbered=True),
    Family("review.batch", REVIEWS, parse_review_batch_key, review_batch_key, REDACTED,
           M_LOGS, numbered=True),
    # after the records they index (a reader ignores a segment beyond the log's last record)
    Family("log.index", LOG_INDEXES, parse_log_segment_key, log_segment_key, IMMUTABLE,
           M_LOG_INDEXES, loose=_under(LOG_INDEXES)),
    Family("settings", SETTINGS, parse_settings_key, settings_key, IMMUTABLE, M_LOGS,
           numbered=True),
    Family("eligibility", ELIGIBILITY, parse_eligibility_key, eligibility_key, IMMUTABLE,
           M_LOGS, numbered=True),
    Family("metrics", METRICS, parse_metrics_key, metrics_key, IMMUTABLE, M_LOGS,
           numbered=True),
    Family("erasure", LOG, parse_log_key, log_key, IMMUTABLE, M_ERASURES, loose=_under(LOG)),
    Family("dataset.tombstone", DATASETS, parse_tombstone_key, tombstone_key, VOLATILE,
           M_DATASETS, 0, outlives=True),
    Family("dataset", DATASETS, parse_meta_key, meta_key, IMMUTABLE, M_DATASETS, 1,
           numbered=True),
    # at one number, a version's tombstone goes before the version (an interrupted deletion)
    Family("version.tombstone", DATASETS, parse_deleted_key, deleted_key, VOLATILE,
           M_DATASETS, 2, loose=_group("deleted")),
    Family("version", DATASETS, parse_version_key, version_key, IMMUTABLE, M_DATASETS, 2,
           numbered=True),
    Family("experiment", DATASETS, parse_experiment_key, experiment_key, IMMUTABLE,
           M_DATASETS, 4, numbered=True, outlives=True, loose=_group("experiments")),
    Family("score.batch", DATASETS, parse_score_batch_key, score_batch_key, IMMUTABLE,
           M_DATASETS, 5, numbered=True, outlives=True, loose=_group("scores")),
    Family("score.withdrawal", DATASETS, parse_withdrawal_key, withdrawal_key, IMMUTABLE,
           M_DATASETS, 6, outlives=True, loose=_group("withdrawn")),
    Family("proposal", DATASETS, parse_proposal_key, proposal_key, VOLATILE, M_DATASETS, 7,
           loose=_group("proposals")),
    Family("idempotency", DATASETS, parse_claim_key, claim_key, VOLATILE, M_DATASETS, 8,
           loose=_group("keys")),
    # after the versions whose cases they record
    Family("cassette.log", DATASETS, parse_cassette_log_key, cassette_log_key, IMMUTABLE,
           M_DATASETS, 9, numbered=True, loose=_group("cassettes")),
    Family("lease", LEASES, parse_lease_key, lease_key, LOCAL, 0, loose=_under(LEASES)),
    Family("erasure.plan", PENDING, parse_pending_key, pending_key, LOCAL, 0,
           loose=_under(PENDING)),
)
BY_NAME = {f.name: f for f in FAMILIES}


def family_of(key: str) -> Family | None:
    """The family a well-formed key belongs to (at most one does), or None."""
    for family in FAMILIES:
        if key.startswith(family.prefix) and family.parse(key) is not None:
            return family
    return None


def claimed_by(key: str) -> Family | None:
    """The family whose fsck checker takes `key` (well-formed or not), or None: unexpected."""
    for family in FAMILIES:
        if family.claims(key):
            return family
    return None
