"""Each package uses the others only through their public surface: no plugin (code or tests)
imports another package's private module or name (a ``_``-prefixed part), or reads a
``_``-prefixed attribute of a module of another package. A third party's plugin can only
do the same, so ours must show that it is enough."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _packages() -> dict[str, str]:
    """Import package → the directory of the distribution that owns it."""
    owners = {"envh": "core"}
    for init in sorted(ROOT.glob("plugins/*/src/*/__init__.py")):
        owners[init.parent.name] = init.parents[2].name
    return owners


PACKAGES = _packages()

#: Crossings allowed by name, each with its reason (none: the workspace answers its
#: meta-actions through core's public ``EnvHarness.answer_action``).
ALLOWED: set[tuple[str, str]] = set()


def _private(dotted: str) -> bool:
    return any(p.startswith("_") and not p.startswith("__") for p in dotted.split("."))


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def crossings(source: str, owner: str) -> list[str]:
    """Every use in ``source`` (a file of package ``owner``) of another package's private
    module, name or module attribute, as ``line: what``."""
    tree = ast.parse(source)
    found: list[str] = []
    modules: dict[str, str] = {}  # local name → another package's module it is bound to

    def foreign(dotted: str) -> bool:
        top = dotted.split(".")[0]
        return top in PACKAGES and PACKAGES[top] != owner

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if foreign(alias.name):
                    if _private(alias.name):
                        found.append(f"{node.lineno}: import {alias.name}")
                    modules[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else \
                        alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and foreign(node.module):
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                if _private(full):
                    found.append(f"{node.lineno}: from {node.module} import {alias.name}")
                elif _is_module(full):
                    modules[alias.asname or alias.name] = full
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            chain, value = [node.attr], node.value
            while isinstance(value, ast.Attribute):
                chain.append(value.attr)
                value = value.value
            if isinstance(value, ast.Name) and value.id in modules:
                found.append(f"{node.lineno}: {modules[value.id]}.{'.'.join(reversed(chain))}")
    return found


def _plugin_files() -> list[Path]:
    return sorted(p for p in ROOT.glob("plugins/*/*/**/*.py") if p.parts[len(ROOT.parts) + 2] in ("src", "tests"))


@pytest.mark.parametrize("path", _plugin_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_a_plugin_uses_other_packages_only_through_their_public_names(path: Path) -> None:
    owner = path.relative_to(ROOT).parts[1]
    rel = path.relative_to(ROOT).as_posix()
    found = [c for c in crossings(path.read_text(), owner) if (rel, c.split(": ", 1)[1]) not in ALLOWED]
    assert found == []


def test_the_check_finds_each_kind_of_crossing() -> None:
    """The check itself: each form of reaching into another package is found, a package's
    own private parts and public names are not."""
    other = "envh_rigger"
    assert other in PACKAGES
    found = crossings(
        "import envh.jail._private\n"
        "from envh.jail.process import _live\n"
        "from envh.jail import process\n"
        "process._live.clear()\n"
        "import envh.jail.process as p\n"
        "p._live\n"
        f"import {other}\n"
        f"{other}.weakness._compile\n"
        "from envh.jail import process as q\n"
        "q.live_count()\n"
        "from envh import errors\n",
        owner="envh-ui")
    assert sorted(int(f.split(":")[0]) for f in found) == [1, 2, 4, 6, 8], found
    assert crossings("from envh_ui.playground import _private\n", owner="envh-ui") == []
