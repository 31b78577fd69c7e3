"""A rule-based belief tracker: what the agent has seen, parsed from ALFWorld's game text.

No language model: ALFWorld's feedback comes from a fixed grammar (``alfred.twl2``), so a
handful of patterns recover the agent's location, what it holds, the receptacles it knows
of, their open/closed state and the contents it last observed, and object states it caused
(heated, cooled, cleaned, lamps switched on). This is what components and designers read
through ``get_env_state()``; it is belief, not ground truth (contents seen earlier may be
stale only if the agent itself changed them elsewhere, which the tracker follows).
"""

from __future__ import annotations

import copy
import re
from typing import Any

_LIST_SPLIT = re.compile(r", and |, | and ")
_RECEP_STATE = re.compile(
    r"The (?P<r>[a-z]+ \d+) is open\. In it, you see (?P<items>[^.]*)\."
    r"|The (?P<rc>[a-z]+ \d+) is closed\."
    r"|On the (?P<ro>[a-z]+ \d+), you see (?P<itemso>[^.]*)\.")
_ARRIVE = re.compile(r"^You arrive at (?P<r>[a-z]+ \d+)\.")
_FACING = re.compile(r"^You are facing the (?P<r>[a-z]+ \d+)\.")
_OPEN = re.compile(r"^You open the (?P<r>[a-z]+ \d+)\.")
_CLOSE = re.compile(r"^You close the (?P<r>[a-z]+ \d+)\.")
_PICK = re.compile(r"^You pick up the (?P<o>[a-z]+ \d+) from the (?P<r>[a-z]+ \d+)\.")
_MOVE = re.compile(r"^You move the (?P<o>[a-z]+ \d+) to the (?P<r>[a-z]+ \d+)\.")
_CHANGE = re.compile(r"^You (?P<verb>heat|cool|clean) the (?P<o>[a-z]+ \d+) using the (?P<r>[a-z]+ \d+)\.")
_TOGGLE = re.compile(r"^You turn (?P<onoff>on|off) the (?P<o>[a-z]+ \d+)\.")
_CARRY = re.compile(r"^You are carrying: (?P<items>[^.]*)\.")
_ROOM = re.compile(r"Looking quickly around you, you see (?P<items>[^.]*)\.")
_TASK = re.compile(r"Your task is to: (?P<goal>.*?)\.?\s*$", re.S)
_STATE_WORD = {"heat": "hot", "cool": "cool", "clean": "clean"}


def parse_list(text: str) -> list[str]:
    """``"a mug 1, a pen 2, and a book 1"`` -> ``["mug 1", "pen 2", "book 1"]``."""
    text = text.strip()
    if not text or text == "nothing":
        return []
    out = []
    for part in _LIST_SPLIT.split(text):
        part = re.sub(r"\s*\(it is (open|closed)\)$", "", part.strip())
        part = re.sub(r"^(a|an|the|some) ", "", part)
        if part:
            out.append(part)
    return out


def parse_goal(intro: str) -> str:
    """The goal sentence from the game's intro text ("put some mug on desk")."""
    m = _TASK.search(intro)
    return m.group("goal").strip() if m else ""


class BeliefTracker:
    """Folds each game text into a belief; ``snapshot()`` returns plain JSON data."""

    def __init__(self) -> None:
        self.reset("")

    def reset(self, intro: str) -> None:
        self.location: str | None = None
        self.holding: str | None = None
        self.receptacles: dict[str, dict[str, Any]] = {}
        self.object_states: dict[str, list[str]] = {}
        self.room: list[str] = []
        m = _ROOM.search(intro)
        if m:
            self.room = parse_list(m.group("items"))
            for name in self.room:
                self._recep(name)

    def _recep(self, name: str) -> dict[str, Any]:
        return self.receptacles.setdefault(
            name, {"visited": False, "open": None, "contents": None})

    def update(self, command: str, feedback: str) -> None:
        """Apply the effect of ``command`` whose game answer was ``feedback``."""
        text = feedback.strip()
        if (m := _ARRIVE.match(text)) or (m := _FACING.match(text)):
            self.location = m.group("r")
            self._recep(self.location)["visited"] = True
        if m := _OPEN.match(text):
            self._recep(m.group("r"))["open"] = True
        if m := _CLOSE.match(text):
            self._recep(m.group("r"))["open"] = False
        for m in _RECEP_STATE.finditer(text):
            if m.group("r"):
                rec = self._recep(m.group("r"))
                rec.update(open=True, contents=parse_list(m.group("items")))
            elif m.group("rc"):
                self._recep(m.group("rc"))["open"] = False
            else:
                self._recep(m.group("ro"))["contents"] = parse_list(m.group("itemso"))
        if m := _PICK.match(text):
            self.holding = m.group("o")
            contents = self._recep(m.group("r"))["contents"]
            if contents and m.group("o") in contents:
                contents.remove(m.group("o"))
        if m := _MOVE.match(text):
            self.holding = None
            rec = self._recep(m.group("r"))
            rec["contents"] = [*(rec["contents"] or []), m.group("o")]
        if m := _CHANGE.match(text):
            self._mark(m.group("o"), _STATE_WORD[m.group("verb")])
        if m := _TOGGLE.match(text):
            self._mark(m.group("o"), "on" if m.group("onoff") == "on" else "off")
        if m := _CARRY.match(text):
            items = parse_list(m.group("items"))
            self.holding = items[0] if items else None
        elif text.startswith("You are not carrying anything"):
            self.holding = None

    def _mark(self, obj: str, word: str) -> None:
        states = self.object_states.setdefault(obj, [])
        opposite = {"hot": "cool", "cool": "hot", "on": "off", "off": "on"}.get(word)
        if opposite in states:
            states.remove(opposite)
        if word not in states:
            states.append(word)

    def state(self) -> dict[str, Any]:
        """Everything the tracker holds, for ``restore``."""
        return copy.deepcopy({"location": self.location, "holding": self.holding,
                              "receptacles": self.receptacles, "object_states": self.object_states,
                              "room": self.room})

    def restore(self, saved: dict[str, Any]) -> None:
        saved = copy.deepcopy(saved)
        self.location, self.holding, self.room = saved["location"], saved["holding"], saved["room"]
        self.receptacles, self.object_states = saved["receptacles"], saved["object_states"]

    def snapshot(self) -> dict[str, Any]:
        """The belief as fresh JSON data (safe to hand to untrusted component code)."""
        return {
            "location": self.location,
            "holding": self.holding,
            "receptacles": copy.deepcopy(self.receptacles),
            "object_states": copy.deepcopy(self.object_states),
        }
