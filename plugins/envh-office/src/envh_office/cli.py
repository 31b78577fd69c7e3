"""``envh office check``: what OfficeQA and SpreadsheetBench data, and which system parts,
are found, and how to obtain what is missing."""

from __future__ import annotations

import json
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
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def check(officeqa_data: str | None, corpus: str | None, split_manifest: str | None,
          spreadsheetbench_data: str | None, as_json: bool) -> None:
    """Say what is found and what is missing; exit 1 when anything is missing."""
    from envh_office import qa_data, sheet_data

    report = {
        "officeqa": qa_data.check(officeqa_data, corpus, split_manifest),
        "spreadsheetbench": sheet_data.check(spreadsheetbench_data),
        "system": {"libreoffice": shutil.which("soffice") or "missing: apt-get install libreoffice-calc-nogui",
                   "docker_sandbox": _docker_status()},
    }
    missing = any(part["missing"] for part in (report["officeqa"], report["spreadsheetbench"]))
    missing = missing or any(str(v).startswith(("missing", "daemon up")) for v in report["system"].values())
    if as_json:
        click.echo(json.dumps(report, indent=1))
    else:
        for name in ("officeqa", "spreadsheetbench"):
            part = report[name]
            click.echo(f"{name}:")
            for key, value in part["found"].items():
                click.echo(f"  found {key}: {json.dumps(value)}")
            for item in part["missing"]:
                click.echo(f"  MISSING {item}")
        for key, value in report["system"].items():
            click.echo(f"{key}: {value}")
    if missing:
        raise SystemExit(1)
