"""envh hook implementations of envh-office: two bridges, their templates, ``envh office``.

Only records here; openpyxl, docker and RE2 load when a factory is first used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from envh import BridgeInfo, TemplateInfo, hookimpl

if TYPE_CHECKING:
    import click


@hookimpl
def envh_bridges() -> list[BridgeInfo]:
    return [
        BridgeInfo(name="officeqa", factory="envh_office.qa_bridge:OfficeQAEnv",
                   data_paths=("{data}", "{corpus}", "{split_manifest}", "OFFICEQA_DATA=", "OFFICEQA_CORPUS=",
                               "OFFICEQA_SPLITS="),
                   description="OfficeQA: answer questions from U.S. Treasury Bulletins with glob, read, "
                               "grep and answer; graded by the benchmark's number and text matching."),
        BridgeInfo(name="spreadsheetbench", factory="envh_office.sheet_bridge:SpreadsheetBenchEnv",
                   host_access=("docker",), data_paths=("{data}", "SPREADSHEETBENCH_DATA="),
                   description="SpreadsheetBench: edit a workbook (run_python in a container, native cell "
                               "tools); graded at answer_position after LibreOffice recalculation."),
    ]


@hookimpl
def envh_templates() -> list[TemplateInfo]:
    q, s = "envh_office.qa_design", "envh_office.sheet_design"
    return [
        TemplateInfo(name="officeqa.narrow-corpus", factory=f"{q}:NarrowCorpus", bridge="officeqa",
                     description="scaffold: grep, glob and read reach only the source bulletins (contract)"),
        TemplateInfo(name="officeqa.point-pages", factory=f"{q}:PointPages", bridge="officeqa",
                     description="scaffold: name the source bulletin and page range in the first observation (contract)"),
        TemplateInfo(name="officeqa.require-citation", factory=f"{q}:RequireCitation", bridge="officeqa",
                     description="pressure: answer must quote a line the policy has read (contract)"),
        TemplateInfo(name="officeqa.hide-index", factory=f"{q}:HideIndex", bridge="officeqa",
                     description="pressure: no bulletin index in the first observation; 2: no glob either (contract)"),
        TemplateInfo(name="spreadsheetbench.reveal-range", factory=f"{s}:RevealRange", bridge="spreadsheetbench",
                     description="scaffold: name the answer range in the first observation (contract)"),
        TemplateInfo(name="spreadsheetbench.prefill-headers", factory=f"{s}:PrefillHeaders",
                     bridge="spreadsheetbench",
                     description="scaffold: write the answer range's header row from the golden workbook (stage)"),
        TemplateInfo(name="spreadsheetbench.forbid-python", factory=f"{s}:ForbidPython", bridge="spreadsheetbench",
                     description="pressure: run_python is blocked; only the native tools (contract)"),
        TemplateInfo(name="spreadsheetbench.validate-before-submit", factory=f"{s}:ValidateBeforeSubmit",
                     bridge="spreadsheetbench",
                     description="pressure: submit is refused until validate ran after the last edit (contract)"),
    ]


@hookimpl
def envh_register_commands(cli: click.Group) -> None:
    from envh_office.cli import office

    cli.add_command(office)
