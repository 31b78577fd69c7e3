"""Small experiment files for the tests: real GRPO steps on the embedded SmolLM2-135M (or a
model folder the test names)."""

from __future__ import annotations

from typing import Any


def tiny(arms: list[dict[str, Any]] | None = None, model: str | None = None, **over: Any) -> dict[str, Any]:
    """A 2-step, 2-episode-per-step experiment over 2 training and 4 held-out Toy24 tasks
    (``model``: a model folder instead of the embedded SmolLM2-135M)."""
    data: dict[str, Any] = {
        "name": "tiny", "spec": "toy24",
        "train_tasks": {"split": "generated", "ids": ["2,6,9,9", "1,4,8,10"]},
        "heldout": {"split": "generated", "classes": {"size3": ["3,6,7", "1,2,11"], "size4": ["1,2,4,7", "2,2,4,7"]}},
        "seeds": [0], "eval_every": 1,
        "train": {"steps": 2, "group_size": 2, "groups_per_step": 1, "max_turns": 2, "max_response_tokens": 6,
                  "history": 1, "optim": {"lr": 1e-5}, **({"model": model} if model else {})},
        "arms": arms if arms is not None else [
            {"name": "static", "kind": "static"},
            {"name": "rigged", "kind": "rigged",
             "rig": {"policy": "random", "k": 2, "rounds": 1, "max_steps": 4, "target": "sr:0.3-0.7"}},
            {"name": "curriculum", "kind": "curriculum",
             "curriculum": {"params": {"size": {"range": [3, 4], "init": 3, "step": 1}},
                            "policy": {"type": "threshold", "window": 2, "floor": 0.2, "ceiling": 0.5}}}],
        "compare": [["rigged", "static"]] if arms is None else [],
    }
    data.update(over)
    return data
