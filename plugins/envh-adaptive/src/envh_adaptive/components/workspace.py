"""Workspace: a runtime harness of Belief, Progress and Experience with four meta-actions.

The layer adds ``track(query)``, ``commit(subgoal, status)``, ``recall(query)`` and
``note(text)`` to the inner env's tools. A meta-action is answered by the layer and never
reaches the benchmark, but it is a step like any other: a ``budget`` layer outside the
workspace charges it (put the budget outside to share one budget), and the state counts
each meta-action so rewards (GRPO's diversity and spam terms) and designers can read them.

- **Belief**: the bridge's tracker when it has one (``belief_edges()``: ALFWorld's
  rule-based tracker), else the observations seen; at most ``belief_capacity`` edges,
  shown only when tracked (``track(world)`` a summary, ``track(<entity>)`` one entity).
- **Progress**: at most ``progress_capacity`` sub-goals with status todo/tried/blocked/done.
- **Experience**: ``envh_adaptive.experience.Library`` at ``library`` (read-only during episodes;
  ``recall`` returns the top 3 per category); ``note`` appends to this episode's notes file
  for the next ``envh workspace consolidate``.
"""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any, Literal

import attrs
from envh import (
    Action,
    ActionableEnv,
    Answer,
    BuildContext,
    EnvHarness,
    EnvResponse,
    LayerSpec,
    Observation,
    ResetResult,
    ToolSpec,
    compile_tools,
    errors,
)

from ..experience import NOTES_PER_EPISODE, Library, write_note, write_use

META = ("track", "commit", "recall", "note")
STATUSES = ("todo", "tried", "blocked", "done")
_TEXT = {"type": "string", "maxLength": 500}
TOOLS = [
    ToolSpec(name="track", description="Read your belief store: track('world') for a summary, or an entity name.",
             parameters={"type": "object", "properties": {"query": {**_TEXT, "description": "'world' or an entity"}},
                         "required": ["query"], "additionalProperties": False}),
    ToolSpec(name="commit", description="Record a sub-goal and its status in your progress list.",
             parameters={"type": "object", "properties": {
                 "subgoal": {**_TEXT, "description": "the sub-goal"},
                 "status": {"type": "string", "enum": list(STATUSES), "description": "its status"}},
                 "required": ["subgoal", "status"], "additionalProperties": False}),
    ToolSpec(name="recall", description="Retrieve skills and lessons from earlier episodes that match a query.",
             parameters={"type": "object", "properties": {"query": {**_TEXT, "description": "what you need"}},
                         "required": ["query"], "additionalProperties": False}),
    ToolSpec(name="note", description="Write down an insight for future episodes.",
             parameters={"type": "object", "properties": {"text": {**_TEXT, "description": "the insight"}},
                         "required": ["text"], "additionalProperties": False}),
]


#: the meta-actions' argument checks: the same schema checker every bridge uses
_CHECKS = compile_tools(TOOLS)


@attrs.frozen(kw_only=True)
class WorkspaceSpec(LayerSpec):
    kind: Literal["workspace"] = "workspace"
    library: str | None = None
    progress_capacity: int = attrs.field(default=8, validator=attrs.validators.ge(1))
    belief_capacity: int = attrs.field(default=48, validator=attrs.validators.ge(1))
    recall_k: int = attrs.field(default=3, validator=attrs.validators.ge(1))


class Workspace(EnvHarness):
    """Answers the meta-actions itself; every other action goes to the inner env."""

    kind = "workspace"

    def __init__(self, inner: ActionableEnv, spec: WorkspaceSpec, *, layer_id: str | None = None) -> None:
        super().__init__(inner, layer_id=layer_id)
        clash = {t.name for t in inner.tools()} & set(META)
        if clash:
            raise errors.SpecError(f"The inner env already has tools named {sorted(clash)}; a workspace "
                                   "cannot add its meta-actions over them.")
        from envh.components.budget import Budget

        inside, below = [], [inner]
        while below:  # the inner stack, a chain's legs included
            env = below.pop()
            if isinstance(env, Budget) and env.max_steps is not None:
                inside.append(env)
            below += getattr(env, "legs", None) or ([env.inner] if isinstance(env, EnvHarness) else [])
        if inside:
            raise errors.SpecError(f"The step budget {inside[0].layer_id!r} sits inside the workspace, so the "
                                   "meta-actions would not cost steps of it: put the budget outside the workspace "
                                   "(after it in `layers`).")
        self.spec = spec
        self.library: Library | None = None
        self._start_episode()

    def _start_episode(self) -> None:
        self.progress: list[dict[str, str]] = []
        self.seen: list[str] = []
        self.counts: Counter[str] = Counter({m: 0 for m in META})
        self.episode = uuid.uuid4().hex
        if self.spec.library is not None:  # a fresh snapshot each episode: consolidation happens between
            self.library = Library(self.spec.library)

    # -- the interface ---------------------------------------------------------------
    def tools(self) -> list[ToolSpec]:
        return [*self.inner.tools(), *TOOLS]

    def on_reset(self, result: ResetResult) -> ResetResult:
        self._start_episode()
        self._remember(result.observation.text)
        return result

    def on_replay_start(self) -> None:
        self._seen_before_replay: list[str] | None = list(self.seen)

    def on_replay_complete(self) -> None:
        """A stage's replayed meta-actions set up the start state; they are not the policy's.
        The observations in between were never shown to the policy: the generic belief keeps
        the reset's and the last one (a stage shows one of the two), as ALFWorld's tracker does."""
        self.counts = Counter({m: 0 for m in META})
        before = getattr(self, "_seen_before_replay", None)
        if before is not None:
            last = [self.seen[-1]] if len(self.seen) > len(before) else []
            self.seen, self._seen_before_replay = [*before, *last][-self.spec.belief_capacity:], None

    def answer_action(self, action: Action, state: Any) -> Answer | None:
        """A meta-action is answered here (core gives its step reward 0 and steps nothing
        below); any other action goes on to the inner env."""
        if action.tool not in META:
            return None
        problem = _CHECKS[action.tool](dict(action.args), action.tool)
        if problem:
            answer, ok = f"Error: {problem}", False
        else:
            answer, ok = getattr(self, f"_{action.tool}")(**dict(action.args)), True
        if ok:
            self.counts[action.tool] += 1
        last = self._last_obs.text if self._last_obs is not None else ""
        info: dict[str, Any] = {"workspace": {"meta": action.tool, "counts": dict(self.counts)}}
        if not ok:
            info["error"] = {"type": "invalid_arguments", "message": problem}
        return Answer(observation=Observation(text=f"{answer}\n\n{last}".strip(), data={"workspace": action.tool}),
                      info=info, effect={"meta": action.tool})

    def modify_transition(self, action: Action, response: EnvResponse, state: Any) -> EnvResponse:
        """Every other action's observation joins the generic belief (the transition is
        not changed)."""
        if "error" not in response.info:
            self._remember(response.observation.text)
        return response

    def get_env_state(self) -> dict[str, Any]:
        state = dict(self.inner.get_env_state())
        state["workspace"] = {"counts": dict(self.counts), "progress": [dict(p) for p in self.progress],
                              "belief_size": len(self._belief()), "notes": self.counts["note"]}
        return state

    def env_state_schema(self) -> dict[str, Any]:
        schema = dict(self.inner.env_state_schema())
        props = dict(schema.get("properties", {}))
        props["workspace"] = {"type": "object", "description": "the workspace layer: meta-action counts this "
                              "episode (track/commit/recall/note), the progress list, belief size, notes taken"}
        schema["properties"] = props
        return schema

    def layer_state(self) -> Any:
        return {"progress": [dict(p) for p in self.progress], "seen": list(self.seen), "counts": dict(self.counts),
                "episode": self.episode}

    def load_layer_state(self, data: Any) -> None:
        if data is None:  # saved before the workspace kept its memory: it starts empty, as it did then
            return
        try:
            progress = [{"subgoal": str(p["subgoal"]), "status": str(p["status"])} for p in data["progress"]]
            counts = Counter({m: int(data["counts"][m]) for m in META})
            seen, episode = [str(t) for t in data["seen"]], str(data["episode"])
        except (KeyError, TypeError, ValueError) as exc:
            raise errors.StateError(f"Saved workspace state is damaged: {exc!r}") from None
        self.progress, self.counts = progress[-self.spec.progress_capacity:], counts
        self.seen, self.episode = seen[-self.spec.belief_capacity:], episode

    # -- the stores --------------------------------------------------------------------
    def _remember(self, text: str) -> None:
        self.seen = [*self.seen, text][-self.spec.belief_capacity:]

    def _belief(self) -> list[tuple[str, str, str]]:
        edges = getattr(self.inner.unwrapped, "belief_edges", None)
        found = edges() if callable(edges) else None
        if found is None:  # generic fallback: what was observed, newest last
            found = [("observation", str(i), text[:200]) for i, text in enumerate(self.seen)]
        return [(str(e[0]), str(e[1]), str(e[2])) for e in found][-self.spec.belief_capacity:]

    def _track(self, query: str) -> str:
        edges = self._belief()
        q = query.strip().lower()
        if q in ("world", "all", ""):
            lines = [" ".join(e) for e in edges[-12:]]
            return f"Belief ({len(edges)} facts):\n" + ("\n".join(lines) or "nothing yet")
        hits = [" ".join(e) for e in edges if q in e[0].lower() or q in e[2].lower()]
        return f"Belief about {query}:\n" + ("\n".join(hits[-12:]) or "nothing known")

    def _commit(self, subgoal: str, status: str) -> str:
        subgoal = " ".join(subgoal.split())
        for item in self.progress:
            if item["subgoal"] == subgoal:
                item["status"] = status
                break
        else:
            if len(self.progress) >= self.spec.progress_capacity:
                closed = [p for p in self.progress if p["status"] in ("done", "tried")]
                if not closed:
                    return (f"Error: progress is full ({self.spec.progress_capacity} open sub-goals); "
                            "mark one done or tried first: the oldest done or tried sub-goal makes room "
                            "(todo and blocked ones stay).")
                self.progress.remove(closed[0])
            self.progress.append({"subgoal": subgoal, "status": status})
        listing = "\n".join(f"[{p['status']}] {p['subgoal']}" for p in self.progress)
        return f"Progress:\n{listing}"

    def _recall(self, query: str) -> str:
        if self.library is None:
            return "Experience: no library is configured for this workspace."
        found = self.library.recall(query, self.spec.recall_k)
        if not found:
            return "Experience: nothing matches."
        try:
            write_use(self.library.root, self.episode, found)  # counted at consolidation (LFU)
        except errors.EnvError:
            pass  # a library shared read-only still answers recalls; its uses just go uncounted
        return "Experience:\n" + "\n".join(f"{c}: " + " | ".join(items) for c, items in found.items())

    def _note(self, text: str) -> str:
        if self.spec.library is None:
            return "Noted for this episode (no experience library is configured, so it will not be kept)."
        if self.counts["note"] >= NOTES_PER_EPISODE:  # consolidation reads no more than these from one episode
            return f"Not noted: an episode keeps at most {NOTES_PER_EPISODE} notes, and this one has them."
        task_words = sorted({w for e in self.seen[:1] for w in e.lower().split()})[:50]
        write_note(self.spec.library, self.episode, {"text": text, "task_words": task_words})
        return "Noted (it joins the experience library at the next consolidation)."


def build(spec: WorkspaceSpec, inner: ActionableEnv, ctx: BuildContext) -> Workspace:
    return Workspace(inner, spec, layer_id=spec.id or f"{ctx.index}:workspace")
