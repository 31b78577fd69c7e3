"""Run an experiment end to end: check, rig, evaluate the untrained policy, train every
arm with every seed, report. Resumable at every stage.

Result folder::

    experiment.json     the file as data, its hash, when it was fixed, the machine
    heldout.json        the held-out tasks with their classes
    rig/                the rigged arm's ``envh rig`` run (its pool is the arm's training worlds)
    baseline/           the untrained policy on the held-out tasks (step 0, shared: greedy)
    arms/<arm>/seed-<s>/  an ``envh train`` output folder (metrics.jsonl, eval/step-N.jsonl)
    report.md, *.png

Every held-out evaluation plays the plain benchmark (no layers), greedily, on the same
episodes for every arm and seed (``eval.seed``), so arms are compared task by task.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shutil
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import envh
from envh import errors
from envh.rollout import package_versions

from .config import Experiment, config_hash, from_data, run_keys, to_data

Echo = Callable[[str], None]
#: envh rig's line per episode: "episode 3 (observe, TASK, seed 2): OUTCOME in 5 steps · ..."
_EPISODE = re.compile(r"episode \d+ \(.*\): (\S+) in \d+ steps")


def _write(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True))
    os.replace(tmp, path)


def _read(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None


class Runner:
    """One experiment in one folder. ``resume``: continue a stopped run (refused when the
    file changed since it started); without it an existing folder is refused."""

    def __init__(self, exp: Experiment, out: str | Path, *, resume: bool = False, reuse: str | Path | None = None,
                 echo: Echo = print) -> None:
        self.exp, self.out, self.echo = exp, Path(out), echo
        self.resume, self.reuse = resume, None if reuse is None else Path(reuse)

    # -- checks and bookkeeping -------------------------------------------------------
    def prepare(self) -> None:
        """Everything checked before anything is written (a refused run leaves nothing)."""
        meta = _read(self.out / "experiment.json")
        if self.reuse is not None and meta is not None:
            raise errors.EnvhError(f"--reuse starts a new result folder; {self.out} already holds one (its reused "
                                   "results are recorded in its experiment.json)")
        if meta is None and self.out.is_dir() and any(self.out.iterdir()):
            raise errors.EnvhError(f"{self.out} is not empty but holds no experiment (a run killed while it "
                                   "copied --reuse results, or another folder): results in it were not made by "
                                   "this file; remove it or choose another --out")
        if meta is not None and not self.resume:
            raise errors.EnvhError(f"{self.out} already holds experiment {meta.get('name')!r}; pass --resume to "
                                   "continue it or choose another --out")
        if meta is not None and meta.get("config_hash") != config_hash(self.exp):
            raise errors.StateError(f"--resume refused: {self.out} was started with another experiment file (hash "
                                    f"{meta.get('config_hash')}, now {config_hash(self.exp)}); a changed design is a "
                                    "new run: choose another --out")
        self._check_separation()
        self.check_settings()
        reused = self._reusable() if self.reuse is not None else {}
        if meta is None:
            for name, source in reused.items():  # before experiment.json: a kill here leaves a folder refused above
                shutil.copytree(source, self.out / _result_dir(name), symlinks=True,
                                ignore=shutil.ignore_patterns("checkpoints", ".lock"))
                self.echo(f"[reuse] {name} from {source}")
            if "rig" in reused:  # the copy is this folder's rig now (a resume checks its stored out)
                stored = _read(self.out / "rig" / "rig.json") or {}
                _write(self.out / "rig" / "rig.json", {**stored, "out": str(self.out / "rig")})
            source_meta = (_read(self.reuse / "experiment.json") or {}) if self.reuse is not None else {}
            load = os.getloadavg()
            _write(self.out / "experiment.json", {
                "name": self.exp.name, "config": to_data(self.exp), "config_hash": config_hash(self.exp),
                "fixed_at": datetime.now(UTC).isoformat(timespec="seconds"),
                "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
                            "load_start": [round(x, 2) for x in load]},
                "heldout_sha256": hashlib.sha256(json.dumps(self.exp.heldout_ids()).encode()).hexdigest(),
                "arms": [a.name for a in self.exp.arms], "seeds": list(self.exp.seeds),
                "baseline_arm": self.exp.baseline_arm, "compare": [list(p) for p in self.exp.compare],
                "run_keys": run_keys(self.exp),
                "reused": {name: {"from": str(source), **{k: source_meta.get(k) for k in (
                    "config_hash", "machine", "fixed_at")}} for name, source in reused.items()},
                "versions": package_versions(envh.get_registry())})
        if not (self.out / "heldout.json").exists():  # also after a kill between the two writes
            _write(self.out / "heldout.json", {"split": self.exp.heldout.split, "tasks": [
                {"id": str(self._ref(i, self.exp.heldout.split)), "instance_id": i, "class": c}
                for c, i in self.exp.heldout_ids()]})

    def _reusable(self) -> dict[str, Path]:
        """The results of ``--reuse``'s folder made by the same settings as this file's (equal
        ``run_keys``) and finished: result name -> its folder there."""
        assert self.reuse is not None
        meta = _read(self.reuse / "experiment.json")
        if meta is None or not isinstance(meta.get("config"), dict):
            raise errors.EnvhError(f"--reuse: {self.reuse} holds no experiment (no experiment.json with its config)")
        theirs = meta.get("run_keys")
        spec_file = isinstance(meta["config"].get("spec"), str) and Path(meta["config"]["spec"]).is_file()
        if theirs is None and spec_file:
            raise errors.EnvhError(f"--reuse: {self.reuse} names a spec file whose contents then are not "
                                   "recorded; its results cannot be matched")
        if not spec_file:  # the keys must be the ones its recorded file gives (an edited record is refused)
            derived = run_keys(from_data(meta["config"]))
            if theirs is not None and theirs != derived:
                raise errors.EnvhError(f"--reuse: the run keys recorded in {self.reuse / 'experiment.json'} are not "
                                       "those of the config recorded beside them; it was edited, nothing is reused")
            theirs = derived
        now = package_versions(envh.get_registry())
        if meta.get("versions") not in (None, now):
            changed = sorted(k for k in {*now, *meta["versions"]} if now.get(k) != meta["versions"].get(k))
            self.echo(f"[reuse] nothing reused: {self.reuse} was made under other versions ({', '.join(changed)})")
            return {}
        out: dict[str, Path] = {}
        for name, key in run_keys(self.exp).items():
            folder = self.reuse / _result_dir(name)
            finished = {"baseline": folder / "eval" / "step-0.jsonl", "rig": folder / "summary.json"}.get(
                name, folder / "done.json")
            if theirs.get(name) == key and finished.exists() and not folder.is_symlink() and \
                    (name != "rig" or (_read(finished) or {}).get("complete")):
                out[name] = folder
        rigged = {a.name for a in self.exp.arms if a.kind == "rigged"}
        if "rig" not in out:  # a rigged run is reused only with the pool it trained on
            out = {k: v for k, v in out.items() if k.partition("/")[0] not in rigged}
        if not out:
            self.echo(f"[reuse] nothing in {self.reuse} was made with this file's settings: every result runs")
        return out

    def check_settings(self) -> None:
        """Every arm's training config for every seed, the rig's options and the curriculum
        are built and checked now, so a mistake stops the run before anything is written
        (not after a 15-minute rig)."""
        from envh_grpo import checkpoint
        from envh_grpo.config import check
        from envh_grpo.trainer import resolve_model

        model_config = None
        for arm in self.exp.arms:
            for seed in self.exp.seeds:
                config = self.train_config(arm, seed, self.out / "arms" / arm.name / f"seed-{seed}", plain=True)
                if model_config is None:
                    model_config = checkpoint.read_json(resolve_model(config.model) / "config.json")
                check(config, world_size=1, model_config=model_config)
            if arm.kind == "rigged":
                from envh_rigger.run import prepare

                folder = self.out / "rig"
                ready = prepare(self._rig_config(arm, resume=(folder / "rig.json").exists()), envh.get_registry())
                ready["designer"].close()
            if arm.kind == "curriculum":
                self._chooser(arm, self.exp.seeds[0], self.out / "unused.jsonl").close()

    def _rig_config(self, arm: Any, *, resume: bool) -> Any:
        from envh_rigger.run import RigConfig

        options = dict(arm.rig)
        tasks = options.pop("tasks", None) or ";".join(
            f"{self.exp.train_tasks.split}/{i}" if self.exp.train_tasks.split else i for i in self.exp.train_tasks.ids)
        budget = options.pop("budget", None)
        if budget is not None:
            from envh_rigger.budget import Budget

            if not isinstance(budget, dict):
                raise errors.SpecError(f"arms: {arm.name}.rig.budget must be a mapping (max_seconds, max_rollouts, ...)")
            try:
                options["budget"] = Budget(**budget)
            except TypeError as exc:
                raise errors.SpecError(f"arms: {arm.name}.rig.budget: {exc}") from None
        try:
            return RigConfig(spec=self.exp.spec, tasks=tasks, out=str(self.out / "rig"), resume=resume, **options)
        except TypeError as exc:
            raise errors.SpecError(f"arms: {arm.name}.rig: {exc} (options are envh rig's: target, k, rounds, "
                                   "max_steps, policy, policy_options, budget, ...)") from None

    def _chooser(self, arm: Any, seed: int, audit: Path) -> Any:
        from envh_grpo import data

        from .chooser import GroupCurriculum

        try:
            return GroupCurriculum(self.exp.spec, arm.curriculum,
                                   training=lambda sources, pos: data.draw(sources, seed, pos),
                                   excluded=self.heldout_filter(), audit=audit, seed=seed)
        except (TypeError, KeyError) as exc:
            raise errors.SpecError(f"arms: {arm.name}.curriculum: {exc!r} (params, policy and anchor as in the "
                                   "curriculum kind)") from None

    def _ref(self, instance_id: str, split: str | None) -> envh.TaskRef:
        return self._refs(split).get(instance_id) or envh.TaskRef(
            suite=self._suite(), split=split or "default", instance_id=instance_id)

    def _refs(self, split: str | None) -> dict[str, envh.TaskRef]:
        cache = self.__dict__.setdefault("_ref_cache", {})
        if split not in cache:
            with envh.make(self.exp.spec) as env:
                cache[split] = {t.instance_id: t for t in env.list_tasks(split)}
        result: dict[str, envh.TaskRef] = cache[split]
        return result

    def _suite(self) -> str:
        """The bridge's name, as the trainer writes it into task ids (a spec file's path is not)."""
        return envh.parse_spec(self.exp.spec).bridge

    def _check_separation(self) -> None:
        """A held-out task that is a training task under another name is refused, as an
        exact id match is: the same puzzle by the bridge's ``canonical_task`` (``9,2,6,9``
        is ``2,6,9,9``), or, with ``check_observations``, the same start observation."""
        seen: dict[str, str] = {}
        look = self.exp.heldout.check_observations
        with envh.make(self.exp.spec) as env:
            for i in self.exp.train_tasks.ids:
                seen.update(dict.fromkeys(self._start_keys(env, i, self.exp.train_tasks.split, observation=look), i))
            for cls, i in self.exp.heldout_ids():
                keys = self._start_keys(env, i, self.exp.heldout.split, observation=look)
                same = next((seen[k] for k in keys if k in seen), None)
                if same is not None:
                    raise errors.SpecError(f"Held-out task {i!r} ({cls}) is training task {same!r} under another "
                                           "name: held-out tasks never appear in training")

    def _start_keys(self, env: Any, instance: str, split: str | None, *, observation: bool) -> list[str]:
        """What identifies where a task starts: the bridge's ``canonical_task`` where it has
        one, and (``observation``) the observation its reset shows."""
        ref = self._ref(instance, split)
        canonical = getattr(env.unwrapped, "canonical_task", None)
        out = [f"task:{canonical(ref)}"] if canonical is not None else []
        if observation:
            out.append("observation:" + env.reset(task=ref, seed=0).observation.text)
        return out

    def heldout_filter(self) -> Callable[[Any], bool]:
        """Is a task (one a curriculum generates) a held-out task, by id or by the bridge's
        ``canonical_task``?"""
        with envh.make(self.exp.spec) as env:
            canonical = getattr(env.unwrapped, "canonical_task", None)
            split = self.exp.heldout.split
            ids = {i for _, i in self.exp.heldout_ids()}
            keys = {canonical(self._ref(i, split)) for i in ids} if canonical is not None else set()

        def held(task: Any) -> bool:
            return task.instance_id in ids or (canonical is not None and canonical(task) in keys)

        return held

    # -- stages -----------------------------------------------------------------------
    def run(self) -> Path:
        from .report import build_report

        self.prepare()
        self._lock()
        try:
            self._stages()
        finally:
            self._lock_file.close()
        report = build_report(self.out)
        self.echo(f"report: {report}")
        return report

    def _stages(self) -> None:
        rigged = [a for a in self.exp.arms if a.kind == "rigged"]
        if rigged:
            self.rig(rigged[0])
            summary = _read(self.out / "rig" / "summary.json") or {}
            if not summary.get("complete"):
                crashed = [t for t, stop in (summary.get("stops") or {}).items() if stop == "crashed"]
                raise errors.EnvhError(f"The rig crashed on {', '.join(crashed) or 'some tasks'}; the rigged arm "
                                       f"trains on its whole pool only: fix the cause and run again with --resume")
            if summary.get("errored") and summary.get("errored") == summary.get("rollouts"):
                raise errors.EnvhError(f"Every one of the rig's {summary['errored']} episodes ended in an error "
                                       f"(see {self.out / 'rig' / 'report.md'}): its policy never played, so the "
                                       "rigged arm would be the static arm. Fix the rig's policy settings.")
        self.baseline()
        for arm in self.exp.arms:
            for seed in self.exp.seeds:
                self.train(arm, seed)

    def _lock(self) -> None:
        """One process per result folder: a second ``--resume`` would train the same runs."""
        import fcntl

        self._lock_file = open(self.out / ".lock", "w")  # noqa: SIM115 - held for the run's life
        try:
            fcntl.flock(self._lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self._lock_file.close()
            raise errors.StateError(f"{self.out} is in use by another envh experiment process") from None

    def rig(self, arm: Any) -> None:
        """The rigged arm's harness pool: ``envh rig`` on the training tasks (resumable)."""
        from envh_rigger.run import rig

        folder = self.out / "rig"
        summary = _read(folder / "summary.json")
        if summary is not None and summary.get("complete"):
            return
        resume = (folder / "rig.json").exists()
        config = self._rig_config(arm, resume=resume)
        n_tasks = len(str(config.tasks).split(";"))
        self.echo(f"[rig] {'resuming' if resume else 'starting'} envh rig on {n_tasks} training tasks")
        t0, before = time.perf_counter(), float((summary or {}).get("seconds", 0.0))

        errored = [int((summary or {}).get("errored", 0))]

        def echo(message: str) -> None:  # the time spent so far survives a kill (it is part of the cost)
            self.echo(f"[rig] {message.strip()}")
            played = _EPISODE.match(message.strip())
            if played and played.group(1) not in ("solved", "failed"):  # an error class: the episode never ran
                errored[0] += 1
            _write(folder / "summary.json", {"complete": False, "errored": errored[0],
                                             "seconds": round(before + time.perf_counter() - t0, 1)})

        result = rig(config, echo=echo)
        usage = result.get("usage") or {}
        from envh_rigger.pool import HarnessPool

        stops = result.get("stops", {})
        _write(folder / "summary.json", {
            # a task the rig crashed on is tried again by a resumed run, as envh rig does
            "complete": "crashed" not in stops.values(), "seconds": round(before + time.perf_counter() - t0, 1),
            "rollouts": usage.get("rollouts", 0), "errored": errored[0],
            # designer LLM tokens (0 for the template designer); the policy's rollout tokens are not counted by the rig
            "tokens": int(usage.get("prompt_tokens", 0)) + int(usage.get("completion_tokens", 0)),
            "accepted": len(HarnessPool.open(folder).entries()), "tasks": n_tasks, "stops": stops})

    def _pool_specs(self) -> dict[str, Any]:
        """Training task instance id -> the newest accepted spec for it in the rig's pool,
        leaving out a harness whose start *is* a held-out task (a stage that combines two
        numbers of a training puzzle can leave exactly a held-out puzzle): that task is
        then played as it is, and the report's rig line says so."""
        from envh_rigger.pool import HarnessPool

        if "_pool" in self.__dict__:
            return dict(self._pool)
        used = self.out / "rig" / "used.json"  # the pool as the first arm trained on it, fixed for the others
        if used.exists():
            self._pool = {k: v for k, v in (_read(used) or {}).items()}
            return dict(self._pool)
        pool = HarnessPool.open(self.out / "rig")
        held = self._heldout_keys()
        out: dict[str, Any] = {}
        dropped: list[str] = []
        for entry in pool.entries():
            instance = str(entry.get("task", "")).rpartition("/")[2]
            spec = pool.load_spec(entry["spec_id"])
            ref = self._ref(instance, self.exp.train_tasks.split)
            with envh.make(spec) as env:
                obs = env.reset(task=ref, seed=0).observation
                state = getattr(env.unwrapped, "canonical_state", None)
                keys = {f"observation:{obs.text}", *([f"task:{state()}"] if state is not None else [])}
            if keys & held:
                dropped.append(f"{entry['spec_id'][:12]} (task {instance}) starts at a held-out task")
                out.pop(instance, None)
                continue
            out[instance] = spec
        self._pool = out
        _write(used, out)
        if dropped:
            self.echo("[rig] harnesses left out: " + "; ".join(dropped))
            summary = _read(self.out / "rig" / "summary.json") or {}
            _write(self.out / "rig" / "summary.json", {**summary, "dropped": dropped})
        return dict(out)

    def _heldout_keys(self) -> set[str]:
        """What identifies a held-out task's start: its canonical form and start observation."""
        with envh.make(self.exp.spec) as env:
            return {k for _, i in self.exp.heldout_ids()
                    for k in self._start_keys(env, i, self.exp.heldout.split, observation=True)}

    def sources(self, arm: Any, *, plain: bool = False) -> list[dict[str, Any]]:
        """One source per training task (weight 1 each), so every arm draws the same
        task sequence for a seed; the rigged arm plays a task in its accepted harness, or
        as it is when the rig landed none for it."""
        specs = self._pool_specs() if arm.kind == "rigged" and not plain else {}
        split = self.exp.train_tasks.split
        return [{"spec": specs.get(i, self.exp.spec), "split": split, "tasks": [i], "weight": 1.0}
                for i in self.exp.train_tasks.ids]

    def train_config(self, arm: Any, seed: int, output_dir: Path, *, plain: bool = False) -> Any:
        """The ``envh train`` config of one arm and seed (``plain``: the rigged arm's sources
        before its pool exists, for checking)."""
        from envh_grpo.config import from_data

        ids = [i for _, i in self.exp.heldout_ids()]
        merged = {**self.exp.train, **{k: ({**self.exp.train.get(k, {}), **v} if isinstance(v, dict) else v)
                                       for k, v in arm.train.items()}}  # an arm's reward terms add to the shared
        data = {**merged, "seed": seed, "output_dir": str(output_dir),
                # a checkpoint at least every other step (and at every evaluation), but none of
                # the last step (see train): a killed arm redoes at most two steps; older
                # checkpoints are pruned as new ones land
                "envs": self.sources(arm, plain=plain),
                "save_every": self.exp.eval_every if self.exp.eval_every <= 2 else 2 - self.exp.eval_every % 2,
                "eval": {"every": self.exp.eval_every, "episodes": len(ids), "temperature": 0.0,
                         "seed": self.exp.eval_seed,
                         "envs": [{"spec": self.exp.spec, "split": self.exp.heldout.split, "tasks": ids}]},
                "log": {"tensorboard": "false", "wandb": "false", "progress": False}}
        return from_data(data)

    def baseline(self) -> None:
        """The untrained policy on the held-out tasks, once: greedy decoding of the same
        weights gives every arm and seed the same step-0 episodes."""
        from envh_grpo.trainer import GRPOTrainer

        folder = self.out / "baseline"
        if (folder / "eval" / "step-0.jsonl").exists():
            return
        config = self.train_config(self.exp.arms[0], self.exp.seeds[0], folder)
        self.echo(f"[baseline] step 0: the untrained policy on {config.eval.episodes} held-out tasks")
        t0 = time.perf_counter()
        trainer = GRPOTrainer(config)
        try:
            result = trainer.evaluate()
            trainer.metrics.log({"step": 0, **result})
        finally:
            trainer.metrics.close()
            trainer.close()
        self.echo(f"[baseline] held-out success {result['eval/success']:.3f} over "
                  f"{int(result['eval/episodes'])} episodes ({time.perf_counter() - t0:.0f} s)")

    def train(self, arm: Any, seed: int) -> None:
        from envh_grpo.trainer import GRPOTrainer

        folder = self.out / "arms" / arm.name / f"seed-{seed}"
        if (folder / "done.json").exists():
            return
        config = self.train_config(arm, seed, folder)
        resume = (folder / "checkpoints" / "latest").exists()
        if not resume:  # nothing to resume: start clean (the trainer refuses --resume without a checkpoint)
            shutil.rmtree(folder, ignore_errors=True)
        chooser = self._chooser(arm, seed, folder / "curriculum.jsonl") if arm.kind == "curriculum" else None
        tag = f"[{arm.name} seed {seed}]"
        t0, before = time.perf_counter(), float((_read(folder / "elapsed.json") or {}).get("wall_s", 0.0))
        # the last step's checkpoint would be deleted with the others when the arm is done
        trainer = GRPOTrainer(config, resume=resume, chooser=chooser, save_final=self.exp.keep_checkpoints)
        try:
            if chooser is not None:
                chooser.rewind(trainer.position)
            if trainer.step_no:
                self.echo(f"{tag} resuming at step {trainer.step_no}/{config.steps}")

            def progress(record: dict[str, Any]) -> None:
                step = record["step"]
                line = (f"{tag} step {step}/{config.steps}  reward {record['reward']:+.2f}  "
                        f"success {record['success']:.2f}  mixed-verdict groups {record['groups/success_signal']:.2f}  "
                        f"{record['gen_tokens']} tok  {record['time/step_s']:.0f} s")
                rows = _eval_rows(folder, step)
                if rows is not None:
                    line += f"  held-out {sum(r['success'] for r in rows)}/{len(rows)}"
                self.echo(line)
                _prune(folder)
                _write(folder / "elapsed.json", {"wall_s": round(before + time.perf_counter() - t0, 1)})

            trainer.train(progress)
        finally:
            trainer.close()
            if chooser is not None:
                chooser.close()
        totals = _totals(folder / "metrics.jsonl")
        # done.json first: a kill after it leaves a finished arm (its checkpoints are only disk)
        _write(folder / "done.json", {"wall_s": round(before + time.perf_counter() - t0, 1), **totals})
        if not self.exp.keep_checkpoints:
            shutil.rmtree(folder / "checkpoints", ignore_errors=True)


def _result_dir(name: str) -> str:
    """Where a result named by ``run_keys`` lives in a result folder."""
    return name if name in ("baseline", "rig") else f"arms/{name}"


def _eval_rows(folder: Path, step: int) -> list[dict[str, Any]] | None:
    path = folder / "eval" / f"step-{step}.jsonl"
    if not path.exists():
        return None
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def _prune(folder: Path) -> None:
    """Drop checkpoints older than ``latest`` (a 135M model's optimizer state is ~1.6 GB)."""
    root = folder / "checkpoints"
    latest = (root / "latest").read_text().strip() if (root / "latest").exists() else None
    for child in root.glob("step-*") if root.is_dir() else ():
        if child.name != latest:
            shutil.rmtree(child, ignore_errors=True)


def _totals(path: Path) -> dict[str, Any]:
    rows: dict[int, dict[str, Any]] = {}
    for line in path.read_text().splitlines() if path.exists() else ():
        row = json.loads(line)
        if "reward" in row:
            rows[int(row["step"])] = row
    return {"steps": len(rows), "episodes": sum(int(r["episodes"]) for r in rows.values()),
            "gen_tokens": sum(int(r["gen_tokens"]) for r in rows.values()),
            "policy_tokens": sum(int(r["policy_tokens"]) for r in rows.values()),
            "train_s": round(sum(float(r["time/step_s"]) for r in rows.values()), 1)}
