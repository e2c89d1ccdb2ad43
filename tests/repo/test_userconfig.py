"""Per-person settings (cas/repo/userconfig.py): who you are, from CAS_USER or the config file
(`$CAS_CONFIG`, else `$XDG_CONFIG_HOME/cas/config.json`), written atomically and read back."""

from __future__ import annotations

import json

import pytest

import cas
from cas.repo import userconfig


@pytest.fixture
def config(tmp_path, monkeypatch):
    path = tmp_path / "conf" / "config.json"
    monkeypatch.setenv("CAS_CONFIG", str(path))
    monkeypatch.delenv("CAS_USER", raising=False)
    return path


def test_the_config_file_is_found_by_env_then_xdg(tmp_path, monkeypatch):
    monkeypatch.setenv("CAS_CONFIG", str(tmp_path / "mine.json"))
    assert userconfig.config_path() == str(tmp_path / "mine.json")
    monkeypatch.delenv("CAS_CONFIG")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert userconfig.config_path() == str(tmp_path / "xdg" / "cas" / "config.json")


def test_settings_are_written_then_read_back(config):
    assert userconfig.get("user.name") is None and not config.exists()
    userconfig.set_value("user.name", "  Grace Hopper ")
    userconfig.set_value("user.email", "grace@example.com")
    assert userconfig.get("user.name") == "Grace Hopper"
    assert json.loads(config.read_text()) == {"user.email": "grace@example.com",
                                              "user.name": "Grace Hopper"}
    assert [p.name for p in config.parent.iterdir()] == ["config.json"]  # no temporary left


@pytest.mark.parametrize("key, value", [("user.phone", "1"), ("user.name", ""),
                                        ("user.name", "a\nb"), ("user.email", 3)])
def test_unknown_keys_and_bad_values_are_refused(config, key, value):
    with pytest.raises(cas.InvalidArgument):
        userconfig.set_value(key, value)
    assert not config.exists()


@pytest.mark.parametrize("text, says", [("{", "cannot read"), ("[1]", "expected a JSON object")])
def test_a_damaged_config_file_is_refused_naming_it(config, text, says):
    config.parent.mkdir()
    config.write_text(text)
    with pytest.raises(cas.InvalidArgument) as info:
        userconfig.get("user.name")
    assert says in info.value.message and str(config) in info.value.message


def test_an_empty_file_or_unknown_members_hold_no_settings(config):
    config.parent.mkdir()
    config.write_text("")
    assert userconfig.configured_person() is None
    config.write_text(json.dumps({"user.name": 3, "other": "x", "user.email": "e@x.org"}))
    assert userconfig.configured_person() == "<e@x.org>"


def test_the_configured_person(config, monkeypatch):
    assert userconfig.configured_person() is None
    userconfig.set_value("user.name", "Grace")
    assert userconfig.configured_person() == "Grace"
    userconfig.set_value("user.email", "grace@example.com")
    assert userconfig.configured_person() == "Grace <grace@example.com>"
    monkeypatch.setenv("CAS_USER", " Ada <ada@example.com> ")  # the environment comes first
    assert userconfig.require_person("a review") == "Ada <ada@example.com>"


def test_who_you_are_is_required_where_it_is_needed(config):
    with pytest.raises(cas.FailedPrecondition) as info:
        userconfig.require_person("a review")
    assert info.value.reason == "NO_CONFIGURED_PERSON"
    assert info.value.message.startswith("a review needs to know who you are")
