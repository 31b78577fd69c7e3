"""The experiment file: arms, training tasks, held-out tasks, schedule and seeds.

One YAML file declares the whole comparison, and it is checked before anything runs:
unknown keys fail with their path (``$.arms[1].rigg``), a held-out task that is also a
training task or one of the rig's tasks is a ``SpecError``, and the settings every arm
shares (steps, group size, episodes) are the same for every arm by construction: an arm
may only change keys that do not change its budget. ``fixed`` records which settings
were chosen before the first held-out evaluation (and on what population), so a later
revision of the design is visible in the file itself.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import attrs
import cattrs
import envh
from envh import errors

EXAMPLES = Path(__file__).parent / "examples"
KINDS = ("static", "rigged", "curriculum")
#: arm and experiment names become folder names: plain words only
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
#: training keys the experiment sets for every run itself (from seeds, the folder, held-out
#: tasks and arms): the file's ``train`` block may not set them
EXPERIMENT_KEYS = ("seed", "output_dir", "eval", "envs")
#: the only training keys an arm may set (its reward terms, e.g. a workspace arm's meta-action
#: allowance); everything else (optimizer, loss, sampling, prompt window, PPO epochs) is shared,
#: since it changes the budget or what the held-out evaluation plays
ARM_TRAIN_KEYS = ("reward",)
#: ``envh rig`` options the experiment sets itself
RIG_RESERVED = ("spec", "out", "resume", "seed")
MAX_FILE = 1 << 20  # bytes of an experiment file


@attrs.frozen(kw_only=True)
class Tasks:
    """Tasks of one population: instance ids of ``split`` (a bridge with open instances
    takes ids it does not list, e.g. any Toy24 numbers)."""

    split: str | None = None
    ids: tuple[str, ...] = ()


@attrs.frozen(kw_only=True)
class HeldOut:
    """The held-out tasks, grouped in classes (reported one by one and pooled)."""

    split: str | None = None
    classes: dict[str, tuple[str, ...]] = attrs.field(factory=dict)
    check_observations: bool = True  # also refuse a held-out task that starts where a training task does


@attrs.frozen(kw_only=True)
class Arm:
    """One way of training: ``static`` (the training tasks as they are), ``rigged`` (the
    harness pool ``envh rig`` builds for them), ``curriculum`` (the curriculum kind's
    decisions over whole GRPO groups). ``rig``: ``envh rig`` options; ``curriculum``:
    ``params``, ``policy`` and ``anchor`` as in the curriculum kind; ``train``: training
    keys this arm changes (never a budget key)."""

    name: str
    kind: str
    rig: dict[str, Any] = attrs.field(factory=dict)
    curriculum: dict[str, Any] = attrs.field(factory=dict)
    train: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen(kw_only=True)
class Experiment:
    """Everything a comparison needs (see the shipped ``toy24-adaptive.yaml``)."""

    name: str
    spec: Any = "toy24"
    train_tasks: Tasks
    heldout: HeldOut
    arms: tuple[Arm, ...]
    seeds: tuple[int, ...] = (0, 1)
    eval_every: int = 4
    eval_seed: int = 1234
    train: dict[str, Any] = attrs.field(factory=dict)
    compare: tuple[tuple[str, str], ...] = (("rigged", "static"),)
    baseline_arm: str = "static"
    keep_checkpoints: bool = False
    fixed: dict[str, Any] = attrs.field(factory=dict)
    description: str = ""

    def heldout_ids(self) -> list[tuple[str, str]]:
        """(class, instance id) of every held-out task, in file order."""
        return [(cls, i) for cls, ids in self.heldout.classes.items() for i in ids]


_converter = cattrs.Converter(forbid_extra_keys=True)


def from_data(data: Any) -> Experiment:
    """An experiment from plain data, checked; errors name the path of what is wrong."""
    if not isinstance(data, dict):
        raise errors.SpecError(f"An experiment file must be a mapping, got {type(data).__name__}")
    _check_lists(data)
    try:
        exp = _converter.structure(data, Experiment)
    except Exception as exc:  # noqa: BLE001 - cattrs' grouped errors become one message with paths
        problems = cattrs.transform_error(exc, path="$") if isinstance(exc, cattrs.BaseValidationError) \
            else [repr(exc)]
        raise errors.SpecError("Invalid experiment file: " + "; ".join(problems), problems) from exc
    check(exp)
    return exp


def _check_lists(data: dict[str, Any]) -> None:
    """Lists must be lists: a string where a list of ids belongs would become one task per
    character, and ``true`` where a seed belongs would become seed 1."""
    problems = []
    train = data.get("train_tasks")
    if isinstance(train, dict) and not isinstance(train.get("ids", []), list):
        problems.append("$.train_tasks.ids must be a list of task ids")
    held = data.get("heldout")
    classes = held.get("classes", {}) if isinstance(held, dict) else {}
    for name, ids in (classes.items() if isinstance(classes, dict) else ()):
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            problems.append(f"$.heldout.classes.{name} must be a list of task ids (strings)")
    if isinstance(train, dict) and not all(isinstance(i, str) for i in train.get("ids") or []):
        problems.append("$.train_tasks.ids must hold strings (quote ids such as \"2,6,9,9\")")
    seeds = data.get("seeds", [0])
    if not isinstance(seeds, list) or any(type(x) is not int for x in seeds):
        problems.append("$.seeds must be a list of integers")
    for key in ("eval_every", "eval_seed"):
        if key in data and type(data[key]) is not int:
            problems.append(f"$.{key} must be an integer")
    if "keep_checkpoints" in data and type(data["keep_checkpoints"]) is not bool:
        problems.append("$.keep_checkpoints must be true or false")
    for where, block in (("train_tasks", train), ("heldout", held)):
        if isinstance(block, dict) and block.get("split") is not None and not isinstance(block["split"], str):
            problems.append(f"$.{where}.split must be a split name")
    if isinstance(held, dict) and "check_observations" in held and type(held["check_observations"]) is not bool:
        problems.append("$.heldout.check_observations must be true or false")
    if problems:
        raise errors.SpecError("Invalid experiment file: " + "; ".join(problems), problems)


def to_data(exp: Experiment) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(json.dumps(_converter.unstructure(exp)))
    return data


def config_hash(exp: Experiment) -> str:
    """What a resume must match: everything but the bookkeeping keys, and the contents of
    a spec file the experiment names (a changed file is a changed benchmark)."""
    data = {k: v for k, v in to_data(exp).items() if k not in ("keep_checkpoints", "description")}
    if isinstance(exp.spec, str) and Path(exp.spec).is_file():
        data["spec_file"] = hashlib.sha256(Path(exp.spec).read_bytes()).hexdigest()
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def _digest(data: Any) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def _shared(exp: Experiment) -> dict[str, Any]:
    """What every result of an experiment depends on: the benchmark and the held-out
    evaluation (a spec file by its contents)."""
    data = to_data(exp)
    # the held-out tasks in file order: the order fixes each task's evaluation seed
    out = {k: data[k] for k in ("spec", "eval_seed")} | {"heldout": [i for _, i in exp.heldout_ids()],
                                                          "split": exp.heldout.split}
    if isinstance(exp.spec, str) and Path(exp.spec).is_file():
        out["spec_file"] = hashlib.sha256(Path(exp.spec).read_bytes()).hexdigest()
    model = exp.train.get("model")
    if isinstance(model, str) and Path(model).is_dir():  # weights by what is on disk, not by the path
        out["model_files"] = sorted((str(f.relative_to(model)), f.stat().st_size, f.stat().st_mtime_ns)
                                    for f in Path(model).rglob("*") if f.is_file())
    return out


def run_keys(exp: Experiment) -> dict[str, str]:
    """A key per result an experiment writes (``baseline``, ``rig``, ``ARM/seed-S``): equal
    keys in two experiments mean the result was made by the same settings, so ``--reuse``
    may copy it instead of running it again. A run's key covers the training tasks, the
    shared training block, its arm (kind, rig, curriculum, overrides), its seed and the
    evaluation schedule; the rig's, the rigged arm's rig options; the baseline's, what its
    step-0 evaluation played with."""
    data, shared = to_data(exp), _shared(exp)
    keys = {"baseline": _digest({**shared, "train": data["train"], "arm0": data["arms"][0]["train"]})}
    for arm in data["arms"]:
        if arm["kind"] == "rigged" and "rig" not in keys:
            rig_shared = {k: v for k, v in shared.items() if k != "model_files"}  # the rig plays its own policy
            keys["rig"] = _digest({**rig_shared, "train_tasks": data["train_tasks"], "rig": arm["rig"]})
        for seed in data["seeds"]:
            keys[f"{arm['name']}/seed-{seed}"] = _digest({
                **shared, "train_tasks": data["train_tasks"], "train": data["train"], "arm": arm, "seed": seed,
                "eval_every": data["eval_every"], "rig": keys.get("rig") if arm["kind"] == "rigged" else None})
    return keys


def load(path: str | Path) -> Experiment:
    """A YAML file, or the name of a shipped example (``toy24-adaptive``)."""
    import yaml

    p = Path(path)
    if not p.is_file() and (EXAMPLES / f"{path}.yaml").is_file():
        p = EXAMPLES / f"{path}.yaml"
    if not p.is_file():
        shipped = ", ".join(sorted(f.stem for f in EXAMPLES.glob("*.yaml")))
        raise errors.SpecError(f"Experiment {str(path)!r} is neither a file nor a shipped example ({shipped})")
    try:
        raw = p.read_bytes()
        if len(raw) > MAX_FILE:
            raise errors.SpecError(f"Experiment file {p} is {len(raw):,} bytes; the limit is {MAX_FILE:,}")
        text = raw.decode("utf-8")
        for event in yaml.parse(text, Loader=yaml.SafeLoader):  # anchors expand without bound: refuse them
            if isinstance(event, yaml.AliasEvent):
                raise errors.SpecError(f"Experiment file {p} uses a YAML alias (*{event.anchor}); write the value out")
        data = yaml.safe_load(text)
    except UnicodeDecodeError as exc:
        raise errors.SpecError(f"Experiment file {p} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except yaml.YAMLError as exc:
        raise errors.SpecError(f"Experiment file {p} is not valid YAML: {exc}") from exc
    return from_data(data)


def check(exp: Experiment) -> None:
    """Refuse what cannot be a fair comparison, before anything runs."""
    problems: list[str] = []
    names = [a.name for a in exp.arms]
    for what, name in [("name", exp.name), *((f"arms[{i}].name", n) for i, n in enumerate(names))]:
        if not NAME.fullmatch(name) or name in (".", ".."):
            problems.append(f"{what} {name!r} must be a plain name (letters, digits, '_', '-', '.'; it names a folder)")
    if not exp.arms:
        problems.append("arms is empty")
    if not isinstance(exp.spec, str) and not (isinstance(exp.spec, dict) and isinstance(exp.spec.get("bridge"), str)):
        problems.append(f"spec must be a bridge name, a spec file or a mapping with 'bridge', got "
                        f"{type(exp.spec).__name__}")
    else:
        try:  # a file or JSON text is read as envh reads it: layers there are layers too
            parsed = envh.parse_spec(exp.spec)
        except errors.EnvhError as exc:
            problems.append(f"spec: {exc}")
        else:
            if parsed.layers:
                problems.append("spec must be the plain benchmark (a bridge and its options, no layers): held-out "
                                "tasks are played on it, and the rigged arm's layers come from the rig")
    for i, arm in enumerate(exp.arms):
        anchor = arm.curriculum.get("anchor", 0.1)
        if arm.kind == "curriculum" and (type(anchor) not in (int, float) or not 0 <= anchor < 1):
            problems.append(f"arms[{i}] ({arm.name}): curriculum.anchor must be a number in [0, 1) (1 would play "
                            "only the training tasks: the static arm)")
    for cls, ids in exp.heldout.classes.items():
        if not ids:
            problems.append(f"heldout.classes.{cls} is empty")
    if "nproc" in exp.train:
        problems.append("train.nproc: an experiment trains in one process (remove it)")
    for what, ids in [("train_tasks.ids", exp.train_tasks.ids),
                      *((f"heldout.classes.{c}", v) for c, v in exp.heldout.classes.items())]:
        bad = [i for i in ids if not i.strip()]
        if bad or len(ids) != len(set(ids)):
            problems.append(f"{what} must list distinct, non-empty task ids (a YAML list)")
    if any(type(s) is not int or not 0 <= s < 2**31 for s in exp.seeds):
        problems.append(f"seeds must be integers in [0, 2**31): {list(exp.seeds)}")
    for i, arm in enumerate(exp.arms):
        extra = sorted(set(arm.train) - set(ARM_TRAIN_KEYS))
        if extra:
            problems.append(f"arms[{i}] ({arm.name}) sets train keys {extra}: an arm may only set "
                            f"{', '.join(ARM_TRAIN_KEYS)}; the rest is shared, so put it in the top-level 'train'")
        reserved = sorted(set(arm.rig) & set(RIG_RESERVED))
        if reserved:
            problems.append(f"arms[{i}] ({arm.name}): rig.{reserved[0]} is set by the experiment itself; remove it")
    if sum(a.kind == "rigged" for a in exp.arms) > 1:
        problems.append("at most one rigged arm: its rig runs once, into the result folder's rig/")
    if len(set(names)) != len(names):
        problems.append(f"arm names repeat: {names}")
    for i, arm in enumerate(exp.arms):
        if arm.kind not in KINDS:
            problems.append(f"arms[{i}].kind {arm.kind!r}: choose one of {', '.join(KINDS)}")
        if arm.kind == "curriculum" and not arm.curriculum.get("params"):
            problems.append(f"arms[{i}] ({arm.name}): a curriculum arm needs curriculum.params")
    for a, b in exp.compare:
        if a == b:
            problems.append(f"compare [{a}, {b}] compares an arm with itself")
        for n in (a, b):
            if n not in names:
                problems.append(f"compare names arm {n!r}, which is not declared ({', '.join(names)})")
    if exp.baseline_arm not in names:
        problems.append(f"baseline_arm {exp.baseline_arm!r} is not a declared arm")
    if len(exp.seeds) < 1 or len(set(exp.seeds)) != len(exp.seeds):
        problems.append(f"seeds must be distinct and at least one: {list(exp.seeds)}")
    steps = exp.train.get("steps", 3)
    if exp.eval_every < 1 or not isinstance(steps, int) or steps % exp.eval_every:
        problems.append(f"eval_every must be >= 1 and divide train.steps ({steps}), got {exp.eval_every}: the last "
                        "step is always evaluated")
    if not exp.train_tasks.ids:
        problems.append("train_tasks.ids is empty")
    held = exp.heldout_ids()
    if not held:
        problems.append("heldout.classes holds no task")
    ids = [i for _, i in held]
    if len(set(ids)) != len(ids):
        dup = sorted({i for i in ids if ids.count(i) > 1})
        problems.append(f"held-out tasks repeat: {dup[:5]}")
    for key in EXPERIMENT_KEYS:
        if key in exp.train:
            problems.append(f"train.{key} is set by the experiment itself; remove it")
    leak = sorted(set(ids) & set(exp.train_tasks.ids))
    if leak:
        problems.append(f"held-out tasks are also training tasks: {leak[:5]} (held-out tasks never appear in "
                        "training or in the rig)")
    for i, arm in enumerate(exp.arms):
        rig_tasks = _rig_task_ids(arm.rig.get("tasks"))
        leak = sorted(set(ids) & set(rig_tasks))
        if leak:
            problems.append(f"arms[{i}] ({arm.name}): the rig's tasks include held-out tasks {leak[:5]}")
        extra = sorted(set(rig_tasks) - set(exp.train_tasks.ids))
        if rig_tasks and extra:
            problems.append(f"arms[{i}] ({arm.name}): the rig's tasks {extra[:5]} are not training tasks")
    if problems:
        raise errors.SpecError("Impossible experiment: " + "; ".join(problems), problems)


def _rig_task_ids(text: Any) -> list[str]:
    """Instance ids named by a rig ``tasks`` option (``ID;SPLIT/ID;...``); none: the training tasks."""
    if not text:
        return []
    if not isinstance(text, str) or text.startswith("split:"):
        raise errors.SpecError("An arm's rig.tasks must list task ids ('ID;ID'), not a split: the rig runs on the "
                               "training tasks (leave it out to use all of them)")
    return [item.strip().rpartition("/")[2] for item in text.split(";") if item.strip()]
