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
from envh import EnvSpec, Registry, TaskRef, errors, get_registry, make, parse_spec, spec_id, spec_to_data

from .budget import Budget, BudgetExhausted, Usage
from .journal import Journal
from .loop import CONFIRM_OFFSET, LoopRun, TaskLoop
from .pool import HarnessPool
from .rollouts import Rollouts
from .stats import SequentialValidator
from .targets import parse_target
from .weakness import resolve as resolve_weakness

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
    diagnoser: str = "stats"  # a name from envh_diagnosers, with an optional ":ARG" (llm:MODEL)
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
    """``"split:NAME[:N]"``, or ``;``-separated ``SPLIT/ID`` / ``ID`` items.

    Every item is checked before anything is written: an unknown split or an id the bridge
    cannot reset to is an error naming the valid choices.
    """
    text = tasks or DEFAULT_TASKS.get(base["bridge"])
    with make(base, registry=registry) as env:
        if not text:
            return env.list_tasks()[:3]
        if text.startswith("split:"):
            _, name, *n = text.split(":")
            if n and (len(n) > 1 or not n[0].isdigit() or int(n[0]) < 1):
                raise errors.EnvhError(f"Bad --tasks {text!r}: use split:NAME or split:NAME:N with N >= 1.")
            found = env.list_tasks(name)[: int(n[0]) if n else None]
            if not found:
                raise errors.EnvhError(f"--tasks {text!r} names no task.")
            return found
        known = env.list_tasks()
        out = []
        for item in (x.strip() for x in text.split(";") if x.strip()):
            # ids may hold '/' themselves (ALFWorld's game folders): try known tasks first
            match = [t for t in known if item in (t.instance_id, f"{t.split}/{t.instance_id}")]
            if match:
                out.append(match[0])
                continue
            split, _, iid = item.partition("/") if "/" in item else ("", "", item)
            ref = TaskRef(suite=base["bridge"], split=split or "default", instance_id=iid)
            try:  # bridges that take any instance by construction (Toy24 numbers) accept it here
                env.reset(task=ref, seed=0)
            except Exception as exc:  # noqa: BLE001 - any refusal means the id is not a task
                sample = ", ".join(f"{t.split}/{t.instance_id}" for t in known[:8])
                raise errors.EnvhError(f"Unknown task {item!r} for bridge {base['bridge']!r} ({exc}). "
                                       f"Valid tasks include: {sample}"
                                       f"{' ...' if len(known) > 8 else ''}") from exc
            out.append(ref)
        if not out:
            raise errors.EnvhError(f"--tasks {text!r} names no task.")
        return list(dict.fromkeys(out))  # a task named twice runs once


def _config_data(config: RigConfig) -> dict[str, Any]:
    data = attrs.asdict(config)
    data.pop("resume")
    return data


# options a resumed run may change: they bound the run or place its work, never its results
RESUMABLE = ("budget", "workers", "resume")


def _differences(stored: dict[str, Any], config: RigConfig, explicit: set[str] | None) -> list[str]:
    now = json.loads(json.dumps(_config_data(config), default=repr))
    out = []
    for name, value in now.items():
        if name in RESUMABLE or (explicit is not None and name not in explicit):
            continue
        if stored.get(name) != value:
            out.append(f"{name}: stored {stored.get(name)!r}, given {value!r}")
    return out


def _check_numbers(config: RigConfig) -> None:
    for name, value, least in (("-k", config.k, 1), ("--rounds", config.rounds, 1),
                               ("--workers", config.workers, 1)):
        if int(value) < least:
            raise errors.EnvhError(f"{name} must be at least {least}, got {value}.")
    if config.k_max is not None and not 1 <= int(config.k_max) < CONFIRM_OFFSET:
        raise errors.EnvhError(f"--k-max must be at least 1 and below {CONFIRM_OFFSET} (a round's confirmation "
                               f"plays the seeds from {CONFIRM_OFFSET} past its validation's), got {config.k_max}.")
    if config.max_steps is not None and int(config.max_steps) < 1:
        raise errors.EnvhError(f"--max-steps must be at least 1, got {config.max_steps}.")
    b = config.budget
    for name, value in (("--max-rollouts", b.max_rollouts), ("--max-tokens", b.max_tokens),
                        ("--max-dollars", b.max_dollars), ("--max-seconds", b.max_seconds)):
        if value is not None and value < 0:
            raise errors.EnvhError(f"{name} must not be negative, got {value}.")


def prepare(config: RigConfig, reg: Registry, *, explicit: set[str] | None = None) -> dict[str, Any]:
    """Check every option and resolve every name; nothing is written.

    With ``resume`` and a stored run, the stored configuration is used; options given
    (all of them for an API call, those on the command line for ``envh rig``) must equal
    the stored ones, except the budget and the worker count. A difference is an error
    listing each one.
    """
    out = Path(config.out)
    saved = out / CONFIG_FILE
    if saved.exists() and not config.resume:
        raise errors.EnvhError(f"{out} already holds a rig run; pass --resume to continue it or "
                               "choose another --out.")
    if config.resume and saved.exists():
        stored = json.loads(saved.read_text())
        diffs = _differences(stored, config, explicit)
        if diffs:
            raise errors.EnvhError(f"--resume refused: {out} holds a run with another configuration:\n  "
                                   + "\n  ".join(diffs) + "\nUse another --out, or drop the differing options.")
        stored["budget"] = Budget(**stored["budget"]) if config.budget == Budget() else config.budget
        stored["workers"] = config.workers if explicit is None or "workers" in explicit else stored["workers"]
        config = RigConfig(**{**{k: v for k, v in stored.items() if k in attrs.fields_dict(RigConfig)},
                              "resume": True})
    _check_numbers(config)
    target = parse_target(config.target)
    base = load_base_spec(config.spec, reg)
    stored_id = json.loads(saved.read_text()).get("base_spec_id") if config.resume and saved.exists() else None
    if stored_id and stored_id != spec_id(base, reg):
        raise errors.EnvhError(f"--resume refused: the spec {config.spec!r} has changed since {out} was started "
                               f"(content {spec_id(base, reg)[:12]}, stored {stored_id[:12]}). Use another --out.")
    tasks = resolve_tasks(base, config.tasks, reg)
    reg.policy(config.policy.split(":")[0])
    name, _, arg = config.designer.partition(":")
    designer_factory = reg.designer(name).load()
    dname = config.diagnoser.split(":")[0]
    if dname not in reg.diagnosers():
        raise errors.UnknownNameError("diagnoser", dname, list(reg.diagnosers()))
    designer = designer_factory(arg or None, **config.designer_options)
    weakness = None
    try:
        if target.kind == "weakness":
            # a resumed run measures the predicate it was started with, not a fresh reading
            stored_pred = json.loads(saved.read_text()).get("weakness") if config.resume and saved.exists() else None
            weakness = resolve_weakness(stored_pred["predicate"] if stored_pred else target.text,
                                        registry=reg, bridge=base["bridge"],
                                        reader=getattr(designer, "translate_weakness", None))
            if stored_pred:
                weakness = attrs.evolve(weakness, text=target.text, translated_by=stored_pred.get("by", ""))
    except BaseException:
        designer.close()
        raise
    return {"config": config, "target": target, "base": base, "tasks": tasks, "weakness": weakness,
            "designer": designer}


def rig(config: RigConfig, *, registry: Registry | None = None, explicit: set[str] | None = None,
        echo: Callable[[str], None] = lambda _m: None) -> dict[str, Any]:
    """Run (or resume) the loop over every task; returns a summary with the report path.

    Every option is validated first (``prepare``): a refused command leaves nothing behind.
    """
    reg = registry or get_registry()
    ready = prepare(config, reg, explicit=explicit)
    config, target, base, tasks = ready["config"], ready["target"], ready["base"], ready["tasks"]
    designer, weakness = ready["designer"], ready["weakness"]
    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    stored = {"predicate": weakness.predicate, "by": weakness.translated_by} if weakness is not None else None
    (out / CONFIG_FILE).write_text(json.dumps({**_config_data(config), "base_spec_id": spec_id(base, reg),
                                               "weakness": stored}, indent=2, default=repr))
    journal = Journal(out)
    usage = Usage()
    usage.load(journal.last_usage())
    if weakness is not None and weakness.translated_by == "designer" and not config.resume:
        usage.add_llm(config.budget, {getattr(designer, "model", config.designer): dict(designer.usage)})
    max_steps = config.max_steps or DEFAULT_MAX_STEPS.get(base["bridge"], 30)
    # an episode that runs out of time counts as a failure: allow a minute a turn, so a slow
    # (or busy) machine slows the run down instead of biasing its measurements
    rollouts = Rollouts(out, policy=config.policy, registry=reg, policy_options=config.policy_options,
                        max_steps=max_steps, timeout_s=max(300.0, 60.0 * max_steps),
                        config=_config_data(config), workers=config.workers, on_episode=_progress(echo))
    run = LoopRun(registry=reg, rollouts=rollouts, journal=journal, pool=HarnessPool(out / "pool"),
                  designer=designer, designer_name=config.designer, policy=config.policy, target=target,
                  validator=SequentialValidator(k_max=config.k_max), budget=config.budget, usage=usage,
                  k=config.k, rounds=config.rounds, coevolve=config.coevolve, seed=config.seed, echo=echo,
                  diagnoser=config.diagnoser, weakness=weakness, tasks=len(tasks))
    usage.rollouts = rollouts.count()
    base_pool = HarnessPool.open(config.base_pool) if config.base_pool else None
    stops: dict[str, str] = {}
    try:
        for task in tasks:
            key = str(task)
            done = journal.events(key, "task_done")
            if done and done[-1]["stop"] != "crashed":  # a crashed task is tried again on resume
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
        if callable(close := getattr(run._diagnose, "close", None)):
            close()
        rollouts.close()
    from .report import write_report

    report = write_report(out, journal, tasks, target, usage, stops, config=_config_data(config),
                          validator=run.validator)
    journal.close()
    return {"report": str(report), "stops": stops, "usage": usage.to_data(), "out": str(out)}
