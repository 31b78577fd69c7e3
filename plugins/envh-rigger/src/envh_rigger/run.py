"""A rig run: config, tasks, the shared loop state, crash isolation per task, the report.

``rig(config)`` is what ``envh rig`` calls. The run's directory holds the trajectory
store (with the loop's journal), the harness pool and the report; ``resume=True``
continues a killed run from its journal with the config it was started with.
"""

from __future__ import annotations

import json
import traceback
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

import attrs
from envh import EnvSpec, Registry, TaskRef, errors, get_registry, make, parse_spec, spec_to_data

from .budget import Budget, BudgetExhausted, Usage
from .journal import Journal
from .loop import LoopRun, TaskLoop
from .pool import HarnessPool
from .rollouts import Rollouts
from .stats import SequentialValidator
from .targets import parse_target

DEFAULT_TASKS = {"toy24": "split:medium:2"}
DEFAULT_MAX_STEPS = {"toy24": 12}  # the shipped spec's budget is 6 env steps; invalid turns count here
CONFIG_FILE = "rig.json"


@attrs.frozen(kw_only=True)
class RigConfig:
    """The arguments of ``envh rig`` (see ``envh rig --help``)."""

    spec: str | dict[str, Any] = "toy24"
    tasks: str | None = None
    policy: str = "local:smollm2"
    policy_options: dict[str, Any] = attrs.field(factory=dict)
    designer: str = "template"
    designer_options: dict[str, Any] = attrs.field(factory=dict)
    target: str = "sr:0.4-0.6"
    k: int = 5
    k_max: int | None = None  # None: the band's validator design picks it (30 at width 0.2)
    rounds: int = 5
    out: str = "runs/rig"
    resume: bool = False
    coevolve: bool = False
    base_pool: str | None = None
    seed: int = 0
    max_steps: int | None = None  # policy turns per episode, invalid ones included
    workers: int = 1
    budget: Budget = attrs.field(factory=Budget)


def _progress(echo: Callable[[str], None]) -> Callable[[Any], None]:
    """One short line per played episode, so a long run shows it is moving."""
    played = [0, 0]

    def on_episode(traj: Any) -> None:
        played[0] += 1
        played[1] += bool(traj.success)
        phase = traj.key.split("|")[2] if traj.key.count("|") >= 2 else ""
        outcome = "solved" if traj.success else (traj.error_class or "failed")
        echo(f"  episode {played[0]} ({phase}, {traj.task}, seed {traj.seed}): {outcome} "
             f"in {len(traj.steps)} steps · {played[1]}/{played[0]} solved so far")

    return on_episode


def load_base_spec(spec: str | dict[str, Any], registry: Registry) -> dict[str, Any]:
    """A spec file, spec data, or a bridge name (its shipped default spec, if any)."""
    if isinstance(spec, str) and spec in registry.bridges() and not Path(spec).exists():
        shipped = resources.files("envh_rigger") / "specs" / f"{spec}.yaml"
        source: Any = shipped.read_text() if shipped.is_file() else {"bridge": spec}
    else:
        source = spec
    parsed: EnvSpec = parse_spec(source, registry)
    return spec_to_data(parsed, registry)


def resolve_tasks(base: dict[str, Any], tasks: str | None, registry: Registry) -> list[TaskRef]:
    """``"split:NAME[:N]"``, or ``;``-separated ``SPLIT/ID`` / ``ID`` items."""
    text = tasks or DEFAULT_TASKS.get(base["bridge"])
    with make(base, registry=registry) as env:
        if not text:
            return env.list_tasks()[:3]
        if text.startswith("split:"):
            _, name, *n = text.split(":")
            return env.list_tasks(name)[: int(n[0]) if n else None]
        known = env.list_tasks()
        out = []
        for item in (x.strip() for x in text.split(";") if x.strip()):
            # ids may hold '/' themselves (ALFWorld's game folders): try known tasks first
            match = [t for t in known if item in (t.instance_id, f"{t.split}/{t.instance_id}")]
            if match:
                out.append(match[0])
                continue
            split, _, iid = item.partition("/") if "/" in item else ("", "", item)
            out.append(TaskRef(suite=base["bridge"], split=split or "default", instance_id=iid))
        return out


def _config_data(config: RigConfig) -> dict[str, Any]:
    data = attrs.asdict(config)
    data.pop("resume")
    return data


def rig(config: RigConfig, *, registry: Registry | None = None,
        echo: Callable[[str], None] = lambda _m: None) -> dict[str, Any]:
    """Run (or resume) the loop over every task; returns a summary with the report path."""
    reg = registry or get_registry()
    out = Path(config.out)
    saved = out / CONFIG_FILE
    if config.resume and saved.exists():
        stored = json.loads(saved.read_text())
        stored["budget"] = Budget(**stored["budget"]) if config.budget == Budget() else config.budget
        config = RigConfig(**{**stored, "resume": True})
    elif saved.exists():
        raise errors.EnvhError(f"{out} already holds a rig run; pass --resume to continue it or "
                               "choose another --out.")
    out.mkdir(parents=True, exist_ok=True)
    saved.write_text(json.dumps(_config_data(config), indent=2, default=repr))
    target = parse_target(config.target)
    base = load_base_spec(config.spec, reg)
    tasks = resolve_tasks(base, config.tasks, reg)
    name, _, arg = config.designer.partition(":")
    designer = reg.designer(name).load()(arg or None, **config.designer_options)
    journal = Journal(out)
    usage = Usage()
    usage.load(journal.last_usage())
    rollouts = Rollouts(out, policy=config.policy, registry=reg, policy_options=config.policy_options,
                        max_steps=config.max_steps or DEFAULT_MAX_STEPS.get(base["bridge"], 30), config=_config_data(config), workers=config.workers,
                        on_episode=_progress(echo))
    run = LoopRun(registry=reg, rollouts=rollouts, journal=journal, pool=HarnessPool(out / "pool"),
                  designer=designer, designer_name=config.designer, policy=config.policy, target=target,
                  validator=SequentialValidator(k_max=config.k_max), budget=config.budget, usage=usage,
                  k=config.k, rounds=config.rounds, coevolve=config.coevolve, seed=config.seed, echo=echo)
    usage.rollouts = rollouts.count()
    base_pool = HarnessPool.open(config.base_pool) if config.base_pool else None
    stops: dict[str, str] = {}
    try:
        for task in tasks:
            key = str(task)
            done = journal.events(key, "task_done")
            if done:
                stops[key] = done[-1]["stop"]
                continue
            start = base
            if base_pool is not None and (entry := base_pool.for_task(key)) is not None:
                start = base_pool.load_spec(entry["spec_id"])
            try:
                stop = TaskLoop(run, task, start).run()
                detail = ""
            except BudgetExhausted as exc:
                stops[key] = exc.reason
                journal.append(key, "budget_stop", {"stop": exc.reason, "usage": usage.to_data()})
                echo(f"[{key}] stopped: {exc.reason}")
                break  # budgets are run-wide: the remaining tasks stay untouched for --resume
            except Exception as exc:  # noqa: BLE001 - one task's crash must not end the run
                stop, detail = "crashed", "".join(traceback.format_exception(exc))[-4000:]
                echo(f"[{key}] crashed: {exc!r}")
            stops[key] = stop
            journal.append(key, "task_done", {"stop": stop, "detail": detail, "usage": usage.to_data()})
            echo(f"[{key}] done: {stop}")
    finally:
        designer.close()
        rollouts.close()
    from .report import write_report

    report = write_report(out, journal, tasks, target, usage, stops, config=_config_data(config),
                          validator=run.validator)
    journal.close()
    return {"report": str(report), "stops": stops, "usage": usage.to_data(), "out": str(out)}
