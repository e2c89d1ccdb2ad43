"""Digests: BLAKE3-256, domain-separated by object kind, written `b3:<64 lowercase hex>`; and
the identifiers cas derives from bytes (request digests, tokens, annotation ids), each in a
domain of its own."""

from __future__ import annotations

import re

from blake3 import blake3

from cas.errors import InvalidArgument

PREFIX = "b3:"
_DIGEST_RE = re.compile(r"b3:[0-9a-f]{64}\Z")

# The domain of a kind is the ASCII bytes "cas:" + kind + NUL, hashed before the canonical
# bytes. Kinds never contain NUL, so no (kind, bytes) pair can collide with another kind's.
# A kind is spelled as dot-separated words of lowercase letters and digits (KIND_RE), so the
# derived domains below, whose names hold a '-', can never equal a kind's domain.
KIND_RE = re.compile(r"[a-z][a-z0-9]*(?:\.[a-z][a-z0-9]*)*\Z")

# The kinds are the record types' tags: cas.format.records registers each one (register_kind) when
# it defines them, so this module never lists kinds by hand and never imports the records.
# The base hasher of each kind is built once: digest_of only copies it (the hot path).
_BASE: dict[str, blake3] = {}


def domain(kind: str) -> bytes:
    return b"cas:" + kind.encode("ascii") + b"\x00"


def register_kind(kind: str) -> None:
    """Make `kind` known to digest_of (idempotent). Its spelling is checked (KIND_RE)."""
    if not isinstance(kind, str) or not KIND_RE.match(kind):
        raise InvalidArgument(f"{kind!r} is not a kind: dot-separated words of lowercase "
                              "letters and digits")
    if kind not in _BASE:
        _BASE[kind] = blake3(domain(kind))


def registered_kinds() -> tuple[str, ...]:
    return tuple(_BASE)


def digest_of(kind: str, data: bytes) -> str:
    """The digest of canonical bytes `data` of an object of `kind`."""
    try:
        h = _BASE[kind].copy()
    except (KeyError, TypeError):
        raise InvalidArgument(f"unknown object kind {kind!r}; known: {', '.join(_BASE)}") \
            from None
    h.update(data)
    return PREFIX + h.hexdigest()


# -- derived identifiers (docs/format.md section 3.1) ----------------------------------------
# Each is BLAKE3 over its own domain, "cas:" + a name holding '-' + NUL, then the bytes. None
# equals a kind's domain (kinds hold no '-'), nor another's, nor the person key's: an
# identifier of one sort can never be read as a digest of an object, or as another sort.
REQUEST_DOMAIN = b"cas:request-digest\x00"
PROPOSAL_TOKEN_DOMAIN = b"cas:proposal-token\x00"
CONFIRM_TOKEN_DOMAIN = b"cas:confirm-token\x00"
ANNOTATION_ID_DOMAIN = b"cas:annotation-id\x00"
PERSON_KEY_DOMAIN = b"cas:person-key\x00"
SUITE_RUN_ID_DOMAIN = b"cas:suite-run-id\x00"   # the suite runner's run ids
SUITE_RESULT_DOMAIN = b"cas:suite-result\x00"   # the digest of a suite's result
CASSETTE_REQUEST_DOMAIN = b"cas:cassette-request\x00"  # a cassette's request keys
EVALSET_REGRESSION_DOMAIN = b"cas:evalset-regression\x00"  # a regression run's experiment
LOG_INDEX_DOMAIN = b"cas:log-index\x00"  # the row keys of the log indexes (storage/log_index)
DERIVED_DOMAINS = {"request-digest": REQUEST_DOMAIN, "proposal-token": PROPOSAL_TOKEN_DOMAIN,
                   "confirm-token": CONFIRM_TOKEN_DOMAIN, "annotation-id": ANNOTATION_ID_DOMAIN,
                   "person-key": PERSON_KEY_DOMAIN, "suite-run-id": SUITE_RUN_ID_DOMAIN,
                   "suite-result": SUITE_RESULT_DOMAIN,
                   "cassette-request": CASSETTE_REQUEST_DOMAIN,
                   "evalset-regression": EVALSET_REGRESSION_DOMAIN,
                   "log-index": LOG_INDEX_DOMAIN}
_REQUEST = blake3(REQUEST_DOMAIN)
_PROPOSAL_TOKEN = blake3(PROPOSAL_TOKEN_DOMAIN)
_CONFIRM_TOKEN = blake3(CONFIRM_TOKEN_DOMAIN)
_ANNOTATION_ID = blake3(ANNOTATION_ID_DOMAIN)
_CASSETTE_REQUEST = blake3(CASSETTE_REQUEST_DOMAIN)
# Records written before the derived domains existed used the "proposal" kind's domain for
# request digests and tokens; a claim stored then still holds such a request digest.
_LEGACY_REQUEST = blake3(b"cas:proposal\x00")
# The name of an idempotency claim: kept in the "idempotency" kind's domain for ever, because
# it is where a claim is found; another derivation would make a retry miss its claim.
_CLAIM_NAME = blake3(b"cas:idempotency\x00")


def _hex(base: blake3, data: bytes) -> str:
    h = base.copy()
    h.update(data)
    return h.hexdigest()


def request_digest(payload: bytes) -> str:
    """`b3:` + 64 hex: the digest a proposal and its idempotency claim record of the request
    (`payload`: the canonical bytes of the normalised request)."""
    return PREFIX + _hex(_REQUEST, payload)


def legacy_request_digest(payload: bytes) -> str:
    """The request digest of claims written before request_digest existed (the "proposal"
    kind's domain): a retry after an upgrade must match them too, or be refused as a reuse."""
    return PREFIX + _hex(_LEGACY_REQUEST, payload)


def proposal_token(core: bytes) -> str:
    """`ct-` + 32 hex: the confirm token naming a staged proposal (`core`: the canonical bytes
    of its fields other than kind, format, author and created_at)."""
    return "ct-" + _hex(_PROPOSAL_TOKEN, core)[:32]


def confirm_token(payload: bytes) -> str:
    """`ct-` + 32 hex: the token of a review or erasure preview (`payload`: the canonical
    bytes of `{"kind": <"review" or "erase">, "request": <what the preview showed>}`)."""
    return "ct-" + _hex(_CONFIRM_TOKEN, payload)[:32]


def annotation_id(core: bytes) -> str:
    """`ann-` + 32 hex: the id of one saved review (`core`: the canonical bytes of its run,
    judgment, reviewer, time, batch number and position)."""
    return "ann-" + _hex(_ANNOTATION_ID, core)[:32]


def cassette_request_digest(payload: bytes) -> str:
    """`b3:` + 64 hex: a cassette request key (`payload`: the canonical bytes of
    `[adapter, name, request]`; cas.format.records.request_key builds them)."""
    return PREFIX + _hex(_CASSETTE_REQUEST, payload)


def idempotency_claim_name(key: str) -> str:
    """The 64 hex digits naming the claim of idempotency key `key` (`.../keys/<hex>`)."""
    return _hex(_CLAIM_NAME, key.encode("utf-8"))


PERSON_PREFIX = "pk:"


def person_key(repository_id: str) -> bytes:
    """The key of a repository's person digests, derived from its random id: the same person
    gives the same digest within one repository and unrelated digests across repositories."""
    return blake3(PERSON_KEY_DOMAIN + repository_id.encode("utf-8")).digest()


def log_index_key(field: str, value: str, key: bytes) -> bytes:
    """The 16-byte row key of a log index (docs/format.md 8.2): BLAKE3 keyed with the
    repository's person key over the domain, the field's name, NUL and the value. Keyed, so
    that a row left behind by an erasure names no run id anyone can test a guess against
    without the repository."""
    # (a value no stored record can hold, such as a lone surrogate, still gets a key: one no
    # row has)
    return blake3(LOG_INDEX_DOMAIN + field.encode("ascii") + b"\x00"
                  + value.encode("utf-8", "surrogatepass"), key=key).digest(length=16)


_PERSON_DIGEST_RE = re.compile(r"pk:[0-9a-f]{64}\Z")


def person_digest(person: str, key: bytes) -> str:
    """The keyed digest that stands for a person id wherever cas must record whose data it is.
    A person that is already such a digest (`pk:` and 64 hex digits: what a captured run
    names instead of its user id, docs/capture.md) stands for itself."""
    if _PERSON_DIGEST_RE.match(person):
        return person
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
    raise InvalidArgument(f"{what} {text!r} is not a digest; expected 'b3:' followed by 64 hex "
                          "digits", value=str(text))


def to_bytes(d: str) -> bytes:
    return bytes.fromhex(d[3:])


def from_bytes(raw: bytes) -> str:
    return PREFIX + raw.hex()
