"""Each package imports only itself and the packages of this repository it declares as
dependencies. In a fresh interpreter where every other package of the repository is
unimportable, every module of the package imports and every contribution its hooks
register resolves (factories, spec types). ``nox -s <package>`` checks the same in a venv
of its own; this is the fast form the whole suite runs on every change."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _distributions() -> dict[str, tuple[str, Path]]:
    """Distribution name → (import package, its source directory)."""
    found = {"envh": ("envh", ROOT / "core" / "src" / "envh")}
    for project in sorted(ROOT.glob("plugins/*/pyproject.toml")):
        name = tomllib.loads(project.read_text())["project"]["name"]
        (src,) = [p.parent for p in (project.parent / "src").glob("*/__init__.py")]
        found[name] = (src.name, src)
    return found


DISTS = _distributions()


def _declared(name: str) -> set[str]:
    """The import packages of this repository that ``name`` may import: itself and its
    declared (non-optional) dependencies among them, transitively."""
    allowed: set[str] = set()
    todo = [name]
    while todo:
        dist = todo.pop()
        if DISTS[dist][0] in allowed:
            continue
        allowed.add(DISTS[dist][0])
        path = ROOT / "core" if dist == "envh" else DISTS[dist][1].parents[1]
        deps = tomllib.loads((path / "pyproject.toml").read_text())["project"].get("dependencies", [])
        for dep in deps:
            base = dep.split(";")[0].split("[")[0]
            for cut in "<>=!~ ":
                base = base.split(cut)[0]
            if base in DISTS:
                todo.append(base)
    return allowed


CHILD = r"""
import importlib, importlib.abc, importlib.metadata, json, pkgutil, sys
allowed, refused, package = set(ARGS["allowed"]), set(ARGS["refused"]), ARGS["package"]

class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        top = fullname.split(".")[0]
        if top in refused and top not in allowed:
            raise ImportError(f"{package} imported {fullname}, a package it does not declare")
        return None

sys.meta_path.insert(0, Refuse())
root = importlib.import_module(package)
names = [package] + [m.name for m in pkgutil.walk_packages(root.__path__, package + ".")]
optional = []
for name in names:
    try:
        importlib.import_module(name)
    except ModuleNotFoundError as exc:  # a third-party part only some runs have (verl, LibreOffice's uno)
        if exc.name is None or exc.name.split(".")[0] in refused:
            raise
        optional.append(f"{name}: {exc.name}")
resolved = 0
if package != "envh":
    from envh.plugins.records import resolve
    hooks = [ep for ep in importlib.metadata.entry_points(group="envh") if ep.value.split(".")[0] == package]
    for ep in hooks:
        module = ep.load()
        for hook in dir(module):
            fn = getattr(module, hook)
            if not hook.startswith("envh_") or not callable(fn) or hook == "envh_register_commands" \
                    or hook == "envh_configure_converter":
                continue
            for record in fn() or []:
                for field in ("factory", "spec_type"):
                    value = getattr(record, field, None)
                    if isinstance(value, str) and ":" in value:
                        resolve(value)
                        resolved += 1
print(json.dumps({"modules": len(names), "resolved": resolved, "optional": optional}))
"""


@pytest.mark.parametrize("dist", sorted(DISTS))
def test_a_package_imports_only_what_it_declares(dist: str) -> None:
    package = DISTS[dist][0]
    allowed = _declared(dist)
    refused = {pkg for pkg, _ in DISTS.values()}
    script = f"ARGS = {json.dumps({'allowed': sorted(allowed), 'refused': sorted(refused), 'package': package})}\n"
    proc = subprocess.run([sys.executable, "-c", script + CHILD], capture_output=True, text=True, timeout=600,
                          cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    counts = json.loads(proc.stdout.strip().splitlines()[-1])
    assert counts["modules"] >= 1
    assert len(counts["optional"]) <= 2, counts["optional"]  # only modules for another runtime


def test_the_check_refuses_an_undeclared_package(tmp_path: Path) -> None:
    """The check itself: core, made to import a plugin, fails it."""
    script = (f"ARGS = {json.dumps({'allowed': ['envh'], 'refused': ['envh', 'envh_rigger'], 'package': 'envh'})}\n"
              "import sys; sys.modules.pop('envh_rigger', None)\n")
    probe = CHILD.replace("root = importlib.import_module(package)", "import envh_rigger\nroot = None")
    proc = subprocess.run([sys.executable, "-c", script + probe], capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "envh imported envh_rigger, a package it does not declare" in proc.stderr
