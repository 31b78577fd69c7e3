"""A generic pressure template with a continuous knob: observation masking at a rate.

``mask`` (pressure, any bridge): a contract that replaces each word of every observation
the policy sees (and each leaf value of its ``data``) by ``?`` with probability ``m``.
The draws are seeded per episode from (task, episode seed, observation number, position),
so K rollouts of one candidate see K different masks and an episode replays exactly. At
``m = 0`` nothing changes; at ``m = 1`` the policy sees only ``?``. Masking touches what
the policy sees, never the transitions or the verdict, so the bridge's reference solution
still wins under every rate (the cascade checks it). The designer searches ``m`` on the
measured response, like ``guide``'s rate.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping
from typing import Any

from envh import ActionableEnv, EnvHarness, Observation, ResetResult, TaskRef

MASK = "?"
_WORD = re.compile(r"\w+")


def _draw(salt: str, rate: float) -> random.Random:
    return random.Random(f"{salt}|{rate!r}")


def mask_text(text: str, rate: float, rng: random.Random) -> str:
    """Each word (``\\w+``) becomes ``?`` with probability ``rate``; punctuation and layout stay."""
    return _WORD.sub(lambda m: MASK if rng.random() < rate else m.group(0), text)


def mask_data(value: Any, rate: float, rng: random.Random) -> Any:
    """Each leaf (string, number, boolean) becomes ``?`` with probability ``rate``."""
    if isinstance(value, Mapping):
        return {k: mask_data(v, rate, rng) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [mask_data(v, rate, rng) for v in value]
    if value is None:
        return None
    return MASK if rng.random() < rate else value


class ObservationMask(EnvHarness):
    """Contract class (``cls: envh_rigger.masking:ObservationMask``, ``config: {rate}``)."""

    kind = "contract"
    spec_safe = True  # its options (a rate and a salt) are checked as untrusted data

    def __init__(self, inner: ActionableEnv, *, layer_id: str | None = None, rate: float = 0.0,
                 salt: str = "mask") -> None:
        super().__init__(inner, layer_id=layer_id)
        rate = float(rate)
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"mask rate must be in [0, 1], got {rate}")
        self.rate, self.salt = rate, str(salt)
        self._episode, self._seen = "", 0

    def reset(self, *, task: TaskRef | None = None, seed: int | None = None,
              options: Mapping[str, Any] | None = None) -> ResetResult:
        self._episode, self._seen = f"{self.salt}|{task}|{seed}", 0
        return super().reset(task=task, seed=seed, options=options)

    def filter_observation(self, observation: Observation, state: Mapping[str, Any]) -> Observation:
        if self.rate <= 0.0:
            return observation
        rng = _draw(f"{self._episode}|{self._seen}", self.rate)
        self._seen += 1
        return Observation(text=mask_text(observation.text, self.rate, rng),
                           data=mask_data(dict(observation.data), self.rate, rng))

    def layer_state(self) -> Any:
        return {"episode": self._episode, "seen": self._seen}

    def load_layer_state(self, data: Any) -> None:
        if isinstance(data, Mapping):
            self._episode, self._seen = str(data.get("episode", "")), int(data.get("seen", 0))


class Mask:
    """Template: mask a fraction ``m`` of every observation's words and data fields."""

    name = "mask"
    direction = "pressure"
    axis = "O"
    continuous = True

    def magnitudes(self, env: ActionableEnv, task: TaskRef) -> list[float]:
        return [0.25, 0.5, 0.75]

    def instantiate(self, env: ActionableEnv, task: TaskRef, magnitude: Any) -> list[dict[str, Any]]:
        rate = min(1.0, max(0.0, float(magnitude)))
        return [{"kind": "contract", "id": f"mask-{rate:.3f}", "cls": "envh_rigger.masking:ObservationMask",
                 "config": {"rate": rate}}]
