"""Reading episodes out of a run directory of the trajectory store, as ``EpisodeView``.

Only final trajectories count, and only those whose outcome is the policy's doing:
episodes that ended in an infrastructure or env error teach nothing about the policy.
The ``source`` label (``baseline`` / ``reshaped``) is what lets a user compare banks
built from the static env with banks built from reshaped ones.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator
from pathlib import Path
from typing import Any

from envh import Action, ToolSpec

from .records import EpisodeView, SkillError, StepView

SKIPPED_ERRORS = frozenset({"infra_error", "env_error"})
MAX_OBSERVATION = 600


def _trim(text: str, limit: int = MAX_OBSERVATION) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _error_text(error: Any) -> str | None:
    if not error:
        return None
    if isinstance(error, dict):
        return str(error.get("message") or error.get("error") or error.get("reason") or error)
    return str(error)


def _tool(data: Any) -> ToolSpec | None:
    if isinstance(data, ToolSpec):
        return data
    if isinstance(data, dict) and isinstance(data.get("name"), str):
        params = data.get("parameters")
        return ToolSpec(name=data["name"], description=str(data.get("description", "")),
                        **({"parameters": params} if isinstance(params, dict) else {}))
    return None


def view_of(trajectory: Any, source: str = "baseline") -> EpisodeView:
    """A store ``Trajectory`` as the view inducers read."""
    steps = []
    for s in trajectory.steps:
        action: Action | None = s.proposed
        steps.append(StepView(action=action, observation=_trim(s.observation.text),
                              invalid=s.invalid, blocked=s.blocked, error=_error_text(s.error)))
    first = trajectory.initial_observation
    task = trajectory.task
    run = getattr(trajectory, "run_id", "") or ""
    return EpisodeView(
        trajectory_id=f"{run}/{trajectory.key}" if run else str(trajectory.key),
        task=str(task) if task is not None else trajectory.spec_id,
        success=bool(trajectory.success), goal=_trim(first.text if first is not None else "", 1500),
        steps=tuple(steps), spec_id=trajectory.spec_id, policy_id=trajectory.policy_id or None,
        source=source, tools=tuple(t for t in map(_tool, trajectory.tools) if t is not None))


def _open_store(run_dir: str | Path) -> Any:
    from envh.rollout import TrajectoryStore

    FILENAME = "trajectories.sqlite"  # the store file an envh run/rig directory holds

    path = Path(run_dir)
    if not (path / FILENAME).is_file() and not path.is_file():
        raise SkillError(f"No trajectory store in {path} (expected {path / FILENAME}); "
                         "point at the --out directory of `envh run` or `envh rig`")
    return TrajectoryStore(path)


def read_episodes(run_dir: str | Path, *, source: str = "baseline",
                  spec_ids: Collection[str] | None = None, run_id: str | None = None,
                  policy: str | None = None) -> Iterator[EpisodeView]:
    """Final, policy-attributable episodes of ``run_dir`` (oldest first).

    ``spec_ids`` keeps only episodes played on those env specs (e.g. the accepted
    harnesses of a rigger run); ``None`` keeps all.
    """
    store = _open_store(run_dir)
    try:
        for traj in store.query(run_id=run_id, policy=policy, kind="episode"):
            if traj.error_class in SKIPPED_ERRORS or traj.verdict is None and not traj.steps:
                continue
            if spec_ids is not None and traj.spec_id not in spec_ids:
                continue
            yield view_of(traj, source)
    finally:
        store.close()


def spec_ids_in(run_dir: str | Path) -> list[str]:
    """Distinct spec ids with final episodes in ``run_dir``, in first-seen order."""
    store = _open_store(run_dir)
    try:
        return list(dict.fromkeys(r["spec_id"] for r in store.rows(kind="episode")))
    finally:
        store.close()


def relabel(episodes: Iterable[EpisodeView], source: str) -> list[EpisodeView]:
    """The same episodes under another source label."""
    import attrs

    return [attrs.evolve(e, source=source) for e in episodes]
