"""Records of the skills bank: memory items, where they came from, and the episode view
that inducers read.

Memory items follow ReasoningBank: a short ``title``, ``when_to_use`` (what retrieval
matches against), ``content`` (the lesson itself) and ``provenance`` (which episodes
taught it; merged items keep every source). Items are frozen; the bank replaces them.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import attrs
import cattrs
from envh import Action, ToolSpec, errors


class SkillError(errors.EnvhError):
    """A skills operation failed: a bad bank, an inducer that gave up, a bad option."""


@attrs.frozen(kw_only=True)
class Provenance:
    """One source of a memory item.

    ``source`` labels the env family (``baseline`` or ``reshaped``), ``method`` how the
    item was induced (``contrast``: shortest success vs longest failure of one task;
    ``success`` / ``failure``: a single episode), ``inducer`` who wrote it (``rule`` or
    ``llm:MODEL``); ``trajectories`` are the store ids of the episodes it came from.
    """

    source: str
    method: str
    inducer: str
    task: str
    spec_id: str | None = None
    trajectories: tuple[str, ...] = ()


@attrs.frozen(kw_only=True)
class MemoryItem:
    """A reusable lesson: the unit the bank stores, retrieves and renders."""

    title: str
    when_to_use: str
    content: str
    provenance: tuple[Provenance, ...] = ()

    @property
    def item_id(self) -> str:
        """Content hash of the text fields: stable across runs, blind to provenance."""
        text = json.dumps([self.title, self.when_to_use, self.content], ensure_ascii=False)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @property
    def support(self) -> int:
        """How many episode groups taught this item (grows when near-duplicates merge)."""
        return max(1, len(self.provenance))

    def key_text(self) -> str:
        """What retrieval matches a query against: the lesson's name and when it applies."""
        return f"{self.title}. {self.when_to_use}"

    def lesson_text(self) -> str:
        """What dedupe compares: the lesson itself (two tasks can teach the same one)."""
        return f"{self.title}. {self.content}"


@attrs.frozen(kw_only=True)
class StepView:
    """One step as an inducer needs it: the action the policy proposed and its fate.

    ``invalid`` is set when the policy output could not be parsed, ``blocked`` when a
    layer refused the action, ``error`` when the env answered with ``info["error"]``.
    """

    action: Action | None
    observation: str = ""
    invalid: str | None = None
    blocked: str | None = None
    error: str | None = None

    @property
    def rejected(self) -> str | None:
        """Why this step did not do what the policy meant, or ``None``."""
        return self.invalid or self.blocked or self.error


@attrs.frozen(kw_only=True)
class EpisodeView:
    """A finished episode reduced to what induction reads (store-format independent)."""

    trajectory_id: str
    task: str
    success: bool
    goal: str
    steps: tuple[StepView, ...] = ()
    spec_id: str | None = None
    policy_id: str | None = None
    source: str = "baseline"
    tools: tuple[ToolSpec, ...] = ()


def _make_converter() -> cattrs.Converter:
    # The bank is user data read back from disk: unknown keys fail loudly with a path.
    conv = cattrs.Converter(forbid_extra_keys=True, detailed_validation=True)
    conv.register_unstructure_hook(tuple, lambda t: [conv.unstructure(x) for x in t])
    return conv


converter = _make_converter()


def item_to_data(item: MemoryItem) -> dict[str, Any]:
    """A memory item as plain JSON data (one JSONL line of the bank)."""
    data: dict[str, Any] = converter.unstructure(item)
    return data


def item_from_data(data: Any, where: str = "$") -> MemoryItem:
    """Parse one bank line; errors name the line and the bad field."""
    try:
        return converter.structure(data, MemoryItem)
    except Exception as exc:  # noqa: BLE001 - cattrs raises several kinds; report them as one
        problems = (cattrs.transform_error(exc, path=where)
                    if isinstance(exc, cattrs.BaseValidationError) else [repr(exc)])
        raise SkillError("Invalid memory item: " + "; ".join(problems)) from exc
