"""envh plugin hooks of envh-swebench: contributes the ``swebench`` bridge.

Only records here; docker and swebench load when the factory is first used.
"""

from __future__ import annotations

from envh import BridgeInfo, hookimpl


@hookimpl
def envh_bridges() -> list[BridgeInfo]:
    return [BridgeInfo(
        name="swebench", factory="envh_swebench.bridge:SWEBenchEnv",
        description="SWE-bench: fix a repository issue in a Docker container (bash, "
                    "str_replace_editor, submit); graded by swebench's own test-log parsers.")]
