"""``envh experiment``: run a declared comparison of training arms and write its report."""

from __future__ import annotations

import json
from pathlib import Path

import click
from envh.hostpaths import data_option


@click.command("experiment")
@click.argument("experiment_file", metavar="EXPERIMENT")
@click.option("--out", default=None, help="Result folder (default: runs/experiment/NAME).")
@click.option("--resume", is_flag=True, help="Continue a stopped run in --out (refused if the file changed).")
@click.option("--reuse", "reuse", default=None, metavar="FOLDER",
              help="Start a new --out, copying each finished result of FOLDER (another experiment's) that the same "
                   "settings made: after a change to one arm, only what it changed runs again.")
@click.option("--report-only", is_flag=True, help="Rebuild report.md and the plots from the files in --out.")
@click.option("--check", is_flag=True, help="Check the file (held-out separation included) and exit.")
@data_option
def experiment(experiment_file: str, out: str | None, resume: bool, reuse: str | None, report_only: bool,
               check: bool) -> None:
    """Train every arm of EXPERIMENT (a YAML file or a shipped example such as
    toy24-adaptive) with every seed, evaluate on the held-out tasks, write the report.

    One line per arm and step; the last line is the summary as JSON."""
    from .config import load
    from .report import build_report, summary
    from .runner import Runner

    exp = load(experiment_file)
    folder = Path(out or f"runs/experiment/{exp.name}")
    runner = Runner(exp, folder, resume=resume, reuse=reuse, echo=click.echo)
    if check:
        runner._check_separation()
        runner.check_settings()
        click.echo(f"{exp.name}: {len(exp.arms)} arms x {len(exp.seeds)} seeds, "
                   f"{len(exp.train_tasks.ids)} training tasks, {len(exp.heldout_ids())} held-out tasks: ok")
        return
    if report_only:
        if not (folder / "experiment.json").exists():
            raise click.ClickException(f"{folder} holds no experiment")
        click.echo(f"report: {build_report(folder)}")
    else:
        runner.run()
    click.echo(json.dumps(headline(summary(folder)), sort_keys=True, default=str))


def headline(s: dict[str, object]) -> dict[str, object]:
    """The summary's one-line form: final held-out success per arm and each comparison."""
    final = s.get("final") or {}
    compare = s.get("compare") or []
    return {"experiment": s.get("name"),
            "final": {arm: {k: v.get(k) for k in ("rate", "low", "high", "n")} for arm, v in final.items()},  # type: ignore[union-attr]
            "compare": [{k: c.get(k) for k in ("a", "b", "mean", "low", "high", "pairs", "meets_target")}
                        for c in compare],  # type: ignore[union-attr]
            "incomplete": s.get("incomplete")}
