"""Per-person settings outside any repository: who you are (user.name, user.email)."""

from __future__ import annotations

import json
import os

from cas.errors import FailedPrecondition, InvalidArgument

KEYS = ("user.name", "user.email")


def config_path() -> str:
    return os.environ.get("CAS_CONFIG") or os.path.join(
        os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config"), "cas", "config.json")


def _load() -> dict[str, str]:
    try:
        with open(config_path(), "rb") as f:
            text = f.read()
        data = json.loads(text) if text.strip() else {}  # an empty file holds no settings
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise InvalidArgument(f"cannot read {config_path()}: {exc}") from None
    if not isinstance(data, dict):
        raise InvalidArgument(f"cannot read {config_path()}: expected a JSON object")
    return {k: v for k, v in data.items() if k in KEYS and isinstance(v, str)}


def get(key: str) -> str | None:
    _check_key(key)
    return _load().get(key)


def set_value(key: str, value: str) -> None:
    _check_key(key)
    if not isinstance(value, str) or not value.strip() or not value.isprintable():
        raise InvalidArgument(f"{key} must be a non-empty line of printable text")
    data = _load()
    data[key] = value.strip()
    path = config_path()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=2, sort_keys=True)
    os.replace(tmp, path)


def _check_key(key: str) -> None:
    if key not in KEYS:
        raise InvalidArgument(f"unknown setting {key!r}; accepted: {', '.join(KEYS)}")


def configured_person() -> str | None:
    """`CAS_USER` ("Name <email>") if set, else user.name and user.email from the config file."""
    env = os.environ.get("CAS_USER", "").strip()
    if env:
        return env
    data = _load()
    name, email = data.get("user.name"), data.get("user.email")
    if name and email:
        return f"{name} <{email}>"
    return name or (f"<{email}>" if email else None)


def require_person(what: str) -> str:
    person = configured_person()
    if person is None:
        raise FailedPrecondition(
            f"{what} needs to know who you are: run `cas config user.name \"Your Name\"` and "
            "`cas config user.email you@example.com`, or set CAS_USER=\"Name <email>\"",
            reason="NO_CONFIGURED_PERSON")
    return person
