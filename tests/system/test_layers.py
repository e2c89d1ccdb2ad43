"""The house rules of shared/DESIGN.md, read from the code's own imports (imports inside
functions included): imports only go down the layers, no module imports itself back through
others, chains of imports stay short, `cas` never imports an interface, and every module has
its test file (tests/<package path>/test_<module>.py)."""

from __future__ import annotations

import ast
import pathlib

import pytest

from support import ROOT

# Layer of each folder of cas (a module outside the folders is L0). evals and interop are both
# L4: evals may use interop (a suite exports a version), interop never uses evals.
RANK = {"errors": 0, "digest": 0, "format": 1, "storage": 2, "repo": 3, "interop": 4,
        "evals": 5}
INTERFACES = ("cas_cli", "cas_web", "click", "starlette", "uvicorn", "jinja2")
MAX_CHAIN = 12  # modules in the longest chain of modules importing modules


def _modules() -> dict[str, pathlib.Path]:
    found = {}
    for package in ("cas", "cas_cli", "cas_web"):
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


MODULES = _modules()


def _imports(name: str, path: pathlib.Path) -> set[str]:
    """The modules `name` imports (a name imported from a package counts as its submodule when
    there is one); a submodule importing its own package is not counted."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            targets = [base] + [f"{base}.{a.name}" for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in MODULES:
                target = target.rpartition(".")[0]
            if target and target != name and not name.startswith(target + "."):
                found.add(target)
    return found


def _all_imports(name: str, path: pathlib.Path) -> set[str]:
    """Every top-level module name `name` imports, inside or outside the project."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module.split(".")[0])
    return found


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def _rank(name: str) -> int | None:
    parts = name.split(".")
    if parts[0] != "cas" or len(parts) == 1:
        return None  # the package face and the interfaces sit above every layer
    return RANK.get(parts[1], 0)


def _longest_chain() -> list[str]:
    memo: dict[str, list[str]] = {}

    def walk(name: str, path: tuple[str, ...]) -> list[str]:
        if name in path:
            raise AssertionError("import circle: " + " -> ".join(path + (name,)))
        if name not in memo:
            below = [walk(target, path + (name,)) for target in sorted(GRAPH[name])]
            memo[name] = [name] + max(below, key=len, default=[])
        return memo[name]

    return max((walk(name, ()) for name in sorted(GRAPH)), key=len)


def test_the_graph_is_read():
    """The reader finds the imports it checks (a reader finding none would pass every rule)."""
    assert "cas.format.encoding" in GRAPH["cas.storage.tree"]
    assert "cas.errors" in GRAPH["cas.digest"]
    assert len(MODULES) > 60


def test_imports_only_go_down_the_layers():
    upward = [f"{name} (L{_rank(name)}) imports {target} (L{_rank(target)})"
              for name, targets in GRAPH.items() if _rank(name) is not None
              for target in targets if _rank(target) is None or _rank(target) > _rank(name)]
    assert upward == []


def test_no_import_circle_and_chains_are_short():
    chain = _longest_chain()
    assert len(chain) <= MAX_CHAIN, " -> ".join(chain)


@pytest.mark.parametrize("name", sorted(n for n in MODULES if n.split(".")[0] == "cas"))
def test_the_library_never_imports_an_interface(name):
    assert _all_imports(name, MODULES[name]) & set(INTERFACES) == set()


def _test_file(name: str, path: pathlib.Path) -> pathlib.Path:
    parts = name.split(".")
    folder = {"cas": [], "cas_cli": ["cli"], "cas_web": ["web"]}[parts[0]] + parts[1:-1]
    return ROOT.joinpath("tests", *folder, f"test_{parts[-1]}.py")


def _defines_something(path: pathlib.Path) -> bool:
    """Whether a module defines a function or a class (a package's face that only names its
    files and imports from them has nothing of its own to test)."""
    return any(isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
               for node in ast.parse(path.read_text()).body)


def test_every_module_has_its_test_file():
    missing = sorted(str(_test_file(name, path).relative_to(ROOT))
                     for name, path in MODULES.items()
                     if len(name.split(".")) > 1 and _defines_something(path)
                     and not _test_file(name, path).exists())
    assert missing == []
