"""Sessions: one per package (core and each plugins/*), all plugins together, lint, types.

The README's test command (dev/test.sh) runs everything in one environment, which is
what CI uses; these sessions check that each package also stands alone.
"""

from __future__ import annotations

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


for _plugin in PLUGINS:

    def _session(session: nox.Session, plugin: Path = _plugin) -> None:
        session.install("-e", "core[test]", "-e", str(plugin))
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
    session.run("ruff", "check", "core/src", "plugins", "bench", "tests")


@nox.session
def types(session: nox.Session) -> None:
    """mypy on core."""
    session.install("-e", "core", "mypy", "types-PyYAML")
    session.chdir("core")  # picks up [tool.mypy] from core/pyproject.toml
    session.run("mypy", "src/envh")
