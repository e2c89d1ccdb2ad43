"""Shape-based redaction: secrets and personal data masked in any JSON value (docs/suites.md)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, NamedTuple

from cas.format import encoding

# Why an own rule table rather than a detector library (docs/suites.md "Redaction"): the
# maintained detectors do not fit a pure function over strings in the core. detect-secrets
# scans files line by line through global plugin settings and reports values, not spans, and
# has no personal-data rules (e-mail, phone, card, IBAN); Presidio needs spaCy and a language
# model of hundreds of MB that is downloaded separately. The shapes below are few, each is
# checked (Luhn, mod-97, lengths) where a shape alone would mask ordinary numbers, and each
# has a documented, tested example.

Span = tuple[int, int]
Check = Callable[[str, "re.Match[str]"], "Span | None"]


class Rule(NamedTuple):
    """One kind of text that is masked: `pattern` finds a candidate, `check` (if any) says
    which part of it is really of the kind (or None); `credential` rules are also what makes
    an identity field refused (`credential_kind`). `example` is masked as `redacted`.
    `needs`, when given, is a cheap test that a text could hold a match at all."""

    kind: str
    pattern: re.Pattern
    check: Check | None
    credential: bool
    example: str
    redacted: str
    needs: re.Pattern | None = None  # a text without a match of this has no match (fast skip)


def token(kind: str) -> str:
    """What a match of `kind` is replaced with."""
    return f"[REDACTED:{kind}]"


# -- checks -----------------------------------------------------------------------------------
def luhn(digits: str) -> bool:
    """The Luhn checksum of payment card numbers (ISO/IEC 7812)."""
    total = 0
    for i, c in enumerate(reversed(digits)):
        d = ord(c) - 48
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


# Length of the IBAN of each country that has one (the SWIFT IBAN registry).
IBAN_LENGTHS = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22,
    "BI": 27, "BR": 29, "BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DJ": 27,
    "DK": 18, "DO": 28, "EE": 20, "EG": 29, "ES": 24, "FI": 18, "FK": 18, "FO": 18, "FR": 27,
    "GB": 22, "GE": 22, "GI": 23, "GL": 18, "GR": 27, "GT": 28, "HR": 21, "HU": 28, "IE": 22,
    "IL": 23, "IQ": 23, "IS": 26, "IT": 27, "JO": 30, "KW": 30, "KZ": 20, "LB": 28, "LC": 32,
    "LI": 21, "LT": 20, "LU": 20, "LV": 21, "LY": 25, "MC": 27, "MD": 24, "ME": 22, "MK": 19,
    "MN": 20, "MR": 27, "MT": 31, "MU": 30, "NI": 28, "NL": 18, "NO": 15, "OM": 23, "PK": 24,
    "PL": 28, "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22, "RU": 33, "SA": 24, "SC": 31,
    "SD": 18, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "SO": 23, "ST": 25, "SV": 28, "TL": 23,
    "TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20, "YE": 30,
}


def iban_valid(compact: str) -> bool:
    """An IBAN without spaces: its country's length and the ISO 13616 mod-97 check."""
    compact = compact.upper()
    if IBAN_LENGTHS.get(compact[:2]) != len(compact) or not compact.isalnum():
        return False
    moved = compact[4:] + compact[:4]
    return int("".join(str(int(c, 36)) for c in moved)) % 97 == 1


def _card(text: str, m: re.Match) -> Span | None:
    digits = re.sub(r"\D", "", m[0])
    if luhn(digits):
        return m.span()
    if m["tail"] is not None and luhn(digits[:16]):  # 4-4-4-4 followed by a short group
        return m.start(), m.start("tail") - 1  # without the separator before the tail
    return None


def _iban(text: str, m: re.Match) -> Span | None:
    """The IBAN at the start of the candidate: exactly its country's length of characters,
    compact or in groups of four, ending where a group ends."""
    want = IBAN_LENGTHS.get(m[0][:2].upper())
    if want is None:
        return None
    count, end = 0, m.start()
    for i in range(m.start(), m.end()):
        if text[i] != " ":
            count += 1
            if count == want:
                end = i + 1
                break
    if count != want or (end < len(text) and text[end].isalnum()):
        return None
    compact = text[m.start():end].replace(" ", "")
    return (m.start(), end) if iban_valid(compact) else None


def _phone_trunk(text: str, m: re.Match) -> Span | None:
    """A national number with a leading 0: 9 to 12 digits, cut at a group boundary."""
    end, digits = None, 0
    for groups, g in enumerate(re.finditer(r"\d+", m[0]), 1):
        digits += len(g[0])
        if digits > 12:
            break
        if digits >= 9 and groups >= 2:
            end = m.start() + g.end()
    return (m.start(), end) if end is not None else None


def _bearer(text: str, m: re.Match) -> Span | None:
    value = m["token"]
    if len(value) >= 20 or (len(value) >= 8 and any(c.isdigit() for c in value)):
        return m.span("token")
    return None


def _group(name: str) -> Check:
    return lambda text, m: m.span(name)


# -- the rules, in the order they are applied ---------------------------------------------------
# Credentials first (a key block or token may hold digit runs or `@` that a personal-data rule
# would otherwise take apart), then personal data. `(?<![A-Za-z0-9])` and its mirror keep a
# rule from starting or ending inside a longer word or number.
_WORD_START = r"(?<![A-Za-z0-9])"
_WORD_END = r"(?![A-Za-z0-9])"
_SENSITIVE = (r"password|passwd|passphrase|secret|client[_-]?secret|api[_-]?key|apikey|"
              r"access[_-]?key|secret[_-]?key|private[_-]?key|auth[_-]?token|access[_-]?token|"
              r"refresh[_-]?token|session[_-]?token")

_DIGIT = re.compile(r"\d")

RULES: tuple[Rule, ...] = (
    Rule("private_key", re.compile(
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"
        r"(?:.*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|.*\Z)", re.DOTALL),
        None, True,
        "key: -----BEGIN RSA PRIVATE KEY-----\nMIIEow...\n-----END RSA PRIVATE KEY-----",
        "key: [REDACTED:private_key]", re.compile("PRIVATE KEY")),
    Rule("jwt", re.compile(
        r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{5,}(?:\.[A-Za-z0-9_-]*){2,4}(?![A-Za-z0-9_-])"),
        None, True,
        "session eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl",
        "session [REDACTED:jwt]", re.compile("eyJ")),
    Rule("bearer", re.compile(r"(?i:\bbearer)[ \t]+(?P<token>[A-Za-z0-9\-._~+/]+=*)"),
         _bearer, True,
         "Authorization: Bearer 8f2b1c9e4d7a6b3f", "Authorization: Bearer [REDACTED:bearer]",
         re.compile("(?i)bearer")),
    Rule("api_key", re.compile(
        _WORD_START + r"(?:sk-[A-Za-z0-9_-]{20,}|(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}"
        r"|gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,}|glpat-[A-Za-z0-9_-]{20,}"
        r"|xox[abposr]-[A-Za-z0-9-]{10,}|AIza[A-Za-z0-9_-]{35,}|hf_[A-Za-z0-9]{30,}"
        r"|npm_[A-Za-z0-9]{36,}|pypi-[A-Za-z0-9_-]{50,})(?![A-Za-z0-9_-])"),
        None, True,
        "OPENAI_API_KEY=sk-proj-EXAMPLE0example0EXAMPLE0", "OPENAI_API_KEY=[REDACTED:api_key]"),
    Rule("aws_access_key", re.compile(
        _WORD_START + r"(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}" + _WORD_END),
        None, True, "aws_access_key_id = AKIAIOSFODNN7EXAMPLE",
        "aws_access_key_id = [REDACTED:aws_access_key]", re.compile("A(?:KI|SI|BI|CC)A")),
    Rule("secret", re.compile(
        r"(?i)(?<![A-Za-z0-9])(?:" + _SENSITIVE + r")[\"']?[ \t]*[:=][ \t]*[\"']?"
        r"(?P<value>(?!\[REDACTED:)[^\s\"',;&]{4,})"),
        _group("value"), True, "login with password=hunter22 please",
        "login with password=[REDACTED:secret] please", re.compile("[:=]")),
    Rule("email", re.compile(
        r"(?<![\w.%+-])[\w.%+-]+@[\w-]+(?:\.[\w-]+)*\.[^\W\d_]{2,63}(?![\w-])"),
        None, False, "write to ada.lovelace@example.com today",
        "write to [REDACTED:email] today", re.compile("@")),
    Rule("iban", re.compile(_WORD_START + r"[A-Za-z]{2}\d{2}(?: ?[A-Za-z0-9]){11,30}"),
         _iban, False, "pay to DE89 3704 0044 0532 0130 00 by Friday",
         "pay to [REDACTED:iban] by Friday", _DIGIT),
    Rule("card", re.compile(
        r"(?<![A-Za-z0-9])(?<!\d\.)[2-6](?:\d{12,18}|\d{3}(?P<s1>[ -])\d{6}(?P=s1)\d{4,5}"
        r"|\d{3}(?P<s2>[ -])\d{4}(?P=s2)\d{4}(?P=s2)\d{4}(?:(?P=s2)(?P<tail>\d{1,3}))?)"
        r"(?![A-Za-z0-9])(?!\.\d)"),
        _card, False, "card 4111 1111 1111 1111, exp 12/29", "card [REDACTED:card], exp 12/29",
        _DIGIT),
    Rule("phone", re.compile(  # international, with its + (E.164: at most 15 digits)
        r"(?<![\w+])\+\d(?:[ .()-]{0,2}\d){7,14}(?!\d)"),
        None, False, "call +44 20 7946 0958 or", "call [REDACTED:phone] or", re.compile(r"\+")),
    Rule("phone", re.compile(  # North American: (415) 555-0123, 415-555-0123, 415.555.0123
        r"(?<![\w+])(?:\(\d{3}\)[ .-]?|\d{3}[ .-])\d{3}[ .-]\d{4}(?![\w])"),
        None, False, "or (415) 555-0123", "or [REDACTED:phone]", _DIGIT),
    Rule("phone", re.compile(  # national with a trunk 0, one separator throughout
        r"(?<![\w+])0\d{1,4}(?P<sep>[ -])\d{2,8}(?:(?P=sep)\d{2,8}){0,3}(?![\w])"),
        _phone_trunk, False, "mobile 06 12 34 56 78", "mobile [REDACTED:phone]", _DIGIT),
)
KINDS = tuple(dict.fromkeys(r.kind for r in RULES))
CREDENTIAL_KINDS = tuple(dict.fromkeys(r.kind for r in RULES if r.credential))

# A string value under a key named like one of these is masked whole (kind `secret`): the key
# says what it is, whatever its shape. Bare `token` is not among them (a model's logprobs hold
# `{"token": "Hello"}`).
SENSITIVE_KEY = re.compile(r"(?i)(?:^|[_-])(?:" + _SENSITIVE + r"|authorization|cookie|"
                           r"set-cookie)\Z")


def _spans(rule: Rule, text: str) -> list[Span]:
    """The non-overlapping spans of `rule` in `text`, leftmost first. A candidate its check
    refuses is retried one character further, so a refused candidate never hides a real
    match that starts inside it."""
    found: list[Span] = []
    if rule.needs is not None and rule.needs.search(text) is None:
        return found
    search, pos = rule.pattern.search, 0
    while (m := search(text, pos)) is not None:
        span = rule.check(text, m) if rule.check is not None else m.span()
        if span is None:
            pos = m.start() + 1
        else:
            found.append(span)
            pos = max(span[1], m.start() + 1)
    return found


def _one_pass(text: str, rules: tuple[Rule, ...] = RULES) -> str:
    for rule in rules:
        spans = _spans(rule, text)
        if spans:
            parts, last = [], 0
            for start, end in spans:
                parts += (text[last:start], token(rule.kind))
                last = end
            parts.append(text[last:])
            text = "".join(parts)
    return text


def scrub_text(text: str) -> str:
    """`text` with every match of RULES replaced by `[REDACTED:<kind>]`. Applied until nothing
    changes (a mask can free a neighbour that looked like part of a longer word), so
    `scrub_text(scrub_text(t)) == scrub_text(t)`."""
    while True:
        done = _one_pass(text)
        if done == text:
            return text
        text = done


_CREDENTIAL_RULES = tuple(r for r in RULES if r.credential)


def scrub_credentials(text: str) -> str:
    """`text` with only the credential shapes (CREDENTIAL_KINDS) masked, as scrub_text masks:
    for what must stay matchable byte for byte otherwise (a recorded HTTP body)."""
    while True:
        done = _one_pass(text, _CREDENTIAL_RULES)
        if done == text:
            return text
        text = done


def mask_credentials(value: Any) -> Any:
    """A copy of a JSON value with its credentials masked and nothing else: a string or number
    under a sensitive key name (SENSITIVE_KEY) whole, and the credential shapes in every
    string (`scrub_credentials`). For what must stay matchable otherwise (a recorded call's
    arguments and answer); the same value always masks alike. Idempotent."""
    t = type(value)
    if t is str:
        return scrub_credentials(value)
    if t is list or t is tuple:
        return [mask_credentials(v) for v in value]
    if t is dict:
        return {k: token("secret") if SENSITIVE_KEY.search(k) is not None and (
                    (type(v) is str and v) or type(v) in (int, float))
                else mask_credentials(v) for k, v in value.items()}
    return value


def credential_kind(text: Any) -> str | None:
    """The kind of credential `text` holds (private_key, jwt, bearer, api_key, aws_access_key,
    secret), else None; None for anything that is not a string."""
    if not isinstance(text, str):
        return None
    for rule in RULES:
        if rule.credential and _spans(rule, text):
            return rule.kind
    return None


def _int_is_card(value: int) -> bool:
    digits = str(value)
    return 13 <= len(digits) <= 19 and digits[0] in "23456" and luhn(digits)


def scrub(value: Any, path: str = "$") -> Any:
    """A copy of a JSON value with every string masked by `scrub_text`: values and object
    keys (two keys that mask alike get `#2`, `#3`... in order), a string or number under a
    sensitive key name (SENSITIVE_KEY) whole, and an integer that is a Luhn-valid card
    number. Numbers, booleans and null are otherwise kept; a tuple becomes a list. What is no
    JSON value is refused as `encoding.check_json` refuses it (InvalidJSONValue naming the
    path from `path`, JSON_TOO_DEEP). Idempotent."""
    encoding.check_json(value, path)
    return _scrub(value)


def _scrub(value: Any) -> Any:
    t = type(value)
    if t is str:
        return scrub_text(value)
    if t is int:
        return token("card") if _int_is_card(value) else value
    if t is list or t is tuple:
        return [_scrub(v) for v in value]
    if t is dict:
        return _scrub_object(value)
    if hasattr(value, "__struct_fields__"):  # a msgspec record: as the JSON object it encodes to
        return _scrub(encoding.to_builtins(value))
    return value


def _scrub_object(obj: dict) -> dict:
    keys = {k: scrub_text(k) for k in obj}
    taken = {k for k, new in keys.items() if new == k}  # unchanged keys keep their name
    out: dict[str, Any] = {}
    for key, value in obj.items():
        new = keys[key]
        if new != key:
            n, name = 1, new
            while name in taken:
                n += 1
                name = f"{new}#{n}"
            taken.add(name)
            new = name
        sensitive = SENSITIVE_KEY.search(key) is not None
        if sensitive and ((type(value) is str and value) or type(value) in (int, float)):
            out[new] = token("secret")
        else:
            out[new] = _scrub(value)
    return out
