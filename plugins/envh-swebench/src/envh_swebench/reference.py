"""SWE-bench's reference solution: the instance's gold patch, applied through the bash tool.

From the reset state (nothing edited yet) the reference writes the gold patch to a file
and applies it with ``git apply`` in the repository, then submits; after other actions
there is no reference from here.
"""

from __future__ import annotations

from typing import Any

from envh import Action

GOLD_PATH = "/tmp/envh_gold.diff"


def gold_patch_actions(env: Any) -> list[Action] | None:
    """``bash`` (write + apply the gold patch) and ``submit``, or ``None``."""
    episode = getattr(env, "_episode", None)
    inst = getattr(env, "inst", None)
    if episode is None or inst is None or episode["actions"] or not getattr(inst, "patch", ""):
        return None
    marker = "ENVH_GOLD_PATCH_END"
    while marker in inst.patch:
        marker += "_"
    patch = inst.patch if inst.patch.endswith("\n") else inst.patch + "\n"
    command = f"cat > {GOLD_PATH} <<'{marker}'\n{patch}{marker}\ngit apply {GOLD_PATH}"
    return [Action(tool="bash", args={"command": command}), Action(tool="submit")]
