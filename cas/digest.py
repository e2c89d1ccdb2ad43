"""Digests: BLAKE3-256, domain-separated by object kind, written `b3:<64 lowercase hex>`."""

from __future__ import annotations

import re

from blake3 import blake3

from .errors import InvalidArgument

PREFIX = "b3:"
HEX_LEN = 64
_DIGEST_RE = re.compile(r"b3:[0-9a-f]{64}\Z")

# The domain of a kind is the ASCII bytes "cas:" + kind + NUL, hashed before the canonical
# bytes. Kinds never contain NUL, so no (kind, bytes) pair can collide with another kind's.
KINDS = ("case", "tree.leaf", "tree.node", "version", "dataset", "config", "run", "run.import",
         "review.batch", "settings", "proposal", "idempotency", "provenance",
         "score.batch", "experiment", "version.tombstone", "dataset.tombstone", "fence",
         "version.retirement", "person.index", "erasure.plan", "erasure", "lease",
         "person.shards")
_BASE = {kind: blake3(b"cas:" + kind.encode("ascii") + b"\x00") for kind in KINDS}


def domain(kind: str) -> bytes:
    return b"cas:" + kind.encode("ascii") + b"\x00"


def digest_of(kind: str, data: bytes) -> str:
    """The digest of canonical bytes `data` of an object of `kind`."""
    try:
        h = _BASE[kind].copy()
    except KeyError:
        raise InvalidArgument(f"unknown object kind {kind!r}; known: {', '.join(KINDS)}") from None
    h.update(data)
    return PREFIX + h.hexdigest()


PERSON_PREFIX = "pk:"


def person_key(repository_id: str) -> bytes:
    """The key of a repository's person digests, derived from its random id: the same person
    gives the same digest within one repository and unrelated digests across repositories."""
    return blake3(b"cas:person-key\x00" + repository_id.encode("utf-8")).digest()


def person_digest(person: str, key: bytes) -> str:
    """The keyed digest that stands for a person id wherever cas must record whose data it is."""
    return PERSON_PREFIX + blake3(person.encode("utf-8"), key=key).hexdigest()


def is_digest(text: object) -> bool:
    return isinstance(text, str) and _DIGEST_RE.match(text) is not None


def parse_digest(text: str, what: str = "digest") -> str:
    """Validate a digest written by a person: `b3:` + 64 hex (uppercase hex is folded)."""
    if isinstance(text, str):
        candidate = text.strip()
        if candidate[:3].lower() == PREFIX:
            candidate = PREFIX + candidate[3:].lower()
            if _DIGEST_RE.match(candidate):
                return candidate
    raise InvalidArgument(f"{what} {text!r} is not a digest; expected 'b3:' followed by 64 hex digits",
                          value=str(text))


def to_bytes(d: str) -> bytes:
    return bytes.fromhex(d[3:])


def from_bytes(raw: bytes) -> str:
    return PREFIX + raw.hex()
