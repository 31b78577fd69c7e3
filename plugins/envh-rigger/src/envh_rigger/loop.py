"""One task through the loop: Observe → Diagnose → Write → Validate, at most R rounds.

Observe plays K rollouts of the current env; the stats diagnoser explains them; the
designer writes a candidate; the free cascade checks it (a failure goes back to the
designer as feedback, at most ``free_retries`` times a round, spending no rollouts);
the sequential validator measures it with fresh rollouts; the verdict is numeric.
Every step is journaled, so a resumed run continues where the killed one stopped.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import attrs
from envh import Action, Registry, TaskRef, make, spec_id
from envh.rollout import wilson

from . import cascade, differs, divergence
from .budget import Budget, BudgetExhausted, Usage
from .designers.base import Attempt, DesignContext, Designer, Proposal
from .episodes import candidate_acted, steps_of, summarize
from .journal import Journal
from .pool import HarnessPool
from .rollouts import Rollouts
from .stats import LIFT_LOOKS, LiftTest, SequentialValidator, round_alpha
from .targets import SUCCESS_FLOOR, Target
from .weakness import probes

CONFIRM_OFFSET = 500  # a round's confirmation seeds start here past its validation's


@attrs.define(kw_only=True)
class LoopRun:
    """Everything the tasks of one rig run share."""

    registry: Registry
    rollouts: Rollouts
    journal: Journal
    pool: HarnessPool
    designer: Designer
    designer_name: str
    policy: str
    target: Target
    validator: SequentialValidator
    budget: Budget
    usage: Usage
    k: int = 5
    rounds: int = 5
    free_retries: int = 3
    coevolve: bool = False
    seed: int = 0
    echo: Callable[[str], None] = lambda _msg: None
    diagnoser: str = "stats"
    confirm: bool = True  # replay a band verdict of "in" on fresh seeds (family-wise control)
    divergence: bool = True  # replay failed episodes against the bridge's reference when diagnosing
    tasks: int = 1  # tasks in the rig: the lift tests' family-wise rate is split over them
    weakness: Any = None  # a resolved weakness.Weakness for weakness targets
    _diagnose: Any = None

    def measure(self, trajs: list[Any]) -> dict[str, Any]:
        """Batch statistics, with the weakness's rate when the target is one."""
        stats = summarize(trajs)
        if self.weakness is not None:
            bites = sum(self.weakness.bites(t) for t in trajs)
            stats.update(weakness_rate=bites / len(trajs) if trajs else 0.0, weakness_bites=bites,
                         weakness=self.weakness.predicate)
        return stats

    def value(self, t: Any) -> float:
        """One episode's outcome on the target's metric."""
        if self.target.metric == "mean_steps":
            return float(steps_of(t))
        if self.target.metric == "weakness_rate":
            return float(self.weakness.bites(t))
        return float(t.success)

    def diagnose(self, trajs: list[Any], stats: dict[str, Any], bridge: str,
                 kinds: dict[str, str] | None = None, *, spec: dict[str, Any] | None = None,
                 task: TaskRef | None = None) -> dict[str, Any]:
        """The chosen diagnoser (through ``envh_diagnosers``) on a batch of rollouts, with the
        bridge's error taxonomy; then, where the bridge has a reference solution, the failed
        episodes replayed against it (``divergence.py``): the action class the policy loses
        the task on, with counts, and the weakness predicates too common to name anything."""
        if self._diagnose is None:
            name, _, arg = self.diagnoser.partition(":")
            self._diagnose = self.registry.diagnosers()[name].load()(arg or None)
        out = dict(self._diagnose(trajs, stats, bridge=bridge, registry=self.registry, kinds=kinds or {}))
        if self.divergence and spec is not None and task is not None and any(not t.success for t in trajs):
            div = divergence.replay(spec, task, trajs, self.registry)
            if div is not None:
                out["divergence"] = div
                out["uninformative"] = divergence.uninformative(probes(self.registry, bridge, focused=False), trajs)
                if div.get("weakest"):
                    out["summary"] = f"{divergence.summary(div)}; {out.get('summary', '')}".rstrip("; ")
        return out


def _layer_ids(base: dict[str, Any], layers: list[dict[str, Any]]) -> set[str]:
    offset = len(base.get("layers", []))
    return {layer.get("id") or f"{offset + i}:{layer.get('kind')}" for i, layer in enumerate(layers)}


class TaskLoop:
    """The loop for one task; ``run()`` returns the stop reason."""

    def __init__(self, run: LoopRun, task: TaskRef, base: dict[str, Any]) -> None:
        self.r, self.task, self.key = run, task, str(task)
        self.base = base
        with make(base, registry=run.registry) as env:
            kinds = getattr(env.unwrapped, "error_kinds", None)
            self.kinds: dict[str, str] = dict(kinds()) if callable(kinds) else {}
        self.attempts: list[Attempt] = []
        self.last_trajs: list[Any] = []
        self.round = 0
        self.pending: dict[str, Any] | None = None
        self._restore()

    # -- resume --------------------------------------------------------------------------
    def _restore(self) -> None:
        for ev in self.r.journal.events(self.key):
            if ev["kind"] == "proposal":
                self.pending = ev
            elif ev["kind"] == "attempt":
                a = Attempt(**ev["attempt"])
                self.round = max(self.round, a.round)
                self.pending = None
                if ev.get("base_id") == spec_id(self.base, self.r.registry):
                    self.attempts.append(a)
            elif ev["kind"] == "accepted" and self.r.coevolve:
                self.base, self.attempts = ev["spec"], []

    # -- phases --------------------------------------------------------------------------
    def _spend(self, n: int) -> None:
        reason = self.r.usage.exhausted(self.r.budget, upcoming_rollouts=n)
        if reason:
            raise BudgetExhausted(reason)

    def observe(self) -> tuple[list[Any], dict[str, Any]]:
        seeds = [self.r.seed + i for i in range(self.r.k)]
        if not all(self.r.rollouts.cached(self.r.rollouts.key(self.task, spec_id(self.base, self.r.registry),
                                                                "observe", s)) for s in seeds):
            self._spend(len(seeds))
        trajs = self.r.rollouts.run(self.base, self.task, seeds, "observe")
        self.r.usage.rollouts = self.r.rollouts.count()
        return trajs, self.r.measure(trajs)

    def _sequence(self, spec: dict[str, Any], rnd: int, played: list[Any], used: int, more: int,
                  phase: str | None = None) -> list[Any]:
        """Episodes ``used .. used + more`` of this validation's seed sequence, playing what is
        missing. A pool plays at least one episode per worker: episodes past the point where
        the rule stops are kept as spares and never enter the decision, which reads the
        outcomes in seed order, so the operating characteristic is unchanged. Under a rollout
        budget there are no spares (they would leave later rounds less of it)."""
        missing = used + more - len(played)
        if missing > 0:
            spare = max(0, self.r.rollouts.workers - missing)
            if self.r.budget.max_rollouts is not None:
                # no play-ahead under a rollout budget: a spare would spend a rollout a later
                # validation needs, so the run would stop earlier with more workers
                spare = 0
            n = missing + spare
            phase = phase or f"validate:{rnd}"
            first = self.r.seed + 1000 * rnd + (CONFIRM_OFFSET if phase.startswith("confirm") else 0)
            seeds = [first + len(played) + i for i in range(n)]
            sid = spec_id(spec, self.r.registry)
            if not all(self.r.rollouts.cached(self.r.rollouts.key(self.task, sid, phase, s)) for s in seeds):
                self._spend(missing)  # the spares only use workers that would idle
            played += self.r.rollouts.run(spec, self.task, seeds, phase)
            self.r.usage.rollouts = self.r.rollouts.count()
        return played[used:used + more]

    def validate(self, spec: dict[str, Any], rnd: int, band: tuple[float, float],
                 phase: str | None = None) -> tuple[list[Any], dict[str, Any]]:
        """Fresh rollouts of ``spec`` until the target's rule decides: the band validator for
        absolute targets, the paired lift test against the base for relative ones."""
        if self.r.target.relative:
            return self._validate_lift(spec, rnd, band)
        binary = self.r.target.binary
        played: list[Any] = []
        values: list[float] = []
        while (more := self.r.validator.next_batch(values, band, binary=binary)) > 0:
            values += [self.r.value(t) for t in self._sequence(spec, rnd, played, len(values), more, phase)]
        decision, decisive = self.r.validator.decide(values, band, binary=binary)
        stats = self.r.measure(played[:len(values)])
        stats.update(decision=decision, decisive=decisive, band=list(band),
                     confidence=self.r.validator.confidence(values, band, binary=binary))
        return self._floor(spec, rnd, played, len(values), stats)

    def _validate_lift(self, spec: dict[str, Any], rnd: int,
                       band: tuple[float, float]) -> tuple[list[Any], dict[str, Any]]:
        """Base and candidate on the same seeds, in pairs, until the lift test decides
        (``stats.LiftTest`` at this round's share of the rig's family-wise rate)."""
        target = self.r.target
        test = LiftTest(delta=abs(target.lift), alpha=round_alpha(rnd, tasks=self.r.tasks))
        lower = target.lift < 0  # the candidate must be lower: compare complements
        played: list[Any] = []
        base_played: list[Any] = []
        pairs: list[tuple[float, float]] = []
        while (more := test.next_batch(pairs)) > 0:
            n = len(pairs)
            cand = self._sequence(spec, rnd, played, n, more)
            base = self._sequence(self.base, rnd, base_played, n, more)
            for b, c in zip(base, cand, strict=True):
                vb, vc = self.r.value(b), self.r.value(c)
                pairs.append((1 - vb, 1 - vc) if lower else (vb, vc))
        verdict, decisive = test.decide(pairs)
        used = len(pairs)
        trajs = played[:used]
        stats = self.r.measure(trajs)
        base_stats = self.r.measure(base_played[:used])
        metric = target.metric
        lift = stats[metric] - base_stats[metric] if used else 0.0
        decision = "in" if verdict == "beats" else ("above" if lower else "below")
        stats.update(decision=decision, decisive=decisive, band=list(band),
                     lift={"measured": lift, "asked": target.lift, "pairs": used, "base": base_stats[metric],
                           "verdict": verdict, "alpha": test.alpha, "boundary_c": round(test.c, 4),
                           "tasks": self.r.tasks,
                           "characteristic": test.characteristic(min(1.0, max(0.0, base_stats[metric])),
                                                                 lower=lower)})
        return self._floor(spec, rnd, played, used, stats)

    def _floor(self, spec: dict[str, Any], rnd: int, played: list[Any], used: int,
               stats: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
        """The weakness target's success floor (its own validation), and the spares count."""
        if self.r.weakness is not None:  # the floor: success must not collapse with the weakness
            wins = [float(t.success) for t in played[:used]]
            floor = (SUCCESS_FLOOR, 1.0)
            while (more := self.r.validator.next_batch(wins, floor)) > 0:
                wins += [float(t.success) for t in self._sequence(spec, rnd, played, len(wins), more)]
            stats["floor_decision"] = self.r.validator.decide(wins, floor)[0]
            used = max(used, len(wins))
        stats["spares"] = len(played) - used  # played ahead by idle workers, not in any decision
        return played[:used], stats

    # -- the loop ------------------------------------------------------------------------
    def run(self) -> str:
        r = self.r
        baseline_trajs, baseline = self.observe()
        band = r.target.band(baseline)
        direction = r.target.direction(baseline)
        check = None
        if not r.target.relative:
            # K rollouts prove nothing either way (2 of 5 at a true 0.18 looks in [0.4, 0.6];
            # 1 of 5 at a true 0.5 looks below): the band validator decides on the base
            # itself, its first K episodes the observed ones
            _trajs, check = self.validate(self.base, 0, band, phase="observe")
            edge = {"below": band[0] - 1, "above": band[1] + 1}.get(check["decision"], (band[0] + band[1]) / 2)
            direction = r.target.direction({**baseline, r.target.metric: edge})
        diagnosis = r.diagnose(baseline_trajs, baseline, self.base["bridge"], self.kinds, spec=self.base, task=self.task)
        r.journal.append(self.key, "baseline", {"spec_id": spec_id(self.base, r.registry), "stats": baseline,
                                                "band": list(band), "direction": direction, "check": check,
                                                "diagnosis": diagnosis, "usage": r.usage.to_data(),
                                                "reference": self._reference_note(),
                                                "weakness": r.weakness.predicate if r.weakness else None,
                                                "weakness_read_by": r.weakness.translated_by if r.weakness else None})
        r.echo(f"[{self.key}] baseline {baseline['success_rate']:.2f} ({baseline['n']} rollouts), "
               f"band {band} on {r.target.metric}, direction {direction or 'none needed'}")
        if direction is None and check is not None:
            r.echo(f"[{self.key}] the base itself is {'in' if check['decisive'] else 'perhaps in'} the band "
                   f"({check[r.target.metric]:.2f} over {check['n']} rollouts)")
            return "baseline_in_target" if check["decisive"] else "baseline_undecided"
        if not self._reachable(band, baseline):
            r.echo(f"[{self.key}] the band {band} is too narrow to judge (the baseline leaves no room): "
                   "target unreachable")
            return "target_unreachable"
        with make(self.base, registry=r.registry) as env:
            env.reset(task=self.task, seed=0)
            tools, schema = env.tools(), env.env_state_schema()
        reference = probe_actions(baseline_trajs)
        while self.round < r.rounds:
            self.round += 1
            feedback: str | None = None
            for _try in range(r.free_retries + 1):
                if (reason := r.usage.exhausted(r.budget)) is not None:
                    raise BudgetExhausted(reason)
                ctx = DesignContext(
                    task=self.task, bridge=self.base["bridge"], spec=self.base, tools=tools,
                    state_schema=schema, baseline=baseline, episodes=baseline_trajs, target=r.target,
                    band=band, direction=direction, diagnosis=diagnosis, attempts=list(self.attempts),
                    feedback=feedback, registry=r.registry, round=self.round,
                    candidate_episodes=list(self.last_trajs))
                proposal = self._proposal(ctx)
                if proposal is None:
                    return "designer_exhausted"
                trusted = bool(getattr(r.designer, "trusted", False))
                if not trusted:  # model-written code runs in the jail
                    proposal = attrs.evolve(proposal, layers=untrusted(proposal.layers))
                # the reference is replayed at the seeds this round's validation plays first
                seeds = [r.seed + 1000 * self.round + i for i in range(cascade.REPLAY_SEEDS)]
                checked = cascade.check(self.base, proposal.layers, self.task, registry=r.registry,
                                        reference=reference, trusted=trusted, seeds=seeds)
                if checked.ok:
                    break
                feedback = f"{checked.stage}: {checked.message}"
                self._record(Attempt(round=self.round, layers=proposal.layers, diagnosis=proposal.diagnosis,
                                     rationale=proposal.rationale, meta=proposal.meta, verdict="invalid",
                                     reason=feedback, cascade=attrs.asdict(checked)))
            else:
                continue  # every try failed the free checks: the round is spent, no rollouts were
            spec = cascade.combined(self.base, proposal.layers)
            trajs, stats = self.validate(spec, self.round, band)
            self.last_trajs = trajs
            verdict, reason = self._judge(stats, trajs, proposal)
            if verdict == "accepted" and r.confirm and not r.target.relative:
                verdict, reason = self._confirm(spec, band, stats)
            if verdict == "accepted" and not r.target.relative:
                verdict, reason = self._differs(spec, band, stats, r.target.rises(direction))
            attempt = Attempt(round=self.round, layers=proposal.layers, diagnosis=proposal.diagnosis,
                              rationale=proposal.rationale, meta=proposal.meta, verdict=verdict,
                              reason=reason, result=stats, spec_id=spec_id(spec, r.registry),
                              cascade=attrs.asdict(checked))
            self._record(attempt)
            conf = stats.get("confirmation")
            confirmed = (f"; on {conf['n']} fresh: {conf[r.target.metric]:.2f} ({conf['decision']})" if conf else "")
            first = "in" if conf else stats["decision"]  # a confirmation ran only after an "in"
            r.echo(f"[{self.key}] round {self.round}: {proposal.meta or proposal.rationale[:60]} → "
                   f"sr {stats['success_rate']:.2f} over {stats['n']} ({first}){confirmed} {verdict}")
            if verdict == "accepted":
                self._accept(spec, attempt, baseline)
                if not r.coevolve:
                    return "accepted"
                self.base, self.attempts = spec, []
                baseline_trajs, baseline = self.observe()
                direction = r.target.direction(baseline)
                diagnosis = r.diagnose(baseline_trajs, baseline, self.base["bridge"], self.kinds, spec=self.base, task=self.task)
                if direction is None:
                    return "accepted"
        return "rounds"

    def _confirm(self, spec: dict[str, Any], band: tuple[float, float], stats: dict[str, Any]) -> tuple[str, str]:
        """A band verdict of "in" is played again on fresh seeds and must say "in" again: a
        candidate clearly out of the band then passes a round with chance <= 0.10^2, so a task
        accepts one over R rounds with chance <= R / 100 (0.05 at the default 5 rounds)."""
        _trajs, again = self.validate(spec, self.round, band, phase=f"confirm:{self.round}")
        stats["confirmation"] = {k: again[k] for k in ("n", "decision", "decisive", self.r.target.metric)}
        if again["decision"] == "in" and again["decisive"]:
            return "accepted", f"{self.r.target.metric} in the band, confirmed on {again['n']} fresh rollouts"
        if again["decision"] != "in":
            stats["decision"] = again["decision"]  # the designer brackets by what the two agree on
        return "rejected", (f"in the band at first, but on {again['n']} fresh rollouts {self.r.target.metric} "
                            f"{again[self.r.target.metric]:.2f} is {again['decision']} it"
                            f"{'' if again['decisive'] else ' (not decisive)'}: not confirmed")

    def _differs(self, spec: dict[str, Any], band: tuple[float, float], stats: dict[str, Any],
                 up: bool) -> tuple[str, str]:
        """An absolute target's candidate in the band must also have moved from its base towards
        it (``differs.py``): free past a base whose first ``far_run`` episodes all fell on the far
        side; else the base plays the seeds of the candidate's validation and confirmation and
        the paired lift test decides, so a candidate identical to its base is accepted with
        probability <= 0.05 per task."""
        r, rnd = self.r, self.round
        lead = f"{r.target.metric} in the band{', confirmed' if stats.get('confirmation') else ''}"
        run = (differs.far_run((float(band[0]), float(band[1])), up, r.rounds, r.confirm, r.validator.k_max)
               if r.target.binary else None)
        if run is not None:
            far = 0.0 if up else 1.0
            seen, played = self._base_run(run, far)
            if seen >= run:
                stats["differs"] = {"rule": "far base", "run": run, "base_episodes": played}
                return "accepted", (f"{lead}; the base's first {run} episodes all "
                                    f"{'failed' if up else 'succeeded'}, so it is far enough out that a candidate "
                                    f"identical to it is accepted with probability <= {differs.ALPHA_IDENTICAL:g} per task")
        phases = [(f"validate:{rnd}", int(stats["n"]))]
        if stats.get("confirmation"):
            phases.append((f"confirm:{rnd}", int(stats["confirmation"]["n"])))
        cand: dict[str, list[Any]] = {}
        base: dict[str, list[Any]] = {}
        pairs: list[tuple[float, float]] = []
        used: dict[str, int] = {}
        played = dropped = 0  # base episodes this check played; seeds left out for an episode that errored

        def extend(phase: str, more: int) -> None:
            nonlocal played, dropped
            c = self._sequence(spec, rnd, cand[phase], used[phase], more, phase)  # mostly read back
            before = r.rollouts.count()
            b = self._sequence(self.base, rnd, base[phase], used[phase], more, phase)
            played += r.rollouts.count() - before
            used[phase] += more
            # an episode that errored (either side) says nothing of its rate: its seed is no pair
            kept = [(tb, tc) for tb, tc in zip(b, c, strict=False) if _sound(tb) and _sound(tc)]
            dropped += min(len(b), len(c)) - len(kept)
            pairs.extend(differs.sign_pairs([r.value(tb) for tb, _ in kept], [r.value(tc) for _, tc in kept], up))

        for phase, n in phases:
            cand[phase], base[phase], used[phase] = [], [], 0
            extend(phase, min(n, LIFT_LOOKS[-1] - len(pairs)))
        test = LiftTest(delta=differs.FUTILITY_LIFT, alpha=differs.paired_alpha(r.rounds),
                        looks=differs.looks(len(pairs)))
        while (more := test.next_batch(pairs)) > 0 and sum(used.values()) < 2 * LIFT_LOOKS[-1]:
            extend(phases[-1][0], more)  # bounded: a base whose episodes keep erroring gets no more
        verdict, decisive = test.decide(pairs)
        towards, away = sum(1 for _, c in pairs if c), sum(1 for b, _ in pairs if b)
        stats["differs"] = {"rule": "paired", "pairs": len(pairs), "towards": towards, "away": away,
                            "alpha": test.alpha, "boundary_c": round(test.c, 4), "verdict": verdict,
                            "decisive": decisive, "far_run": run, "base_episodes": played,
                            "errored_seeds": dropped}
        where = f"on the same {len(pairs)} seeds as the base, {towards} moved towards the band and {away} away"
        if verdict == "beats":
            return "accepted", f"{lead}; {where} (paired test at alpha {test.alpha:g})"
        stats["decision"] = "below" if up else "above"  # for the designer: not moved enough from the base
        return "rejected", (f"in the band, but not shown to differ from the base: {where} (paired test at alpha "
                            f"{test.alpha:g}); a candidate that changes nothing would pass as often")

    def _base_run(self, n: int, far: float) -> tuple[int, int]:
        """How many of the base's first ``n`` observed episodes (the seeds the base check played)
        score ``far`` before the first that does not, and how many episodes that played: only
        those missing, and none once one episode already read back breaks the run."""
        sid = spec_id(self.base, self.r.registry)
        played: list[Any] = []
        for i in range(n):
            t = self.r.rollouts.cached(self.r.rollouts.key(self.task, sid, "observe", self.r.seed + i))
            if t is None:
                break
            played.append(t)
        before = self.r.rollouts.count()
        if len(played) < n and all(_sound(t) and self.r.value(t) == far for t in played):
            self._sequence(self.base, 0, played, len(played), n - len(played), "observe")
        # an errored episode is no outcome on the far side: it ends the run (the paired test decides)
        seen = next((i for i, t in enumerate(played[:n]) if not _sound(t) or self.r.value(t) != far),
                    min(n, len(played)))
        return seen, self.r.rollouts.count() - before

    def _reachable(self, band: tuple[float, float], baseline: dict[str, Any]) -> bool:
        """An absolute band narrower than the validator can judge is not tried. A relative
        target is given up only when the K observed rollouts *exclude* every base rate from
        which the lift is possible (Wilson, 95 %): a lift of D needs a base <= 1 - D (a lower
        target one >= |D|); a 5-rollout estimate alone decides nothing."""
        target = self.r.target
        if not target.relative:
            return target.reachable(band)
        lift = target.lift
        if abs(lift) >= 1:
            return False
        n = int(baseline.get("n", 0))
        hits = round(float(baseline.get(target.metric, 0.0)) * n)
        lo, hi = wilson(hits, n) if n else (0.0, 1.0)
        return lo <= 1 - lift if lift >= 0 else hi >= -lift

    def _reference_note(self) -> str:
        with make(self.base, registry=self.r.registry) as env:
            env.reset(task=self.task, seed=0)
            plan = cascade.reference_of(env)
        if plan is None:
            return ("none: the bridge has no reference solution for this task, so a candidate is only "
                    "probed with an observed winning episode, not proven solvable")
        return (f"every candidate replays the bridge's reference solution ({len(plan)} actions from this start) at "
                f"the first {cascade.REPLAY_SEEDS} episode seeds its validation plays and must still win there; "
                "later episodes are judged only by their outcomes")

    def _proposal(self, ctx: DesignContext) -> Proposal | None:
        if self.pending is not None and self.pending.get("round") == ctx.round and ctx.feedback is None:
            data, self.pending = self.pending, None
            return Proposal(**data["proposal"])
        proposal = self.r.designer.propose(ctx)
        if proposal is None:
            return None
        self.r.usage.add_llm(self.r.budget, proposal.usage)
        self.r.journal.append(self.key, "proposal", {"round": ctx.round, "proposal": attrs.asdict(proposal)})
        return proposal

    def _judge(self, stats: dict[str, Any], trajs: list[Any], proposal: Proposal) -> tuple[str, str]:
        decision = stats["decision"]
        crashed = sum(stats["error_classes"].values())
        if crashed * 2 >= max(1, stats["n"]):
            return "rejected", (f"{crashed} of {stats['n']} validation episodes ended in errors "
                                f"{stats['error_classes']}: they measure a broken episode, not the policy")
        if stats.get("floor_decision") == "below":
            return "rejected", (f"the weakness bites, but success fell below the floor "
                                f"{SUCCESS_FLOOR:g}: the candidate breaks more than the weakness")
        if stats["successes"] == 0 and stats["blocked_steps"] > 0:
            return "rejected", ("no success and actions were blocked: the candidate may make the task "
                                "unsolvable for this policy; loosen it")
        if decision != "in" and "lift" in stats:
            lift = stats["lift"]
            return "rejected", (f"the paired lift test did not show {self.r.target.metric} moving by "
                                f"{lift['asked']:+g} from the base's (measured {lift['measured']:+.2f} over "
                                f"{lift['pairs']} seed pairs, at alpha {lift['alpha']:g})")
        if decision != "in":
            return "rejected", f"{self.r.target.metric} {decision} the band"
        if not stats.get("decisive", True):
            return "rejected", (f"{self.r.target.metric} {stats.get(self.r.target.metric)} looks in the band, but "
                                f"{stats['n']} rollouts cannot judge it with the stated error rates (the outcomes "
                                "vary too much for the band, or --k-max cut the validation short): widen the band")
        if self.r.target.kind == "weakness":
            ids = _layer_ids(self.base, proposal.layers)
            if not any(candidate_acted(t, ids) for t in trajs if not t.success):
                return "rejected", "the candidate never acted in a failing episode: it misses the weakness"
        return "accepted", f"{self.r.target.metric} in the band"

    def _record(self, attempt: Attempt) -> None:
        self.attempts.append(attempt)
        data = {"attempt": attrs.asdict(attempt), "base_id": spec_id(self.base, self.r.registry),
                "usage": self.r.usage.to_data()}
        self.r.journal.append(self.key, "attempt", data)
        if attempt.verdict != "accepted":
            self.r.pool.reject({"task": self.key, "spec_id": attempt.spec_id, "round": attempt.round,
                                "layers": attempt.layers, "reason": attempt.reason, "verdict": attempt.verdict,
                                "stats": {"validation": attempt.result}, "meta": attempt.meta})

    def _accept(self, spec: dict[str, Any], attempt: Attempt, baseline: dict[str, Any]) -> None:
        r = self.r
        sid = spec_id(spec, r.registry)
        entry = {"task": self.key, "target": str(r.target), "diagnosis": attempt.diagnosis,
                 "rationale": attempt.rationale, "layers": attempt.layers, "meta": attempt.meta,
                 "stats": {"baseline": baseline, "validation": attempt.result},
                 "provenance": {"designer": r.designer_name, "policy": r.policy, "round": attempt.round,
                                "parent_spec_id": spec_id(self.base, r.registry), "created": time.time(),
                                "versions": r.rollouts.warm.versions}}
        path = r.pool.add(sid, spec, entry)
        r.journal.append(self.key, "accepted", {"spec_id": sid, "spec": spec, "path": str(path)})


def untrusted(data: Any) -> Any:
    """``data`` with every contract marked ``trust: untrusted``: code runs in the jail, and
    one that names a Python class (``cls``, imported in this process) is refused."""
    if isinstance(data, dict):
        out = {k: untrusted(v) for k, v in data.items()}
        if out.get("kind") == "contract":
            out["trust"] = "untrusted"
        return out
    if isinstance(data, list):
        return [untrusted(v) for v in data]
    return data


def probe_actions(trajs: list[Any]) -> list[Action]:
    """Executed actions of the shortest successful trajectory (a dry-run probe where the
    bridge has no reference solution)."""
    wins = sorted((t for t in trajs if t.success), key=steps_of)
    return [s.executed for s in wins[0].steps if s.executed] if wins else []


def _sound(t: Any) -> bool:
    """Whether an episode ended without an error (an infra, env or policy error is no outcome)."""
    return getattr(t, "error_class", None) is None
