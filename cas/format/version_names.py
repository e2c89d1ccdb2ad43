"""Version names: a dataset name, a version number, `NAME@N`, and the pin `NAME@N#b3:<hex>`.

One spelling is read here for every place that takes an exact version as text: the library's
pins, eval set and suite sources, and the command line (`cas items NAME@N`, `cas diff`'s
`[NAME@]B`). Pure: no I/O.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

import msgspec

from cas.digest import parse_digest
from cas.errors import InvalidArgument
from cas.format import encoding

MAX_VERSION = 9_999_999_999  # version numbers are written with 10 digits in keys
_NAME_RE = re.compile(r"[a-z0-9][a-z0-9._-]{0,127}\Z")
PIN_FORM = "DATASET@VERSION#b3:<64 hex digits>"


def check_dataset_name(name: Any) -> str:
    """A dataset name: 1-128 characters from a-z, 0-9, '.', '_', '-', starting with a letter or
    digit (it is a path segment of every key of the dataset, so never `..`)."""
    if not isinstance(name, str):
        shown = encoding.describe(name)
        raise InvalidArgument(f"invalid dataset name {shown}: a dataset name is a string of "
                              "1-128 characters from a-z, 0-9, '.', '_', '-'", name=shown)
    if not _NAME_RE.match(name) or ".." in name:
        raise InvalidArgument(
            f"invalid dataset name {name!r}: use 1-128 characters from a-z, 0-9, '.', '_', '-', "
            "starting with a letter or digit", name=name)
    return name


def check_version_number(number: Any, what: str = "version") -> int:
    """A version number: an int from 1 to MAX_VERSION (a bool, a float or a digit string is
    refused; text is read by `parse_version_name`)."""
    if not isinstance(number, int) or isinstance(number, bool) or number < 1:
        raise InvalidArgument(f"{what} must be a positive integer, not "
                              f"{encoding.describe(number)}")
    if number > MAX_VERSION:
        raise InvalidArgument(f"{what} must be a positive integer of at most 10 digits (up to "
                              f"{MAX_VERSION}), not {encoding.describe(number)}")
    return number


class VersionName(NamedTuple):
    """An exact version written as text; `content_digest` is set when it was written as a pin."""

    dataset: str
    version: int
    content_digest: str | None = None


def _forms(dataset: str | None, pin: bool | None) -> str:
    forms = {True: [], False: ["NAME@N"], None: ["NAME@N"]}[pin]
    if dataset is not None:
        forms.insert(0, "N")
    if pin is not False:
        forms.append("the pin NAME@N#b3:<64 hex digits>")
    return ", ".join(forms[:-1]) + " or " + forms[-1] if len(forms) > 1 else forms[0]


def _refused(problem: str, text: Any, dataset: str | None, pin: bool | None) -> InvalidArgument:
    # `problem` alone is what the command line puts in its usage message
    return InvalidArgument(f"{problem}; expected {_forms(dataset, pin)}",
                           reason="INVALID_VERSION_NAME", problem=problem,
                           value=text if isinstance(text, str) else encoding.describe(text))


def parse_version_name(text: Any, *, dataset: str | None = None,
                       pin: bool | None = None) -> VersionName:
    """`NAME@N`, or the pin `NAME@N#b3:<64 hex digits>` (`pin`: True, only a pin; False, never
    one); with `dataset`, also a bare `N` naming a version of that dataset (`[NAME@]B`).

    N is a number from 1 to MAX_VERSION in ASCII digits (never `²`, `١` or `１`; leading zeros
    are read, `01` is 1, except in a pin), NAME a dataset name and the digest a digest
    (uppercase hex folded). Raises InvalidArgument only: reason
    INVALID_VERSION_NAME for the shape and the number (its `problem` field says what is wrong),
    the refusal of `check_dataset_name` or `parse_digest` for the name or the digest."""
    if not isinstance(text, str):
        raise _refused(f"{encoding.describe(text)} is not a version name", text, dataset, pin)
    head, hashed, digest = text.partition("#") if pin is not False else (text, "", "")
    name, at, number = head.rpartition("@")
    if not at and dataset is not None:
        name = dataset
    elif not at:
        raise _refused(f"{text!r} names no version (NAME@N)", text, dataset, pin)
    elif not name:
        raise _refused(f"{text!r} names no dataset", text, dataset, pin)
    # A pin is stored with results and compared as text: its number has one spelling.
    digits = number.lstrip("0")
    if not (number.isascii() and number.isdigit()) or not 0 < len(digits) <= 10 or \
            int(digits) > MAX_VERSION or hashed and digits != number:
        raise _refused(f"{number!r} is not a version number", text, dataset, pin)
    if pin and not hashed:
        raise _refused(f"{text!r} names no content digest (#b3:...)", text, dataset, pin)
    check_dataset_name(name)
    return VersionName(name, int(digits), parse_digest(digest, "pin digest") if hashed else None)


def format_version_name(name: VersionName) -> str:
    """`NAME@N`, or `NAME@N#b3:<64 hex>` with a content digest: what `parse_version_name`
    reads back as `name`."""
    text = f"{name.dataset}@{name.version}"
    return text if name.content_digest is None else f"{text}#{name.content_digest}"


class Pin(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """An exact version and the digest of its set: `str(pin)` is `name@3#b3:<64 hex>`."""

    dataset: str
    version: int
    content_digest: str

    def __str__(self) -> str:
        return format_version_name(VersionName(self.dataset, self.version, self.content_digest))

    @classmethod
    def parse(cls, text: str) -> "Pin":
        """The pin written as `DATASET@VERSION#b3:<64 hex>` (uppercase hex is folded)."""
        try:
            name = parse_version_name(text.strip() if isinstance(text, str) else text, pin=True)
        except InvalidArgument as exc:
            if exc.reason == "INVALID_VERSION_NAME":
                raise _not_a_pin(text) from None
            raise InvalidArgument(f"{text!r} is not a pin ({exc.message}); expected {PIN_FORM}",
                                  reason="INVALID_PIN", value=text) from None
        return cls(name.dataset, name.version, name.content_digest)


def _not_a_pin(text: Any) -> InvalidArgument:
    shown = encoding.describe(text) if isinstance(text, str) else f"a {type(text).__name__}"
    return InvalidArgument(f"{shown} is not a pin; expected {PIN_FORM}, e.g. "
                           f"evals@3#b3:{'0' * 64}", reason="INVALID_PIN",
                           value=text if isinstance(text, str) else shown)


def as_pin(pin: Any) -> Pin:
    """A `Pin`, given as one or as its string."""
    if isinstance(pin, Pin):
        # A Pin built by hand is not validated: its fields may have any type.
        if not (isinstance(pin.dataset, str) and isinstance(pin.version, int)
                and isinstance(pin.content_digest, str)):
            raise InvalidArgument("a cas.Pin holds a dataset name (str), a version number (int) "
                                  "and a content_digest (str), not "
                                  f"{encoding.describe(pin.dataset)}, "
                                  f"{encoding.describe(pin.version)}, "
                                  f"{encoding.describe(pin.content_digest)}",
                                  reason="INVALID_PIN")
        return pin
    if isinstance(pin, str):
        return Pin.parse(pin)
    raise InvalidArgument(f"a pin must be a cas.Pin or its string ({PIN_FORM}), not "
                          f"{type(pin).__name__}", reason="INVALID_PIN")
