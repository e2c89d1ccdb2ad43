"""Every install line the docs and the code's hints print works from a checkout: cas is not on
PyPI, so a line naming the distribution (`pip install 'cas-datasets[web]'`) cannot work, and an
extra a line names (`pip install '.[web]'`) is one pyproject.toml declares."""

from __future__ import annotations

import re
import tomllib

from cas.interop import exports
from support import ROOT

SOURCES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")),
           *(p for package in ("cas", "cas_cli", "cas_web")
             for p in sorted((ROOT / package).rglob("*.py")))]
# `.[EXTRA]` as an install line writes it; in the code a hint may be split across two string
# literals, so the whole text is searched, not each line.
EXTRA = re.compile(r"'\.\[([^\]'\s]+)\]'")


def _texts() -> dict[str, str]:
    return {str(path.relative_to(ROOT)): path.read_text(encoding="utf-8") for path in SOURCES}


def test_no_install_line_names_a_distribution_that_is_not_published():
    """The distribution's name is there only as the name `cas --version` reads its version by."""
    named = [(where, line.strip()) for where, text in _texts().items()
             for line in text.splitlines() if "cas-datasets" in line]
    assert [n for n in named if 'package_name="cas-datasets"' not in n[1]] == []


def test_every_extra_an_install_line_names_is_declared():
    with open(ROOT / "pyproject.toml", "rb") as f:
        declared = set(tomllib.load(f)["project"]["optional-dependencies"])
    named = {(where, extra) for where, text in _texts().items()
             for extra in EXTRA.findall(text) if not extra.startswith("{")}
    # the one hint that fills the extra in: from this table
    named |= {("cas/interop/exports.py", name) for _, name in exports.EXTRAS.values()}
    assert len(named) >= 10  # the docs and the hints were read
    assert sorted((where, e) for where, e in named if e not in declared) == []
