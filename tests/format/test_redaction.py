"""Redaction: every rule's documented example, what must survive, credential shapes, and the
properties (a generated secret anywhere in a value is masked; scrub is idempotent)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cas
from cas.format import redaction
from cas.format.redaction import RULES, credential_kind, scrub, scrub_text
from support import ROOT
from support.secrets import around, iban_of, luhn_complete, placed, secrets, sensitive_part

SETTINGS = settings(max_examples=100, deadline=None)


# -- every rule's example, as docs/suites.md shows it ---------------------------------------------
@pytest.mark.parametrize("rule", RULES, ids=[f"{r.kind}-{i}" for i, r in enumerate(RULES)])
def test_each_rule_masks_its_documented_example(rule):
    assert scrub_text(rule.example) == rule.redacted
    assert f"[REDACTED:{rule.kind}]" in rule.redacted


def test_every_rule_is_in_the_docs_with_its_example():
    doc = (ROOT / "docs" / "suites.md").read_text()
    for rule in RULES:
        shown = rule.example.replace("\n", "\\n")
        assert shown in doc and rule.redacted in doc, rule.kind


@pytest.mark.parametrize("text", [
    "order 12345 shipped on 2024-05-01 at 10:30, total 99.95 EUR",
    "2026-05-12T10:00:00.000000Z", "0.30000000000000004", "1715000000000 ms",
    "v1.2.3 at 192.168.0.1", "uuid 123e4567-e89b-12d3-a456-426614174000",
    "b3:4111111111111111" + "0" * 48, "4111 1111 1111 1112",  # not Luhn-valid
    "GB82 WEST 1234 5698 7654 33",  # mod-97 fails
    "call 555-0100", "room 101, floor 3, 12/29", "Bearer of bad news", "bearer responsibilities",
    "task-abcdefghijklmnopqrstuvwxyz", "ada@localhost", "@ada and @bob", "pkg@1.2.3",
    "score 0.95 of 1", "-----BEGIN PUBLIC KEY-----\nMIIB\n-----END PUBLIC KEY-----",
])
def test_ordinary_text_is_kept(text):
    assert scrub_text(text) == text


def test_checks_keep_numbers_that_only_look_like_cards_and_ibans():
    card = luhn_complete("411111111111111")
    assert scrub_text(card) == "[REDACTED:card]"
    wrong = card[:-1] + str((int(card[-1]) + 1) % 10)
    assert scrub_text(wrong) == wrong  # Luhn fails
    assert scrub_text("1" + card[1:]) == "1" + card[1:]  # no card network starts with 1
    assert scrub_text(card + "7") == card + "7"  # a longer digit run is another number
    assert scrub_text(f"{card}.5") == f"{card}.5" and scrub_text(f"0.{card}") == f"0.{card}"
    iban = iban_of("GB", "WEST12345698765432")
    assert scrub_text(iban) == "[REDACTED:iban]" == scrub_text(iban.lower())
    assert scrub_text(iban[:-1]) == iban[:-1]  # not the country's length
    assert scrub_text("ZZ" + iban[2:]) == "ZZ" + iban[2:]  # no such country


def test_a_card_before_a_short_group_is_masked_without_it():
    assert scrub_text("4111 1111 1111 1111 7 items") == "[REDACTED:card] 7 items"
    assert scrub_text("ref 12 4111-1111-1111-1111") == "ref 12 [REDACTED:card]"


def test_values_keys_and_numbers_of_a_json_value():
    card = int(luhn_complete("545454545454545"))
    value = {"to": ["ada@example.com", {"cc": "bob@example.org"}], "n": 42, "big": card,
             "f": 2.5, "ok": True, "none": None,
             "ada@example.com": 1, "bob@example.com": 2, "[REDACTED:email]": 3,
             "db_password": "hunter2", "x-api-key": 12345, "Authorization": "Basic dXNlcjpw",
             "token": "Hello", "password": "", "secret": {"nested": "kept"}}
    assert scrub(value) == {
        "to": ["[REDACTED:email]", {"cc": "[REDACTED:email]"}], "n": 42,
        "big": "[REDACTED:card]", "f": 2.5, "ok": True, "none": None,
        "[REDACTED:email]#2": 1, "[REDACTED:email]#3": 2, "[REDACTED:email]": 3,
        "db_password": "[REDACTED:secret]", "x-api-key": "[REDACTED:secret]",
        "Authorization": "[REDACTED:secret]", "token": "Hello", "password": "",
        "secret": {"nested": "kept"}}
    assert scrub(("a", 1)) == ["a", 1] and scrub(10 ** 30) == 10 ** 30


def test_a_value_json_cannot_carry_is_refused_naming_the_path():
    with pytest.raises(cas.InvalidJSONValue) as exc:
        scrub({"a": [1, {2}]}, "$.input")
    assert exc.value.path == "$.input.a[1]"
    with pytest.raises(cas.InvalidArgument) as exc:
        scrub(_deep(150))
    assert exc.value.reason == "JSON_TOO_DEEP"


def _deep(n: int):
    value: list = []
    for _ in range(n):
        value = [value]
    return value


@pytest.mark.parametrize("text,kind", [(r.example, r.kind) for r in RULES if r.credential] + [
    ("sk-ant-api03-" + "a" * 30, "api_key"), ("xoxb-1234567890-abc", "api_key"),
    ("ghp_" + "A" * 36, "api_key"), ("AIza" + "x" * 35, "api_key"),
    ("glpat-" + "x" * 20, "api_key"), ("ASIA" + "Z" * 16, "aws_access_key"),
    ("-----BEGIN PGP PRIVATE KEY BLOCK-----\nabc", "private_key"),
])
def test_credential_kind_names_the_credential(text, kind):
    assert credential_kind(text) == kind


@pytest.mark.parametrize("text", ["acme", "user-42", "Ada <ada@example.com>", "+44 20 7946 0958",
                                  "b3:" + "0" * 64, "late-refund", "", "sk-short"])
def test_credential_kind_is_none_for_identities_that_are_no_credential(text):
    assert credential_kind(text) is None


def test_credential_kind_of_no_string_is_none():
    assert credential_kind(None) is None and credential_kind(12) is None


# -- properties ---------------------------------------------------------------------------------
json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-10 ** 12, 10 ** 12),
                         st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=30))


def json_values(leaves=json_scalars):
    return st.recursive(leaves, lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
        max_leaves=12)


@st.composite
def value_with_secret(draw, secret: str):
    """A JSON value holding `secret` in a string at some depth: as a value, inside a list, as
    an object key, or beside other text."""
    text = placed(draw(around), secret, draw(around))
    where = draw(st.sampled_from(["value", "list", "key", "nested"]))
    if where == "value":
        return text
    if where == "list":
        return [draw(json_scalars), text, draw(json_scalars)]
    if where == "key":
        return {text: draw(json_scalars), "other": draw(json_values())}
    return {"a": {"b": [draw(json_values()), {"c": text}]}}


def strings_of(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [s for v in value for s in strings_of(v)]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in [k, *strings_of(v)]]
    return []


@SETTINGS
@given(data=st.data(), kind_secret=secrets)
def test_a_generated_secret_never_survives_scrub(data, kind_secret):
    kind, secret = kind_secret
    value = data.draw(value_with_secret(secret))
    part = sensitive_part(kind, secret)
    assert all(part not in s for s in strings_of(scrub(value)))


@SETTINGS
@given(secret=secrets)
def test_each_generated_secret_alone_is_masked_as_its_kind(secret):
    kind, text = secret
    assert f"[REDACTED:{kind}]" in scrub_text(text)
    if kind in redaction.CREDENTIAL_KINDS:
        assert credential_kind(text) == kind


words = st.from_regex(r"[A-Za-z]{1,10}", fullmatch=True)
numbers = st.one_of(st.integers(0, 999_999).map(str), st.just("2024-05-01"),
                    st.floats(0, 10_000, allow_nan=False).map(lambda f: f"{f:.2f}"))
ordinary_text = st.lists(st.tuples(words, numbers).map(" ".join), max_size=6).map(" ".join)


@SETTINGS
@given(value=json_values(st.one_of(st.none(), st.booleans(), st.integers(-10 ** 12, 10 ** 12),
                                   st.floats(allow_nan=False, allow_infinity=False),
                                   ordinary_text)))
def test_ordinary_values_survive_unchanged(value):
    assert scrub(value) == value or _has_sensitive_key(value)


def _has_sensitive_key(value) -> bool:
    if isinstance(value, dict):
        return any(redaction.SENSITIVE_KEY.search(k) or _has_sensitive_key(v)
                   for k, v in value.items())
    return isinstance(value, list) and any(_has_sensitive_key(v) for v in value)


@SETTINGS
@given(data=st.data())
def test_scrub_is_idempotent(data):
    leaves = st.one_of(json_scalars, secrets.flatmap(
        lambda ks: st.builds(placed, around, st.just(ks[1]), around)))
    value = data.draw(json_values(leaves))
    once = scrub(value)
    assert scrub(once) == once
