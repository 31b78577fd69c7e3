"""``envh office check``: what OfficeQA and SpreadsheetBench data, and which system parts,
are found, and how to obtain what is missing."""

from __future__ import annotations

import json
import os
import shutil

import click


def _docker_status() -> str:
    from envh_office import sandbox

    try:
        c = sandbox.client()
    except Exception as exc:  # noqa: BLE001 - a status line, not a failure
        return f"missing ({exc})"
    try:
        c.images.get(sandbox.IMAGE)
    except Exception:  # noqa: BLE001
        return f"daemon up, image {sandbox.IMAGE} missing: bash plugins/envh-office/images/build.sh"
    return f"ready ({sandbox.IMAGE})"


@click.group(name="office")
def office() -> None:
    """OfficeQA and SpreadsheetBench: check data and system parts."""


@office.command()
@click.option("--officeqa-data", default=None, help="OfficeQA CSV or its folder (default: $OFFICEQA_DATA).")
@click.option("--corpus", default=None, help="OfficeQA corpus folder (default: $OFFICEQA_CORPUS).")
@click.option("--split-manifest", default=None, help="OfficeQA split manifest JSON (default: $OFFICEQA_SPLITS).")
@click.option("--spreadsheetbench-data", default=None,
              help="Folder with dataset.json and spreadsheet/ (default: $SPREADSHEETBENCH_DATA).")
@click.option("--benchmark", "benchmarks", multiple=True, type=click.Choice(["officeqa", "spreadsheetbench"]),
              help="Check only this benchmark (repeatable). Default: those whose options or environment "
                   "variables are set, or both when none is.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def check(officeqa_data: str | None, corpus: str | None, split_manifest: str | None,
          spreadsheetbench_data: str | None, benchmarks: tuple[str, ...], as_json: bool) -> None:
    """Say what is found and what is missing; exit 1 when anything a checked benchmark needs is
    missing (LibreOffice and the sandbox image are SpreadsheetBench's needs only)."""
    from envh_office import qa_data, sheet_data

    wanted = set(benchmarks) or _asked_for(officeqa_data or corpus or split_manifest, spreadsheetbench_data)
    report: dict[str, dict] = {}
    if "officeqa" in wanted:
        report["officeqa"] = qa_data.check(officeqa_data, corpus, split_manifest)
    if "spreadsheetbench" in wanted:
        report["spreadsheetbench"] = sheet_data.check(spreadsheetbench_data)
        report["system"] = {"libreoffice": shutil.which("soffice") or "missing: apt-get install libreoffice-calc-nogui",
                            "docker_sandbox": _docker_status()}
    parts = [report[n] for n in ("officeqa", "spreadsheetbench") if n in report]
    missing = any(part["missing"] for part in parts)
    missing = missing or any(str(v).startswith(("missing", "daemon up")) for v in report.get("system", {}).values())
    if as_json:
        click.echo(json.dumps(report, indent=1))
    else:
        for name in ("officeqa", "spreadsheetbench"):
            if name not in report:
                continue
            part = report[name]
            click.echo(f"{name}:")
            for key, value in part["found"].items():
                click.echo(f"  found {key}: {json.dumps(value)}")
            for item in part["missing"]:
                click.echo(f"  MISSING {item}")
        for key, value in report.get("system", {}).items():
            click.echo(f"{key}: {value}")
    if missing:
        raise SystemExit(1)


def _asked_for(officeqa_option: str | None, sheet_option: str | None) -> set[str]:
    """The benchmarks named by an option or an environment variable; both when none is."""
    asked = set()
    if officeqa_option or any(os.environ.get(v) for v in ("OFFICEQA_DATA", "OFFICEQA_CORPUS", "OFFICEQA_SPLITS")):
        asked.add("officeqa")
    if sheet_option or os.environ.get("SPREADSHEETBENCH_DATA"):
        asked.add("spreadsheetbench")
    return asked or {"officeqa", "spreadsheetbench"}
