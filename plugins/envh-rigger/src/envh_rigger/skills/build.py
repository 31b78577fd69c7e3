"""Building a bank from a run directory: pick the episodes, induce, dedupe, save.

``which`` chooses the episodes, so the paper's comparison is one flag apart:
- ``baseline``: episodes on the static env (for a rig run: every spec that is neither an
  accepted nor a rejected candidate, i.e. the Observe rollouts of the original spec);
- ``accepted``: episodes on the accepted reshaped harnesses of a rig run's pool;
- ``all``: every episode in the store (a plain ``envh run`` directory has no pool).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .bank import DEFAULT_MERGE_THRESHOLD, SkillBank
from .embed import Embedder
from .episodes import read_episodes, spec_ids_in
from .induce import Inducer, cases_from, induce_all
from .records import SkillError

CHOICES = ("all", "baseline", "accepted")


def pool_spec_ids(run_dir: str | Path) -> tuple[set[str], set[str]] | None:
    """(accepted, rejected) spec ids of a rig run's pool, or ``None`` without a pool."""
    from ..pool import HarnessPool

    pool = HarnessPool.open(run_dir)
    if not any((pool.root / sub).is_dir() for sub in ("entries", "rejected", "specs")):
        return None
    accepted = {e["spec_id"] for e in pool.entries() if e.get("spec_id")}
    rejected = {e["spec_id"] for e in pool.rejected() if e.get("spec_id")}
    return accepted, rejected


def select_spec_ids(run_dir: str | Path, which: str) -> tuple[set[str] | None, str]:
    """The spec ids to read for ``which`` and the provenance label they get."""
    if which not in CHOICES:
        raise SkillError(f"Unknown episode selection {which!r}. Choose one of: {', '.join(CHOICES)}")
    if which == "all":
        return None, "baseline"
    ids = pool_spec_ids(run_dir)
    if ids is None:
        if which == "baseline":
            return None, "baseline"
        raise SkillError(f"{run_dir} has no harness pool, so it has no accepted reshaped envs: "
                         "point at an `envh rig --out` directory, or use --from all")
    accepted, rejected = ids
    if which == "accepted":
        if not accepted:
            raise SkillError(f"The pool in {run_dir} holds no accepted harness yet")
        return accepted, "reshaped"
    return {s for s in spec_ids_in(run_dir) if s not in accepted | rejected}, "baseline"


def build_bank(run_dir: str | Path, out: str | Path, *, inducer: Inducer, embedder: Embedder,
               which: str = "all", append: bool = False,
               merge_threshold: float = DEFAULT_MERGE_THRESHOLD,
               echo: Callable[[str], Any] | None = None) -> dict[str, Any]:
    """Induce items from ``run_dir``'s episodes into the bank at ``out``.

    With ``append`` an existing bank grows (merging near-duplicates into its items);
    otherwise ``out`` is rebuilt. Returns a summary (episodes, cases, items, merges).
    """
    spec_ids, source = select_spec_ids(run_dir, which)
    episodes = list(read_episodes(run_dir, source=source, spec_ids=spec_ids))
    if not episodes:
        raise SkillError(f"No usable episodes in {run_dir} for --from {which}")
    started = time.monotonic()
    cases = cases_from(episodes)
    if echo:
        methods = {m: sum(c.method == m for c in cases) for m in ("contrast", "success", "failure")}
        echo(f"{len(episodes)} episode(s), {len(cases)} task case(s): "
             + ", ".join(f"{n} {m}" for m, n in methods.items()))
    items = induce_all(episodes, inducer)
    out_path = Path(out)
    if append and (out_path / "meta.json").is_file():
        bank = SkillBank.load(out_path)
    else:
        bank = SkillBank(embedder_name=embedder.name, merge_threshold=merge_threshold)
    counts = bank.add(items, embedder)
    runs = list(bank.info.get("built_from", []))
    runs.append({"run_dir": str(run_dir), "from": which, "source": source, "inducer": inducer.name,
                 "episodes": len(episodes), "cases": len(cases), "induced": len(items), **counts})
    bank.info["built_from"] = runs
    bank.save(out_path)
    summary = {"bank": str(out_path), "episodes": len(episodes), "cases": len(cases),
               "induced": len(items), **counts, "size": len(bank),
               "seconds": round(time.monotonic() - started, 2)}
    stats = getattr(inducer, "stats", None)
    if stats:
        summary["inducer_stats"] = dict(stats)
    return summary
