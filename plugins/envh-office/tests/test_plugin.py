"""The plugin's records, lazy import, and ``envh office check``."""

from __future__ import annotations

import json
import subprocess
import sys

import envh
import envh_office.hooks
from click.testing import CliRunner


def test_records_load():
    reg = envh.make_plugin_manager(entry_points=False, plugins=[envh_office.hooks])
    assert {"officeqa", "spreadsheetbench"} <= set(reg.bridges())
    templates = reg.templates()
    assert {n for n, t in templates.items() if t.bridge == "officeqa"} == {
        "officeqa.narrow-corpus", "officeqa.point-pages", "officeqa.require-citation", "officeqa.hide-index"}
    assert {n for n, t in templates.items() if t.bridge == "spreadsheetbench"} == {
        "spreadsheetbench.reveal-range", "spreadsheetbench.prefill-headers", "spreadsheetbench.forbid-python",
        "spreadsheetbench.validate-before-submit"}
    for info in [*reg.bridges().values(), *templates.values()]:
        if info.name in ("officeqa", "spreadsheetbench") or info.name.startswith(("officeqa.", "spreadsheetbench.")):
            assert callable(info.load())


def test_import_is_cheap():
    code = ("import sys, envh_office.hooks; heavy = [m for m in ('docker', 'openpyxl', 're2', 'pandas') "
            "if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_check_reports_found_and_missing(officeqa_dirs, sheet_data, tmp_path):
    from envh_office.cli import office

    runner = CliRunner()
    ok = runner.invoke(office, ["check", "--json", "--officeqa-data", officeqa_dirs["data"], "--corpus",
                                officeqa_dirs["corpus"], "--split-manifest", officeqa_dirs["split_manifest"],
                                "--spreadsheetbench-data", sheet_data])
    report = json.loads(ok.output)
    assert report["officeqa"]["found"]["questions"]["count"] == 3
    assert report["officeqa"]["found"]["splits"] == {"train": 1, "test": 2}
    assert report["officeqa"]["found"]["corpus"]["documents"] == 6
    assert report["officeqa"]["missing"] == [] and report["spreadsheetbench"]["missing"] == []
    assert report["spreadsheetbench"]["found"] == {"tasks": 3, "test_cases": 5}
    missing = runner.invoke(office, ["check", "--officeqa-data", str(tmp_path), "--corpus", str(tmp_path / "no"),
                                     "--spreadsheetbench-data", str(tmp_path)], env={"SPREADSHEETBENCH_DATA": ""})
    assert missing.exit_code == 1
    assert "MISSING question CSV" in missing.output and "gated upstream" in missing.output
    assert "MISSING corpus folder" in missing.output and "No SpreadsheetBench dataset.json" in missing.output
