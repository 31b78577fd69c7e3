"""Sessions: one per package (core and each plugins/*), all plugins together, lint, types.

The README's test command (dev/test.sh) runs everything in one environment, which is
what CI uses; these sessions check that each package also stands alone.
"""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path

import nox

ROOT = Path(__file__).parent
PLUGINS = sorted(p.parent for p in ROOT.glob("plugins/*/pyproject.toml"))
nox.options.sessions = ["core", "lint"]
nox.options.reuse_existing_virtualenvs = True


def _name(path: Path) -> str:
    return tomllib.loads((path / "pyproject.toml").read_text())["project"]["name"]


@nox.session
def core(session: nox.Session) -> None:
    """Core alone: envh with no plugins installed."""
    session.install("-e", "core[test]")
    session.run("pytest", "core/tests", *session.posargs)


def _requirements(plugin: Path, extras: tuple[str, ...] = ()) -> set[str]:
    """The distribution names ``plugin`` requires, with those of its ``extras``."""
    project = tomllib.loads((plugin / "pyproject.toml").read_text())["project"]
    deps = list(project.get("dependencies", []))
    for extra in extras:
        deps += project.get("optional-dependencies", {}).get(extra, [])
    return {d.split(">")[0].split("=")[0].split("[")[0].split("<")[0].split(";")[0].strip() for d in deps}


def _local_requirements(plugin: Path) -> list[str]:
    """``-e`` arguments for the plugins of this repository ``plugin`` needs (they are not on
    the package index): those its code depends on and those its tests do (its ``test``
    extra, e.g. envh-adaptive for a bridge whose tests play its curriculum), and theirs."""
    local = {_name(p): p for p in PLUGINS}
    wanted, todo = set(), sorted(_requirements(plugin, ("test",)) & set(local))
    while todo:
        name = todo.pop()
        if name not in wanted and local[name] != plugin:
            wanted.add(name)
            todo += sorted(_requirements(local[name]) & set(local))
    return [a for n in sorted(wanted) for a in ("-e", str(local[n]))]


def _with_test_extra(plugin: Path) -> str:
    """``plugin``, with ``[test]`` when it declares that extra."""
    project = tomllib.loads((plugin / "pyproject.toml").read_text())["project"]
    return f"{plugin}[test]" if "test" in project.get("optional-dependencies", {}) else str(plugin)


for _plugin in PLUGINS:

    def _session(session: nox.Session, plugin: Path = _plugin) -> None:
        session.install("-e", "core[test]", *_local_requirements(plugin), "-e", _with_test_extra(plugin))
        session.run("pytest", str(plugin / "tests"), *session.posargs)

    _session.__doc__ = f"{_name(_plugin)} on its own, with core."
    nox.session(name=_name(_plugin))(_session)


@nox.session(name="all-plugins")
def all_plugins(session: nox.Session) -> None:
    """Every package installed together, every test (what dev/test.sh runs)."""
    session.install("-e", "core[test,openai,export]", *[a for p in PLUGINS for a in ("-e", str(p))])
    session.run("pytest", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff over the whole tree."""
    session.install("ruff")
    session.run("ruff", "check", "core/src", "core/tests", "plugins", "bench", "tests")


@nox.session
def types(session: nox.Session) -> None:
    """mypy on core and the plugins dev/test.sh checks (envh-ui, envh-adaptive)."""
    session.install("-e", "core", "-e", "plugins/envh-ui", "-e", "plugins/envh-adaptive", "mypy", "types-PyYAML")
    session.chdir("core")  # picks up [tool.mypy] from core/pyproject.toml
    session.run("mypy", "src/envh", "../plugins/envh-ui/src/envh_ui", "../plugins/envh-adaptive/src/envh_adaptive")


@nox.session(reuse_venv=False, default=False)
def wheels(session: nox.Session) -> None:
    """The publishable path: build every package's wheel, install them into this fresh
    venv from the wheel files alone (dependencies from the package index), and check that
    ``envh plugins`` loads every plugin without a failure."""
    dist = Path(session.create_tmp()) / "dist"
    shutil.rmtree(dist, ignore_errors=True)
    packages = [ROOT / "core", *PLUGINS]
    session.run("python", "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dist), *map(str, packages))
    built = sorted(dist.glob("*.whl"))
    names = {_name(p).replace("-", "_") for p in packages}
    missing = names - {w.name.split("-")[0] for w in built}
    if missing:
        session.error(f"no wheel built for {sorted(missing)}")
    session.install(*map(str, built))
    session.run("envh", "plugins")
    session.run("envh", "tasks", "toy24", "--split", "easy")
