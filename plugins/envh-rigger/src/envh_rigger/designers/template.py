"""The template designer: no LLM, deterministic, the embedded default.

It picks the direction from baseline vs target (scaffold when the metric must move
toward easier, pressure toward harder), takes the bridge's templates for that
direction, and bisects each template's magnitude list using the measured results of
previous attempts (a continuous template's rate — ``guide``, ``mask`` — is searched by
secant on the measured metric instead, alone or stacked on the weaker of two list
entries that bracket the band): a candidate that fell short raises the lower bound, one that
overshot (or failed the free cascade, e.g. made the task unsolvable) lowers the upper
bound. When a template's interval is empty it moves to the next template. Templates that
declare the diagnosed failure axis (``axis = "A"``, ``"S0"``, ...) are tried first.
"""

from __future__ import annotations

import inspect
from typing import Any

from envh import make

from ..divergence import class_focus
from ..templates import templates_for
from ..weakness import weakness_focus
from .base import DesignContext, Proposal, metric_must_rise


def _knobbed(a: Any) -> bool:
    """An attempt that set a continuous knob (older journals name it ``guide``)."""
    return "knob" in a.meta or "guide" in a.meta


def _knob_key(a: Any) -> list[Any] | None:
    if "knob" in a.meta:
        return list(a.meta["knob"])
    return list(a.meta["bracket"]) if "bracket" in a.meta else None


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
            if a.meta.get("template") != name or "index" not in a.meta or _knobbed(a):
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

    def _too_weak(self, ctx: DesignContext, attempt: Any) -> bool | None:
        decision = (attempt.result or {}).get("decision")
        if attempt.verdict == "invalid" or decision in (None, "in"):
            return None
        return metric_must_rise(decision) == ctx.target.rises(ctx.direction)

    def _bracket(self, ctx: DesignContext) -> tuple[str, int] | None:
        """A discrete template whose neighbouring magnitudes i and i+1 were measured too weak
        and too strong: the band lies between two list entries."""
        weak: dict[str, set[int]] = {}
        strong: dict[str, set[int]] = {}
        for a in ctx.attempts:
            if "index" not in a.meta or _knobbed(a):
                continue
            verdict = self._too_weak(ctx, a)
            if verdict is not None:
                (weak if verdict else strong).setdefault(a.meta["template"], set()).add(int(a.meta["index"]))
        for name, idxs in weak.items():
            for i in sorted(idxs, reverse=True):
                if i + 1 in strong.get(name, set()):
                    return name, i
        return None

    def _measured(self, ctx: DesignContext, name: str, idx: int) -> float | None:
        for a in ctx.attempts:
            if a.meta.get("template") == name and a.meta.get("index") == idx and not _knobbed(a):
                value = (a.result or {}).get(ctx.target.metric)
                if value is not None:
                    return float(value)
        return None

    def _knob(self, ctx: DesignContext, key: list[Any], at_zero: float | None) -> float | None:
        """The next rate of the continuous knob ``key``: secant on the measured metric between
        the closest too-weak and too-strong rates (``at_zero``: the metric measured at rate 0),
        kept inside the bisection bounds; ``None`` when the interval is spent."""
        lo, hi = (0.0, at_zero), (1.0, None)
        centre = sum(ctx.band) / 2
        for a in ctx.attempts:
            if _knob_key(a) != key:
                continue
            m, verdict = float(a.meta.get("rate", a.meta.get("guide", 0.0))), self._too_weak(ctx, a)
            value = (a.result or {}).get(ctx.target.metric)
            if verdict is None:
                if a.verdict == "invalid":
                    hi = (min(hi[0], m), None)
                    continue
                return None  # measured in the band yet rejected: nothing left on this knob
            if verdict and m >= lo[0]:
                lo = (m, value)
            elif not verdict and m <= hi[0]:
                hi = (m, value)
        if hi[0] - lo[0] < 0.04:
            return None
        m = (lo[0] + hi[0]) / 2
        if lo[1] is not None and hi[1] is not None and hi[1] != lo[1]:
            m = lo[0] + (centre - lo[1]) * (hi[0] - lo[0]) / (hi[1] - lo[1])
        span = hi[0] - lo[0]
        return min(hi[0] - 0.15 * span, max(lo[0] + 0.15 * span, m))

    def _continuous(self, ctx: DesignContext, env: Any, template: Any, base: list[dict[str, Any]],
                    rate: float) -> tuple[list[dict[str, Any]], str]:
        """The continuous template's layers at ``rate``, focused where the weakness is when the
        template takes a focus."""
        if "focus" not in inspect.signature(template.instantiate).parameters:
            return base + template.instantiate(env, ctx.task, rate), ""
        weakest = ((ctx.diagnosis or {}).get("divergence") or {}).get("weakest")
        if weakest:  # the class the replay against the reference found the policy losing on
            focus = class_focus(weakest["class"])
            if weakest["side"] == "expected":
                focus = {"expected": focus}
            return base + template.instantiate(env, ctx.task, rate, focus=focus), f"diverges:{weakest['class']}"
        focus, predicate = weakness_focus(ctx)
        return base + template.instantiate(env, ctx.task, rate, focus=focus), predicate

    def _knobbed_proposal(self, ctx: DesignContext) -> Proposal | None:
        """Between two list entries: the weaker entry plus a continuous template (same
        direction) at a rate searched on the measured response."""
        bracket = self._bracket(ctx)
        if bracket is None:
            return None
        name, idx = bracket
        templates = dict(templates_for(ctx.registry, ctx.bridge, ctx.direction or ""))
        knob = next((t for t in templates.values() if getattr(t, "continuous", False)), None)
        if knob is None or name not in templates or (self.only is not None and knob.name not in self.only):
            return None
        m = self._knob(ctx, [name, idx], self._measured(ctx, name, idx))
        if m is None:
            return None
        with make(ctx.spec, registry=ctx.registry) as env:
            env.reset(task=ctx.task, seed=0)
            mags = templates[name].magnitudes(env, ctx.task)
            layers = templates[name].instantiate(env, ctx.task, mags[idx])
        staged = {**ctx.spec, "layers": [*ctx.spec.get("layers", []), *layers]}
        with make(staged, registry=ctx.registry) as env:
            env.reset(task=ctx.task, seed=0)
            if not knob.magnitudes(env, ctx.task):
                return None
            layers, focus = self._continuous(ctx, env, knob, layers, m)
        return Proposal(
            layers=layers, diagnosis=ctx.diagnosis.get("summary", ""),
            rationale=(f"{name} index {idx} measured too weak and index {idx + 1} too strong: the band lies "
                       f"between them; add {knob.name} at rate {m:.3f} (searched on the measured response)"
                       + (f", focused where {focus} shows" if focus else "")),
            meta={"template": name, "index": idx, "continuous": knob.name, "rate": round(m, 4),
                  "knob": [name, idx], **({"focus": focus} if focus else {})})

    def propose(self, ctx: DesignContext) -> Proposal | None:
        if ctx.direction is None:
            return None
        knobbed = self._knobbed_proposal(ctx)
        if knobbed is not None:
            return knobbed
        with make(ctx.spec, registry=ctx.registry) as env:
            env.reset(task=ctx.task, seed=0)
            candidates = templates_for(ctx.registry, ctx.bridge, ctx.direction)
            # templates that act on the diagnosed failure axis go first (stable otherwise)
            axis = ctx.diagnosis.get("failure_axis")
            candidates = sorted(candidates, key=lambda nt: getattr(nt[1], "axis", None) != axis)
            value = ctx.baseline.get(ctx.target.metric)
            for name, template in candidates:
                if self.only is not None and name not in self.only:
                    continue
                mags = template.magnitudes(env, ctx.task)
                if getattr(template, "continuous", False):
                    if self._bracket(ctx) is not None or not mags:
                        continue  # the knob is searched between list entries above
                    m = self._knob(ctx, [name], None if value is None else float(value))
                    if m is None:
                        continue
                    layers, focus = self._continuous(ctx, env, template, [], m)
                    return Proposal(
                        layers=layers, diagnosis=ctx.diagnosis.get("summary", ""),
                        rationale=(f"{ctx.target.metric} {value:.2f} vs band [{ctx.band[0]:g}, {ctx.band[1]:g}]: "
                                   f"{ctx.direction}; {name} at rate {m:.3f} (searched on the measured response)"
                                   + (f", focused where {focus} shows" if focus else "")),
                        meta={"template": name, "continuous": name, "rate": round(m, 4), "knob": [name],
                              **({"focus": focus} if focus else {})})
                lo, hi = self._bounds(ctx, name, len(mags))
                if lo > hi:
                    continue
                # scaffold from a total failure: start strong enough to see any success
                idx = (lo + hi + 1) // 2 if ctx.direction == "scaffold" else (lo + hi) // 2
                layers = template.instantiate(env, ctx.task, mags[idx])
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
