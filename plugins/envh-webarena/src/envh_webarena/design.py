"""Web templates for the template designer (``envh_templates``).

Each follows the designer's template protocol: ``name``, ``direction`` (``"scaffold"`` or
``"pressure"``), ``magnitudes(env, task)`` and ``instantiate(env, task, magnitude)``
returning layer spec dicts. The contract code they write uses only what the contract
sandbox allows (``re``, the action, the state).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

_SAME_HOST = '''import re

ALLOWED = HOSTS


def filter_action(action, state, memo):
    if action.tool != "goto":
        return None
    m = re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://([^/?#]*)", str(action.args.get("url", "")).strip())
    host = m.group(1).lower() if m else ""
    if host not in ALLOWED:
        return Block(reason="goto may only open pages on " + ", ".join(ALLOWED) + "; got host " + repr(host[:80]))
    return None
'''

_SHORT_TREE = '''def filter_observation(observation, state, memo):
    head, sep, tree = observation.text.partition("Accessibility tree:")
    if not sep:
        return observation.text
    lines = tree.strip("\\n").split("\\n")
    if len(lines) <= LIMIT:
        return observation.text
    return head + sep + "\\n" + "\\n".join(lines[:LIMIT]) + "\\n(... " + str(len(lines) - LIMIT) + " more lines hidden)"
'''


def same_host_contract(hosts: list[str]) -> dict[str, Any]:
    """A contract refusing ``goto`` to any host (``host[:port]``) not in ``hosts``."""
    clean = sorted({h.lower() for h in hosts if h})
    return {"kind": "contract", "code": _SAME_HOST.replace("HOSTS", repr(clean))}


def short_tree_contract(lines: int) -> dict[str, Any]:
    """A contract showing only the first ``lines`` lines of the accessibility tree."""
    return {"kind": "contract", "code": _SHORT_TREE.replace("LIMIT", str(int(lines)))}


class SameHost:
    """Pressure: the agent may not ``goto`` hosts other than its start pages' hosts."""

    name = "web.same-host"
    direction = "pressure"

    def magnitudes(self, env: Any, task: Any) -> list[Any]:
        return [1]

    def instantiate(self, env: Any, task: Any, magnitude: Any) -> list[dict[str, Any]]:
        state = env.get_env_state()
        starts = str(state.get("start_url") or state.get("url") or "").split(" |AND| ")
        return [same_host_contract([urlsplit(u.strip()).netloc for u in starts])]


class ShortTree:
    """Pressure: hide all but the first lines of the accessibility tree."""

    name = "web.short-tree"
    direction = "pressure"

    def magnitudes(self, env: Any, task: Any) -> list[Any]:
        return [60, 30]

    def instantiate(self, env: Any, task: Any, magnitude: Any) -> list[dict[str, Any]]:
        return [short_tree_contract(int(magnitude))]
