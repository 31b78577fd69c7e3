"""Adaptive difficulty with the discipline production training needs.

``Curriculum`` is the decision logic, independent of any env: it holds the current
parameter values, takes one outcome per finished episode, and at each window boundary
decides, with a reason, whether to make the task harder or easier, trip the circuit
breaker, or hold. The ``curriculum`` component kind (``envh_adaptive.components.curriculum``) wraps
it around a bridge; ``bench/curriculum.py`` drives it with a simulated learner.

Rules it enforces:
- values change only through ``end_episode`` (the layer calls it at episode boundaries,
  never mid-episode), each change by at most the parameter's ``step``, never outside its
  bounds (an out-of-bounds ``init`` is refused);
- easier only on evidence: the window's successes must reject "the rate is at least
  ``floor``" in an exact one-sided binomial test at level ``ALPHA`` (0.1; ``down_bounds``),
  so a learner whose true rate is anywhere in the band steps back in at most 10 % of
  windows however the window closes (window 20, band [0.6, 0.85]: 9.5 % at 0.6, 1.5 % at
  0.7, 0.1 % at 0.8; with full windows only, 8 or fewer of 20: 5.7 % and 0.5 %). A window
  too short for the test ever to reject (0.4^n > 0.1 at floor 0.6: n ≤ 2) never steps
  back; the breaker still catches a collapse;
- the circuit breaker puts every parameter back to its safe default when success stays
  below ``floor`` for ``breaker`` full windows with no window at or above the floor
  between (a window closed early never counts: at a true rate in the band it trips with
  probability about P(full window under the floor)^breaker, 0.10³ at 0.7, window 20);
- ``early``: a window closes before it is full. Upward once its outcomes are at least as
  conclusive as the weakest full window that would also make the task harder (Wilson 95%
  bounds: 9 straight successes weigh as much as 18 of 20), so a learner that outgrows a
  level is not held there for the rest of the window; downward when the test behind
  "easier" rejects at that look, its level spent linearly over the window's looks (0 of 5
  steps back), never in the grace window nor at the easiest values (there the window runs
  full, for the breaker). The peeking has a stated price: ``operating_characteristic``
  gives each decision's exact probability per window (window 20, [0.6, 0.85]: harder at a
  true 0.7 in 7.2 % of windows, 3.5 % without early closes; at 0.9 in 73 %);
- ``grace``: the first window after a harder move does not step back (a dip right after
  promotion is expected before practice at the new level); it still counts toward the
  breaker, which is what catches a real collapse;
- the kill switch (``adaptive=False``, or ``ENVH_CURRICULUM_FREEZE=1``) freezes every
  parameter at its safe default;
- with a ``coach`` (``envh_adaptive.coach``: user code run in the jail) the coach decides instead of
  the thresholds, within the same bounds; the breaker and the kill switch still apply;
- every decision is a record (episode, window statistics, values before and after, reason)
  for the audit log, and ``replay`` rebuilds the state from those records, checking each
  logged value and decision against its own.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Iterable, Mapping
from typing import Any

import attrs
from envh import errors

from .params import ParamBounds, ParamPlan, _int, plan_params

FREEZE_VAR = "ENVH_CURRICULUM_FREEZE"
ALPHA = 0.1  # the level of the test behind "easier": its rate at any true rate ≥ floor
__all__ = ["ALPHA", "FREEZE_VAR", "Curriculum", "ParamBounds", "ParamPlan", "plan_params"]


@attrs.define
class Curriculum:
    """Threshold curriculum over ``plans``: harder above ``ceiling``, easier below
    ``floor``, decided once per ``window`` finished episodes."""

    plans: dict[str, ParamPlan]
    window: int = 20
    floor: float = 0.6
    ceiling: float = 0.85
    breaker: int = 3
    adaptive: bool = True
    values: dict[str, int] = attrs.field(factory=dict)
    outcomes: list[bool] = attrs.field(factory=list)
    below: int = 0
    episodes: int = 0
    early: bool = True
    grace: bool = True
    coach: Any = None  # an ``envh_adaptive.coach.Coach``: decides in place of the thresholds
    fresh: bool = False  # the last decision made the task harder (grace applies)
    rates: list[float] = attrs.field(factory=list)  # the last windows' success rates

    def __attrs_post_init__(self) -> None:
        _int(self.window, "window")
        _int(self.breaker, "breaker")
        for name in ("early", "grace"):
            if type(getattr(self, name)) is not bool:
                raise errors.SpecError(f"Curriculum {name} must be true or false, got {getattr(self, name)!r}")
        for name in ("floor", "ceiling"):
            if type(getattr(self, name)) not in (int, float):
                raise errors.SpecError(f"Curriculum {name} must be a number in [0, 1], got {getattr(self, name)!r}")
        if self.window < 1 or not 0 <= self.floor <= self.ceiling <= 1 or self.breaker < 1:
            raise errors.SpecError("Curriculum policy needs window ≥ 1, 0 ≤ floor ≤ ceiling ≤ 1, breaker ≥ 1")
        if not self.values:
            self.values = {n: (p.init if self.active else p.safe) for n, p in self.plans.items()}

    @property
    def active(self) -> bool:
        return self.adaptive and os.environ.get(FREEZE_VAR, "") not in ("1", "true", "yes")

    def begin_episode(self) -> dict[str, int]:
        """The next episode's values; the kill switch, read at every boundary, holds the safe defaults at once."""
        if not self.active:
            self.values = {n: p.safe for n, p in self.plans.items()}
        return dict(self.values)

    def end_episode(self, success: bool, recorded: Mapping[str, Any] | None = None, *,
                    active: bool | None = None) -> dict[str, Any] | None:
        """Record one finished episode; at a window boundary, decide. Returns the
        decision record (for the audit log) or ``None`` when no decision was due.
        ``recorded`` (replay only) is the audit's decision for this window: a coach is
        not run again, its logged answer is checked and applied; ``active`` (replay only)
        is whether the kill switch was off then."""
        active = self.active if active is None else active
        self.episodes += 1
        self.outcomes.append(bool(success))
        early = len(self.outcomes) < self.window and self._conclusive(active)
        if len(self.outcomes) < self.window and not early:
            return None
        full, m, n = not early, sum(self.outcomes), len(self.outcomes)
        rate = m / n
        before, fresh, self.fresh = dict(self.values), self.fresh, False
        if not active:
            self.values = {n: p.safe for n, p in self.plans.items()}
            action, reason = "frozen", "kill switch: parameters held at their safe defaults"
        elif full and rate < self.floor and self.below + 1 >= self.breaker:
            self.values = {n: p.safe for n, p in self.plans.items()}
            self.below = 0
            action = "breaker"
            reason = f"success {rate:.2f} < floor {self.floor} for {self.breaker} windows: safe defaults"
        elif self.coach is not None:
            self.below = self.below + 1 if rate < self.floor else 0
            action, reason = self._ask_coach(rate, recorded)
        elif rate < self.floor and fresh and self.grace:
            self.below += 1
            action, reason = "hold", f"success {rate:.2f} < floor {self.floor}, first window after a harder move"
        elif rate < self.floor and m > self._down(n):
            self.below += 1
            action, reason = "hold", (f"success {rate:.2f} < floor {self.floor}, not conclusive (a step back "
                                      f"needs ≤ {self._down(n)} of {n}: P ≤ {ALPHA} at a true {self.floor})")
        elif rate < self.floor:
            self.below += 1 if full else 0  # the breaker counts full windows only
            self._move(-1)
            action, reason = "easier", (f"success {rate:.2f} < floor {self.floor} (≤ {self._down(n)} of {n}: "
                                        f"P ≤ {ALPHA} at a true {self.floor})")
        elif rate > self.ceiling:
            self.below = 0
            self._move(+1)
            self.fresh = self.values != before
            action, reason = "harder", f"success {rate:.2f} > ceiling {self.ceiling}"
        else:
            self.below = 0
            action, reason = "hold", f"success {rate:.2f} in [{self.floor}, {self.ceiling}]"
        if action in ("easier", "harder") and self.values == before:
            action, reason = "hold", reason + " (already at the bound)"
        if early:
            reason += f" (after {len(self.outcomes)} of {self.window} episodes: as conclusive as a full window)"
        record = {"episode": self.episodes, "window": {"episodes": len(self.outcomes), "successes": sum(self.outcomes),
                                                       "rate": rate},
                  "before": before, "after": dict(self.values), "decision": action, "reason": reason}
        if self.coach is not None:
            record["coach_memo"] = self.coach.memo
        self.outcomes = []
        self.rates = [*self.rates, rate][-10:]
        return record

    def skip_episode(self) -> None:
        """Count an episode that joins no window (an anchored one, on the base distribution)."""
        self.episodes += 1

    def _start_from(self, params: Any) -> None:
        if params == {n: p.init for n, p in self.plans.items()} or params == {n: p.safe for n, p in self.plans.items()}:
            self.values = dict(params)
        else:
            raise errors.StateError(f"Curriculum audit log starts at {params!r}, neither the plan's init nor its "
                                    "safe defaults: it was written under another plan")

    def _conclusive(self, active: bool) -> bool:
        """Is the open window already as conclusive as the weakest full window that
        would make the task harder? Only for the threshold policy while adapting, and
        downward only when the test behind "easier" rejects at this look's share of its
        level (``_down``), not in the grace window and not at the easiest values (there
        the window runs full, so the breaker, which counts full windows only, still trips)."""
        if not self.early or self.coach is not None or not active:
            return False
        m, n = sum(self.outcomes), len(self.outcomes)
        if _closes_up(m, n, self.window, self.ceiling):
            return True
        at_bound = all(self.values[name] == (plan.high if plan.bounds.harder < 0 else plan.low)
                       for name, plan in self.plans.items())  # nothing to step back: the window runs full
        return not (self.fresh and self.grace) and not at_bound and m <= self._down(n)

    def _down(self, n: int) -> int:
        """The most successes of ``n`` (a look at the open window) that step back: the
        sequential test behind "easier" (``down_bounds``); -1: none do."""
        early = self.early and self.coach is None
        return down_bounds(self.window, float(self.floor), early)[n - 1]

    def operating_characteristic(self, p: float) -> dict[str, float]:
        """The exact probability of each decision of one window (not the grace window)
        when every episode succeeds with probability ``p``: ``harder``, ``easier``,
        ``hold``, and ``below`` (the window runs full and its rate is under ``floor``: one
        step toward the breaker, which trips after ``breaker`` such windows in a row)."""
        w, open_ = self.window, {0: 1.0}
        harder = easier = 0.0
        for n in range(1, w + 1):
            grown: dict[int, float] = {}
            for m, pr in open_.items():
                grown[m + 1] = grown.get(m + 1, 0.0) + pr * p
                grown[m] = grown.get(m, 0.0) + pr * (1 - p)
            early = n < w and self.early and self.coach is None
            up = {m for m in grown if early and _closes_up(m, n, w, self.ceiling)}
            down = {m for m in grown if early and m not in up and m <= self._down(n)}
            harder += sum(grown[m] for m in up)
            easier += sum(grown[m] for m in down)
            open_ = {m: pr for m, pr in grown.items() if m not in up | down}
        harder += sum(pr for m, pr in open_.items() if m / w > self.ceiling)
        easier += sum(pr for m, pr in open_.items() if m / w < self.floor and m <= self._down(w))
        below = sum(pr for m, pr in open_.items() if m / w < self.floor)
        return {"harder": harder, "easier": easier, "hold": 1.0 - harder - easier, "below": below}

    def _ask_coach(self, rate: float, recorded: Mapping[str, Any] | None) -> tuple[str, str]:
        from .coach import check_changes, window_stats

        if recorded is not None:  # replay: the logged answer, checked like a fresh one
            after = recorded.get("after")
            if not isinstance(after, Mapping) or set(after) != set(self.plans):
                raise errors.StateError(f"Curriculum audit decision {dict(recorded)!r} has no valid 'after'")
            try:
                changes = check_changes({n: after[n] - self.values[n] if type(after[n]) is int else after[n]
                                         for n in after}, self.plans, self.values)
            except errors.ContractCodeError as exc:
                raise errors.StateError(f"Curriculum audit decision at episode {self.episodes} is not a "
                                        f"change the coach may make: {exc.message}") from None
            memo = recorded.get("coach_memo", {})
            if type(memo) is not dict:
                raise errors.StateError("Curriculum audit decision has a coach_memo that is not an object")
            self.coach.memo = memo
            decision, reason = str(recorded.get("decision", "coach")), str(recorded.get("reason", ""))
        else:
            try:
                changes = self.coach.propose(window_stats(self, rate), self.plans, self.values)
            except errors.ContractCodeError as exc:
                return "coach-failed", f"coach failed, values held: {exc.message}"[:2000]
            decision = "coach" if changes else "hold"
            reason = f"coach at success {rate:.2f}: " + (", ".join(f"{n} {d:+d}" for n, d in changes.items())
                                                        or "no change")
        for name, delta in changes.items():
            self.values[name] += delta
        return decision, reason

    def _move(self, direction: int) -> None:
        for name, plan in self.plans.items():
            delta = direction * plan.bounds.harder * plan.step
            self.values[name] = min(max(self.values[name] + delta, plan.low), plan.high)

    def state(self) -> dict[str, Any]:
        return {"values": dict(self.values), "outcomes": list(self.outcomes), "below": self.below,
                "episodes": self.episodes, "rates": list(self.rates), "fresh": self.fresh,
                "coach_memo": None if self.coach is None else self.coach.memo}

    def load(self, state: Mapping[str, Any]) -> None:
        values = dict(state["values"])
        if any(type(v) is not int for v in values.values()):
            raise errors.StateError(f"Saved curriculum values {values!r} are not all integers")
        if set(values) != set(self.plans):
            raise errors.StateError(f"Saved curriculum values name {sorted(values)}, the plan {sorted(self.plans)}")
        for name, value in values.items():
            plan = self.plans.get(name)
            if plan is None or not plan.low <= value <= plan.high:
                raise errors.StateError(f"Saved curriculum value {name}={value} is not within the plan")
        outcomes, below, episodes = state.get("outcomes"), state.get("below"), state.get("episodes")
        if (type(outcomes) is not list or len(outcomes) >= self.window or any(type(x) is not bool for x in outcomes)
                or type(below) is not int or not 0 <= below < self.breaker or type(episodes) is not int or episodes < 0):
            raise errors.StateError("Saved curriculum state is not one this plan reaches (outcomes, below, episodes)")
        self.values, self.outcomes, self.below, self.episodes = values, outcomes, below, episodes
        self.rates = [float(r) for r in state.get("rates", ())][-10:]
        self.fresh = state.get("fresh") is True
        if self.coach is not None:
            memo = state.get("coach_memo") or {}
            if type(memo) is not dict:
                raise errors.StateError("Saved coach memo is not an object")
            self.coach.memo = memo

    def replay(self, records: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Rebuild the state from audit records (``episode`` lines carry the outcome) and
        check every logged decision against the replayed one: a log written under another
        configuration (window, thresholds, early, grace) or edited is refused. A coach's
        decisions are taken from the log, not recomputed (a coach that timed out then must
        not decide differently now). A window the log marks ``frozen`` replays frozen,
        whatever the kill switch says now. Returns the decisions due at the log's end that
        a kill kept from being written (the caller appends them)."""
        records = list(records)
        for record in records:
            if not isinstance(record, Mapping):
                raise errors.StateError(f"Curriculum audit record {record!r} is not an object")
        episodes = [i for i, r in enumerate(records) if r.get("type") == "episode" and r.get("success") is not None]
        closing: list[Mapping[str, Any] | None] = [None] * len(records)  # the decision closing each window
        upcoming: Mapping[str, Any] | None = None
        for i in range(len(records) - 1, -1, -1):
            closing[i] = upcoming
            if records[i].get("type") == "decision":
                upcoming = records[i]
        missing: list[dict[str, Any]] = []
        for i in episodes:
            record = records[i]
            if not isinstance(record["success"], bool):
                raise errors.StateError(f"Curriculum audit record has success={record['success']!r}, not a bool")
            params = record.get("params")
            if params is not None and i == episodes[0] and self.episodes == 0:
                self._start_from(params)  # init, or the safe defaults if the run began frozen
            if params is not None and params != self.values and params == {n: p.safe for n, p in self.plans.items()}:
                self.values = dict(params)  # the kill switch, turned on at a resume, held the safe defaults
            elif params is not None and params != self.values:
                raise errors.StateError(f"Curriculum audit log says episode {self.episodes + 1} ran with {params!r}, "
                                        f"the replay gives {self.values!r}: the log is damaged or was written "
                                        "under another configuration")
            nxt = records[i + 1] if i + 1 < len(records) else None
            logged = nxt if nxt is not None and nxt.get("type") == "decision" else None
            if record.get("anchored") is True:
                if logged is not None:
                    raise errors.StateError(f"Curriculum audit log has a decision after the anchored episode "
                                            f"{self.episodes + 1}, which joins no window: the log is damaged")
                self.skip_episode()
                continue
            last = i == episodes[-1]
            if self.coach is not None and logged is None and not last and len(self.outcomes) + 1 >= self.window:
                raise errors.StateError(f"Curriculum audit log lacks the coach's decision after episode "
                                        f"{self.episodes + 1}")
            close = closing[i]
            active = self.active if close is None else close.get("decision") != "frozen"
            decision = self.end_episode(record["success"], logged if self.coach is not None else None, active=active)
            if logged is None and decision is None:
                continue
            if logged is None:
                if not last:
                    raise errors.StateError(
                        f"Curriculum audit log has no decision after episode {decision['episode']}, where the "  # type: ignore[index]
                        "replay makes one: it was written under another configuration (window, floor, ceiling, "
                        "early, grace) or is damaged. Resume with the configuration it was written with.")
                missing.append(decision)  # type: ignore[arg-type]
            elif decision is None or any(decision[k] != logged.get(k) for k in ("episode", "decision", "after")):
                raise errors.StateError(
                    f"Curriculum audit log disagrees with its replay at episode {self.episodes}: logged "
                    f"{logged.get('decision')!r} -> {logged.get('after')!r}, replayed "
                    f"{None if decision is None else (decision['decision'], decision['after'])!r}. It was written "
                    "under another configuration (window, floor, ceiling, early, grace) or is damaged.")
        if not self.active:  # the kill switch is on now: hold the safe defaults from here
            self.values = {n: p.safe for n, p in self.plans.items()}
        return missing


def binom_cdf(m: int, n: int, p: float) -> float:
    """P(X ≤ m) for X ~ Binomial(n, p), exactly."""
    return sum(math.comb(n, i) * p ** i * (1 - p) ** (n - i) for i in range(m + 1))


@functools.lru_cache(maxsize=64)
def down_bounds(window: int, floor: float, early: bool) -> tuple[int, ...]:
    """The sequential test behind "easier": at look n (1..window) the window steps back
    when its successes are at most ``bounds[n - 1]`` (-1: never). Without early closes
    only the full window looks (an exact one-sided binomial test of "rate ≥ floor" at level
    ``ALPHA``); with them every episode is a look and ``ALPHA`` is spent linearly (by look
    n at most ALPHA·n/window has been spent), computed exactly at a true rate of ``floor``.
    Crossing is likelier the lower the rate, so at any true rate ≥ floor a window steps
    back with probability ≤ ``ALPHA``, however many looks it took."""
    bounds, open_, spent = [], {0: 1.0}, 0.0
    for n in range(1, window + 1):
        grown: dict[int, float] = {}
        for m, pr in open_.items():
            grown[m + 1] = grown.get(m + 1, 0.0) + pr * floor
            grown[m] = grown.get(m, 0.0) + pr * (1 - floor)
        budget = ALPHA * (n / window if early else float(n == window))
        bound, mass = -1, 0.0
        for m in sorted(grown):
            if m / n >= floor or spent + mass + grown[m] > budget + 1e-12:
                break
            bound, mass = m, mass + grown[m]
        spent += mass
        open_ = {m: pr for m, pr in grown.items() if m > bound}
        bounds.append(bound)
    return tuple(bounds)


def _closes_up(successes: int, n: int, window: int, ceiling: float) -> bool:
    """Are ``successes`` of ``n`` (an open window) as conclusive as the weakest full window above ``ceiling``?"""
    from envh.rollout import wilson  # the project's one Wilson interval

    ups = [k for k in range(window + 1) if k / window > ceiling]
    return bool(ups) and n > 0 and wilson(successes, n)[0] >= wilson(ups[0], window)[0]
