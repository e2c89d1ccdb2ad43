"""The case codec: a case's canonical bytes and id, and cases read from JSON Lines."""

from __future__ import annotations

from typing import IO, Any, Iterable, Iterator, NamedTuple

import msgspec

from cas.digest import digest_of
from cas.errors import CasError, InvalidArgument
from cas.format import encoding
from cas.format.records import FORMAT, Case, check_format


class EncodedCase(NamedTuple):
    """A case already in canonical bytes, with its id (made only by cas's own decoders)."""

    case_id: str
    data: bytes
    person: str | None = None  # the case's person, for the person index


_CASE_DECODER = msgspec.json.Decoder(Case)
_NOT_OPENING = bytes(b for b in range(256) if b not in b"[{")


# The EncodedCases this codec made (encode_case, read_cases_jsonl) are of this subclass and
# trusted as they are; any other EncodedCase is checked as a caller's input, so a forged one
# can never store bytes under an id that is not their digest, or bytes that are no case.
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


def read_cases_jsonl(stream: IO[bytes] | Iterable[bytes],
                     source: str = "input") -> "JsonlCases":
    """Cases from JSON Lines (one case object per line; blank lines skipped), read as they
    are iterated.

    Decoding is strict JSON, so the values can always be written canonically; a bad line is
    refused with its line number and the path of the offending field. A commit given the
    cases of a large file opened 'rb' may store them with two processes (cas/repo/ingest.py).
    """
    if not isinstance(source, str):
        raise InvalidArgument(f"source names the input: a string, not "
                              f"{encoding.describe(source)}")
    return JsonlCases(stream, source)


class JsonlCases:
    """The cases of a JSON Lines stream, one EncodedCase per line, read once as iterated.
    `line` and `offset` are the number and the byte offset (from where the iteration began)
    of the line last read; `first_line` numbers the first one."""

    def __init__(self, stream: IO[bytes] | Iterable[bytes], source: str,
                 first_line: int = 1) -> None:
        self.stream, self.source, self.first_line = stream, source, first_line
        self.line, self.offset = first_line - 1, 0

    def __iter__(self) -> Iterator[EncodedCase]:
        # Refuses what is no stream of lines before any line (on first iteration, as a
        # generator would).
        lines = encoding.lines_of(self.stream, self.source)
        decode, encode, most = _CASE_DECODER.decode, encoding.encode, encoding.MAX_DEPTH
        lineno, at = self.first_line - 1, 0
        for line in lines:
            lineno += 1
            self.line, self.offset = lineno, at
            at += len(line)
            try:  # a line with more brackets than the depth limit takes the checked path
                # (the opening brackets counted in one pass: the bytes of the line less all
                # others)
                case = decode(line) if len(line.translate(None, _NOT_OPENING)) <= most else None
            except (msgspec.DecodeError, RecursionError, TypeError, AttributeError):
                if isinstance(line, (bytes, bytearray, str)) and (not line or line.isspace()):
                    continue
                case = None
            if case is None or case.format != FORMAT:
                try:  # the slow path, only for a line refused: name the problem and its place
                    case = check_format(encoding.parse_json(line, _CASE_DECODER), "the case")
                except CasError as exc:
                    raise encoding.in_context(exc, f"{self.source} line {lineno}",
                                              line=lineno) from None
            data = encode(case)
            yield _Encoded(digest_of("case", data), data, case.person)
