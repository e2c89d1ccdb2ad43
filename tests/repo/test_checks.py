"""Argument checks (cas/repo/checks.py): each refuses a bad argument with InvalidArgument naming
it, and returns the argument as the operations use it."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

import cas
from cas.repo import checks


def refused(call, *args) -> str:
    with pytest.raises(cas.InvalidArgument) as info:
        call(*args)
    return info.value.message


def test_the_author_is_given_else_configured_else_the_login(monkeypatch, tmp_path):
    monkeypatch.setenv("CAS_CONFIG", str(tmp_path / "none.json"))
    monkeypatch.setenv("CAS_USER", "Ada <ada@example.com>")
    assert checks.author("Bo") == "Bo"
    assert checks.author(None) == "Ada <ada@example.com>"
    monkeypatch.delenv("CAS_USER")
    monkeypatch.setattr(checks.getpass, "getuser", lambda: "login")
    assert checks.author("") == "login"
    monkeypatch.setattr(checks.getpass, "getuser", lambda: 1 / 0)
    assert checks.author(None) == "unknown"
    assert "author" in refused(checks.author, 3)


def test_digests_and_confirm_tokens():
    checks.digest_text("b3:" + "0" * 64, "case id")
    checks.digest_text(None, "cursor", optional=True)
    assert refused(checks.digest_text, 7, "case id") == (
        "case id 7 is not a digest; expected 'b3:' followed by 64 hex digits")
    token = "ct-" + "a" * 32
    assert checks.confirm_token(token) == token and checks.confirm_token(None) is None
    for bad in ("ct-" + "A" * 32, "ct-../x", "", 5):
        assert "is not a confirm token (ct- and 32 hex digits)" in refused(
            checks.confirm_token, bad)
    assert "is not a confirm token" in refused(checks.confirm_token, None, False)


def test_paths(tmp_path):
    assert checks.path(tmp_path, "path") == str(tmp_path)
    assert checks.path("a/b", "path") == "a/b"
    assert refused(checks.path, 3, "path") == "path must be a path (a str or os.PathLike), not 3"
    assert "holds a NUL character" in refused(checks.path, "a\x00b", "path")


@pytest.mark.parametrize("limit", [1, 500])
def test_page_limits_in_range(limit):
    checks.page_limit(limit)


@pytest.mark.parametrize("limit", [0, 501, True, 1.0, "5", None])
def test_page_limits_out_of_range_are_refused_not_clamped(limit):
    with pytest.raises(cas.InvalidArgument) as info:
        checks.page_limit(limit)
    assert info.value.fields == {"minimum": 1, "maximum": checks.MAX_PAGE}


def test_progress_callbacks():
    checks.progress(None)
    checks.progress(lambda stage, done, total: None)
    checks.progress(print)  # a builtin without a checkable signature is trusted, or binds
    for bad in (3, lambda stage: None, lambda: None):
        assert refused(checks.progress, bad).startswith("progress must be a function of")


@pytest.mark.parametrize("value, seconds", [(0, 0.0), (90, 90.0), (1.5, 1.5), ("90", 90.0),
                                            ("15m", 900.0), (" 24H ", 86400.0),
                                            ("7d", 604800.0)])
def test_durations(value, seconds):
    assert checks.duration(value, "grace period") == seconds


@pytest.mark.parametrize("value", ["15 minutes", "-1", "1.5h", "", -1, math.nan, True,
                                   10 ** 9 + 1, None])
def test_bad_durations_are_refused(value):
    assert "grace period" in refused(checks.duration, value, "grace period")


def test_seconds():
    checks.seconds(None, "wait", optional=True)
    checks.seconds(0, "wait")
    assert refused(checks.seconds, None, "wait") == (
        "wait must be a number of seconds from 0 to 10**9, not None")


@pytest.mark.parametrize("values", ["ab", b"ab", {"a": 1}, 3])
def test_strings_refuse_one_value_given_for_many(values):
    assert "must be an iterable of case ids" in refused(checks.strings, values, "remove",
                                                        "case ids")


def test_strings():
    assert checks.strings(iter(["a", "b"]), "remove", "case ids") == ["a", "b"]
    assert "holds 3" in refused(checks.strings, ["a", 3], "remove", "case ids")


def test_tags_are_sorted_and_unique():
    assert checks.tags(["b", "a", "b"]) == ["a", "b"]
    assert refused(checks.tags, "ab") == "tags must be a list of strings, not one string"
    assert "invalid tag" in refused(checks.tags, ["x" * 65])


@given(st.text(max_size=140))
def test_labels_are_one_to_128_printable_characters_without_surrounding_space(text):
    try:
        assert checks.label(text, "metric") == text
    except cas.InvalidArgument as exc:
        assert "metric" in exc.message
        assert not text or len(text) > 128 or text != text.strip() or \
            not text.isprintable() or any(0xD800 <= ord(c) <= 0xDFFF for c in text)
    else:
        assert 1 <= len(text) <= 128 and text == text.strip()


def test_a_label_is_a_string():
    assert refused(checks.label, None, "experiment name") == (
        "experiment name must be a non-empty string, not None")
