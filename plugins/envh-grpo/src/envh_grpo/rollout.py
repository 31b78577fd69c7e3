"""Multi-turn rollouts in lock step: every live episode's next turn goes to the engine in
one batch, each reply is parsed into an action and stepped in its own env stack.

The verdict comes from the innermost bridge (``envh.iter_layers``), or from a layer that
composes base verdicts (a chain): never from what a component reports. Bad model output
is data: a reply that does not parse is an invalid turn, and the reason is shown to the
model with the next observation. An env that breaks ends its episode (``stop="env_error"``)
without stopping the batch.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Any

import attrs
import envh
from envh.rollout.policies import calls

from .generation import Engine, SamplingConfig
from .rewards import EpisodeFacts
from .sequences import ChatSegments, Conversation, Turn

_ACTION = re.compile(r"<action>(.*?)(?:</action>|$)", re.S)
PREFILL = "<action>"
INTRO = ("You are an agent acting in an environment. Each turn you see an observation and answer "
         "with exactly one action.")


@attrs.frozen(kw_only=True)
class Job:
    """One episode to play: an env stack, its task, the reset seed and its group."""

    env: Any
    task: Any
    seed: int
    group: int
    spec: str = ""


@attrs.frozen(kw_only=True)
class Episode:
    """A finished episode: its turns (token-faithful) and what the reward reads."""

    group: int
    spec: str
    task: str
    turns: tuple[Turn, ...]
    facts: EpisodeFacts
    success: bool
    score: float
    stop: str
    invalid_turns: tuple[bool, ...] = ()
    texts: tuple[str, ...] = ()
    lost: bool = False  # the executor lost it (see ``remote.lost``): not the policy's doing


def played(episodes: Sequence[Episode]) -> tuple[list[Episode], int]:
    """The episodes of every group none of whose episodes was lost, and how many were left
    out. A lost episode's reward says nothing about the policy, and advantages are relative
    to the group, so its whole group is left out of the step."""
    gone = {ep.group for ep in episodes if ep.lost}
    kept = [ep for ep in episodes if ep.group not in gone]
    return kept, len(episodes) - len(kept)


def verdict(env: Any) -> Any:
    """The sealed verdict: a chain's combination of base verdicts, else the innermost bridge's."""
    layers = envh.iter_layers(env)
    for layer in layers[:-1]:  # outermost first; only verdict composers (chain) define evaluate
        if "evaluate" in type(layer).__dict__:
            return layer.evaluate()
    return layers[-1].evaluate()


def derive_seed(*parts: object) -> int:
    """A stable 31-bit seed from anything printable (same on every rank and every run)."""
    return int.from_bytes(hashlib.sha256("|".join(map(str, parts)).encode()).digest()[:4], "big") >> 1


def sample_seed(seed: int, episode: int, turn: int) -> int:
    """The sampling seed of ``episode``'s turn ``turn`` in a rollout seeded ``seed``."""
    return derive_seed(seed, "episode", episode, turn)


def parse_reply(text: str, tools: list[Any]) -> tuple[Any, str | None]:
    """(action, None) or (None, reason) for a reply that starts after the ``<action>`` prefill."""
    found = _ACTION.findall(PREFILL + text)
    body = found[-1].strip() if found else ""
    if not body:
        return None, "the <action> block is empty"
    try:
        return calls.parse_call(body.splitlines()[0][:2000], tools), None
    except calls.ParseError as exc:
        return None, str(exc)
    except Exception as exc:  # noqa: BLE001 - any reply is data: a parser failure makes it invalid
        return None, f"the action could not be parsed ({type(exc).__name__})"


def _signature(tool: Any) -> str:
    props = (tool.parameters or {}).get("properties") or {}
    args = [f"{name}: {'|'.join(map(str, spec['enum'])) if spec.get('enum') else spec.get('type', 'any')}"
            for name, spec in props.items()]
    return f"{tool.name}({', '.join(args)})"


def system_prompt(tools: Sequence[Any]) -> str:
    """The text-format instructions: one line per tool and the ``<action>`` reply shape."""
    lines = [INTRO, "Tools:", *(f"- {_signature(t)}" for t in tools),
             "Reply with only <action>CALL</action>, for example <action>" +
             (f"{tools[0].name}(...)" if tools else "tool()") + "</action>."]
    return "\n".join(lines)


def observation_text(observation: Any, limit: int = 50) -> str:
    """The observation, with the admissible commands when the env lists them."""
    text = str(observation.text)
    admissible = observation.data.get("admissible_commands")
    if isinstance(admissible, (list, tuple)) and admissible:
        text += "\nAdmissible commands: " + ", ".join(map(str, admissible[:limit])) + \
            (", ..." if len(admissible) > limit else "")
    return text


class _Live:
    def __init__(self, job: Job, segments: ChatSegments, history: int | None) -> None:
        self.job = job
        reset = job.env.reset(task=job.task, seed=job.seed)
        self.obs = reset.observation
        self.tools = job.env.tools()
        self.conv = Conversation(segments, segments.head(system_prompt(self.tools), observation_text(self.obs)),
                                 history)
        self.turns: list[Turn] = []
        self.actions: list[str] = []
        self.invalid: list[bool] = []
        self.texts: list[str] = []
        self.meta: list[str] = []
        self.done, self.stop = False, "max_turns"


def play(jobs: Sequence[Job], engine: Engine, segments: ChatSegments, sampling: SamplingConfig, *,
         max_turns: int, max_context: int, history: int | None = None, seed: int = 0) -> list[Episode]:
    """Play every job to the end (or ``max_turns``) and return the episodes in job order.

    The j-th job's turn t samples with ``sample_seed(seed, j, t)``: its tokens do not depend
    on the other episodes of the batch (see ``remote`` for the same rollouts in workers)."""
    live = [_Live(job, segments, history) for job in jobs]
    index = {id(ep): j for j, ep in enumerate(live)}
    for turn in range(max_turns):
        active = [ep for ep in live if not ep.done]
        if not active:
            break
        prompts_now = []
        for ep in list(active):
            prompt = ep.conv.prompt()
            if len(prompt) + sampling.max_new_tokens > max_context:
                ep.done, ep.stop = True, "context"
                active.remove(ep)
            else:
                prompts_now.append(prompt)
        gens = engine.generate(prompts_now, sampling, [sample_seed(seed, index[id(ep)], turn) for ep in active])
        for ep, prompt, gen in zip(active, prompts_now, gens, strict=True):
            ep.turns.append(Turn(prompt_ids=tuple(prompt), completion_ids=gen.ids, logprobs=gen.logprobs,
                                 finish=gen.finish))
            text = segments.tok.decode(list(gen.ids), skip_special_tokens=True)
            ep.texts.append(text)
            action, problem = parse_reply(text, ep.tools)
            ep.meta.append("")
            if action is None:
                ep.invalid.append(True)
                message = f"Your last reply was not a valid action: {problem}\n\n" + \
                    observation_text(ep.obs)
            else:
                ep.actions.append(f"{action.tool}({sorted(action.args.items())})")
                try:
                    resp = ep.job.env.step(action)
                except Exception as exc:  # noqa: BLE001 - a broken env ends its episode, not the batch
                    ep.invalid.append(False)
                    ep.done, ep.stop = True, f"env_error: {exc}"
                    continue
                ep.invalid.append(bool(resp.info.get("error")))
                ep.meta[-1] = meta_action(resp.info)
                ep.obs = resp.observation
                ep.tools = ep.job.env.tools() if not (resp.terminated or resp.truncated) else ep.tools
                if resp.terminated or resp.truncated:
                    ep.done, ep.stop = True, "terminated" if resp.terminated else "truncated"
                    continue
                message = observation_text(ep.obs)
            ep.conv.add(gen.ids, segments.user(message))
    return [_finish(ep) for ep in live]


def meta_action(info: Any) -> str:
    """The workspace meta-action a step took ("" for none, or one it refused)."""
    if not isinstance(info, dict) or info.get("error"):
        return ""
    for effect in info.get("envh") or ():
        # "answered" (core's word for a layer's own answer); "meta" in records written before it
        if isinstance(effect, dict) and effect.get("kind") == "workspace" and effect.get("action") in ("answered",
                                                                                                   "meta"):
            return str(effect.get("meta", ""))
    return ""


def workspace_counts(env: Any) -> dict[str, int] | None:
    """The meta-action counts from the stack's workspace layer state; ``None`` without one."""
    for layer in envh.iter_layers(env):
        if getattr(layer, "kind", None) == "workspace":
            try:
                counts = layer.get_env_state()["workspace"]["counts"]
                return {str(k): int(v) for k, v in dict(counts).items()}
            except Exception:  # noqa: BLE001 - an unreadable state counts as no meta-actions
                return {}
    return None


def _finish(ep: _Live) -> Episode:
    try:
        result = verdict(ep.job.env)
        success, score = bool(result.success), float(result.score)
    except Exception:  # noqa: BLE001 - an env whose verifier breaks scores as a failure
        success, score = False, 0.0
    facts = EpisodeFacts(solved=success, turns=len(ep.turns), actions=tuple(ep.actions),
                         replies=tuple(t.completion_ids for t in ep.turns), invalid=sum(ep.invalid),
                         meta=workspace_counts(ep.job.env), meta_turns=tuple(ep.meta))
    return Episode(group=ep.job.group, spec=ep.job.spec, task=str(ep.job.task), turns=tuple(ep.turns),
                   facts=facts, success=success, score=score, stop=ep.stop, invalid_turns=tuple(ep.invalid),
                   texts=tuple(ep.texts))
