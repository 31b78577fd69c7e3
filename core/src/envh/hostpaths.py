"""Layer options that name a path on the host, in one list.

A spec built as untrusted (``envh.make``'s default: a spec is data from anywhere) may not
set them: the process that builds the stack would read or write wherever they point. Components refuse them
at build time (``refuse_host_paths``), and a designer loop can find them in spec data
before building anything (``host_paths``). A component kind with such an option adds it
here, so every check sees it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import errors

#: kind → option → what the option would let the spec do on the host (curriculum and workspace
#: are envh-adaptive's kinds: listed here, every check sees them whichever plugins are loaded).
HOST_PATH_OPTIONS: Mapping[str, Mapping[str, str]] = {
    "curriculum": {"audit": "the curriculum's `audit` log would append to any file the process can write"},
    "workspace": {"library": "the workspace's `library` would be read and written wherever it points"},
}


def refuse_host_paths(kind: str, spec: Any, trust: str) -> None:
    """Raise ``SpecError`` when an untrusted ``spec`` of component ``kind`` sets a host path."""
    if trust == "trusted":  # anything else, a typo included, is refused
        return
    for option, why in HOST_PATH_OPTIONS.get(kind, {}).items():
        if getattr(spec, option, None) is not None:
            raise errors.SpecError(f"An untrusted spec may not name a host path: {why}. Leave it out, or build "
                                   "the spec with trust='trusted' (--trust-code) if you trust where it points.")


def host_paths(data: Any, where: str = "$") -> list[str]:
    """Where spec ``data`` (layers, chain legs and nested specs included) sets a host path."""
    found: list[str] = []
    if isinstance(data, Mapping):
        for option in HOST_PATH_OPTIONS.get(str(data.get("kind")), {}):
            if data.get(option) is not None:
                found.append(f"{where}.{option}")
        for key, value in data.items():
            found += host_paths(value, f"{where}.{key}")
    elif isinstance(data, list | tuple):
        for i, value in enumerate(data):
            found += host_paths(value, f"{where}[{i}]")
    return found
