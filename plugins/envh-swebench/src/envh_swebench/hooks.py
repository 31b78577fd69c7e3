"""envh plugin hooks of envh-swebench: the ``swebench`` bridge and its designer templates.

Only records here; docker and swebench load when the factory is first used.
"""

from __future__ import annotations

from envh import BridgeInfo, TemplateInfo, hookimpl


@hookimpl
def envh_bridges() -> list[BridgeInfo]:
    return [BridgeInfo(
        name="swebench", factory="envh_swebench.bridge:SWEBenchEnv", host_access=("docker",),
        data_paths=("{instances}",),
        description="SWE-bench: fix a repository issue in a Docker container (bash, "
                    "str_replace_editor, submit); graded by swebench's own test-log parsers.")]


@hookimpl
def envh_templates() -> list[TemplateInfo]:
    d = "envh_swebench.design"
    return [
        TemplateInfo(name="swebench.verify-tests", factory=f"{d}:VerifyTests", bridge="swebench",
                     description="pressure: refuse submit until the tests ran (after the last edit) (contract)"),
        TemplateInfo(name="swebench.truncate-output", factory=f"{d}:TruncateOutput", bridge="swebench",
                     description="pressure: keep only the tail of bash output (contract)"),
        TemplateInfo(name="swebench.reveal-failing-tests", factory=f"{d}:RevealFailingTests", bridge="swebench",
                     description="scaffold: name the FAIL_TO_PASS tests in the first observation (contract)"),
    ]
