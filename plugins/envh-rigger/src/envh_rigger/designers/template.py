"""The template designer: no LLM, deterministic, the embedded default.

It picks the direction from baseline vs target (scaffold when the metric must move
toward easier, pressure toward harder), takes the bridge's templates for that
direction, and bisects each template's magnitude list using the measured results of
previous attempts: a candidate that fell short raises the lower bound, one that
overshot (or failed the free cascade, e.g. made the task unsolvable) lowers the upper
bound. When a template's interval is empty it moves to the next template. Templates that
declare the diagnosed failure axis (``axis = "A"``, ``"S0"``, ...) are tried first.
"""

from __future__ import annotations

from typing import Any

from envh import make

from ..templates import templates_for
from .base import DesignContext, Proposal, metric_must_rise


class TemplateDesigner:
    """``envh rig --designer template``."""

    name = "template"
    trusted = True  # its code is the templates' own, reviewed with the bridge

    def __init__(self, arg: str | None = None, **options: Any) -> None:
        self.only = set(arg.split(",")) if arg else None  # restrict to these template names

    def _bounds(self, ctx: DesignContext, name: str, count: int) -> tuple[int, int]:
        lo, hi = 0, count - 1
        rises = ctx.target.rises(ctx.direction)  # does this direction raise the metric?
        for a in ctx.attempts:
            if a.meta.get("template") != name or "index" not in a.meta:
                continue
            idx = int(a.meta["index"])
            if a.verdict == "invalid":
                hi = min(hi, idx - 1)
                continue
            decision = (a.result or {}).get("decision")
            if decision is None or decision == "in":
                lo, hi = idx + 1, idx  # tried and fitted yet rejected: nothing left here
                continue
            too_weak = metric_must_rise(decision) == rises
            if too_weak:
                lo = max(lo, idx + 1)
            else:
                hi = min(hi, idx - 1)
        return lo, hi

    def propose(self, ctx: DesignContext) -> Proposal | None:
        if ctx.direction is None:
            return None
        with make(ctx.spec, registry=ctx.registry) as env:
            env.reset(task=ctx.task, seed=0)
            candidates = templates_for(ctx.registry, ctx.bridge, ctx.direction)
            # templates that act on the diagnosed failure axis go first (stable otherwise)
            axis = ctx.diagnosis.get("failure_axis")
            candidates = sorted(candidates, key=lambda nt: getattr(nt[1], "axis", None) != axis)
            for name, template in candidates:
                if self.only is not None and name not in self.only:
                    continue
                mags = template.magnitudes(env, ctx.task)
                lo, hi = self._bounds(ctx, name, len(mags))
                if lo > hi:
                    continue
                # scaffold from a total failure: start strong enough to see any success
                idx = (lo + hi + 1) // 2 if ctx.direction == "scaffold" else (lo + hi) // 2
                layers = template.instantiate(env, ctx.task, mags[idx])
                value = ctx.baseline.get(ctx.target.metric)
                return Proposal(
                    layers=layers,
                    diagnosis=ctx.diagnosis.get("summary", ""),
                    rationale=(f"{ctx.target.metric} {value:.2f} vs band [{ctx.band[0]:g}, {ctx.band[1]:g}]: "
                               f"{ctx.direction}; {name} at magnitude {mags[idx]!r} "
                               f"(index {idx} of {len(mags)}, search interval [{lo}, {hi}])"),
                    meta={"template": name, "index": idx, "magnitude": mags[idx], "of": len(mags)})
        return None

    def close(self) -> None:
        pass
