"""The Experience library of the ``workspace`` kind: cross-episode skills on disk.

Four categories (general skills, task-specific skills, common mistakes, object-location
priors), at most ``capacity`` entries each (80), evicted least-frequently-used: a new entry
starts at count 1 and every episode that retrieves it adds one (however often it recalls it).
Episodes never write the library: the
``note`` meta-action buffers an insight into the episode's own notes file
(``notes/<episode>.jsonl``), so any number of workers can share one library while it is
frozen; ``consolidate`` then decides per note ADD / UPDATE / REMOVE / SKIP (preferring
UPDATE when a note overlaps an entry), writes the next version atomically and files the
notes it used. What one episode can do to the library is bounded: at most
``NOTES_PER_EPISODE`` (5) of its notes are read, a note never removes an entry (REMOVE is
refused, and an UPDATE must keep half of the entry's words), so an entry leaves only by
LFU eviction, and its retrievals count once per entry. The rule-based consolidator needs nothing; ``LLMConsolidator`` asks any
OpenAI-compatible endpoint.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from envh import errors

CATEGORIES = ("general", "task", "mistakes", "locations")
CAPACITY = 80
MAX_TEXT = 1000  # characters of one entry (a note is at most 500): a consolidator cannot flood the library
NOTES_PER_EPISODE = 5  # notes read from one episode's file; the rest are dropped at consolidation
KEEP_ON_UPDATE = 0.5  # word overlap an UPDATE must keep with the entry it rewrites
_WORD = re.compile(r"[a-z0-9]+")
_MISTAKE = re.compile(r"\b(don'?t|do not|avoid|never|mistake|failed|wrong|instead of)\b")
_LOCATION = re.compile(r"\b(is|are|usually|often|found|kept)\b.*\b(in|on|at|inside|under)\b")


def words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def overlap(a: str, b: str) -> float:
    """Jaccard overlap of the two texts' words."""
    wa, wb = words(a), words(b)
    return len(wa & wb) / len(wa | wb) if wa and wb else 0.0


def categorize(text: str, task_words: Iterable[str] = ()) -> str:
    lowered = text.lower()
    if _MISTAKE.search(lowered):
        return "mistakes"
    if _LOCATION.search(lowered):
        return "locations"
    if words(text) & set(task_words):
        return "task"
    return "general"


class Library:
    """A versioned Experience library in a directory (``library.json`` + ``notes/``)."""

    def __init__(self, root: str | Path, *, capacity: int = CAPACITY) -> None:
        self.root = Path(root)
        self.capacity = capacity
        self.version = 0
        self.entries: dict[str, list[dict[str, Any]]] = {c: [] for c in CATEGORIES}
        self._recalled: set[int] = set()  # entries already counted by this snapshot's recalls
        path = self.root / "library.json"
        if path.exists():
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
                self.version = int(data["version"])
                for c in CATEGORIES:
                    self.entries[c] = [dict(e) for e in data["entries"].get(c, [])]
                    for e in self.entries[c]:  # a hand-edited entry fails here, not mid-episode in recall
                        if not isinstance(e.get("text"), str) or type(e.get("count")) is not int:
                            raise ValueError(f"entry {e!r} needs a text string and an integer count")
                        e.setdefault("added", 0.0)
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                raise errors.StateError(f"{path} is not an Experience library: {exc}") from exc

    # -- reading (what episodes do) -----------------------------------------------------
    def recall(self, query: str, k: int = 3, *, count: bool = True) -> dict[str, list[str]]:
        """Top ``k`` entries per category by keyword overlap with ``query``; each returned
        entry's use count goes up once per snapshot (an episode's), however often it is
        recalled (in memory: the frozen library on disk is untouched)."""
        out: dict[str, list[str]] = {}
        q = words(query)
        for c in CATEGORIES:
            scored = [(len(q & words(e["text"])), e["count"], i, e) for i, e in enumerate(self.entries[c])]
            best = [s for s in sorted(scored, key=lambda s: (-s[0], -s[1], s[2])) if s[0] > 0][:k]
            for *_, entry in best:
                if count and id(entry) not in self._recalled:
                    self._recalled.add(id(entry))
                    entry["count"] += 1
            if best:
                out[c] = [s[3]["text"] for s in best]
        return out

    # -- writing (between rollouts) -----------------------------------------------------
    def apply(self, decision: dict[str, Any]) -> None:
        op, category = decision.get("op"), decision.get("category", "general")
        if category not in CATEGORIES:
            raise errors.StateError(f"Unknown Experience category {category!r}. Choose one of: {', '.join(CATEGORIES)}")
        _check(self, {**decision, "category": category})
        items = self.entries[category]
        if op == "ADD":
            if len(items) >= self.capacity:  # LFU: the least used (oldest on ties) makes room
                items.remove(min(items, key=lambda e: (e["count"], e["added"])))
            items.append({"text": decision["text"], "count": 1, "added": time.time()})
        elif op == "UPDATE":
            items[decision["index"]]["text"] = decision["text"]
        elif op == "REMOVE":
            del items[decision["index"]]
        elif op != "SKIP":
            raise errors.StateError(f"Unknown consolidation op {op!r}")

    def save(self) -> None:
        """Write the next version atomically (a reader sees the old or the new file). The
        version it replaces is kept as ``versions/v<N>.json``, so a bad consolidation (a
        hostile note steering the LLM to remove entries) can be rolled back."""
        self.root.mkdir(parents=True, exist_ok=True)
        current, kept = self.root / "library.json", self.root / "versions" / f"v{self.version}.json"
        if current.exists() and not kept.exists():
            kept.parent.mkdir(exist_ok=True)
            try:
                os.link(current, kept)  # the old file stays whole under its new name
            except OSError:
                shutil.copyfile(current, kept)
        self.version += 1
        data = {"version": self.version, "entries": self.entries}
        fd, tmp = tempfile.mkstemp(dir=self.root, prefix=".library-")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.root / "library.json")

    def note_files(self) -> list[Path]:
        return sorted((self.root / "notes").glob("*.jsonl"))

    def pending_notes(self, files: list[Path] | None = None) -> list[tuple[Path, dict[str, Any]]]:
        """The notes to consolidate: the first ``NOTES_PER_EPISODE`` of each episode's file."""
        out = []
        for path in self.note_files() if files is None else files:
            kept = 0
            for line in path.read_text(encoding="utf-8").splitlines():
                try:
                    note = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a line torn by a killed worker
                if isinstance(note, dict) and "used" not in note and isinstance(note.get("text", ""), str):
                    if kept == NOTES_PER_EPISODE:
                        break  # one episode cannot flood the library (or evict it wholesale)
                    out.append((path, note))
                    kept += 1
        return out

    def count_uses(self, files: list[Path] | None = None) -> int:
        """Fold the retrievals episodes recorded (``write_use``) into the entries' counts,
        so LFU eviction sees what episodes used, not only what this process retrieved.
        An entry counts once per episode (file), however often that episode recalled it.
        An entry changed or removed since is not matched. Returns the uses counted."""
        counted = 0
        for path in self.note_files() if files is None else files:
            seen: set[int] = set()
            for line in path.read_text(encoding="utf-8").splitlines():
                try:
                    used = json.loads(line).get("used")
                except (json.JSONDecodeError, AttributeError):
                    continue
                for category, texts in used.items() if isinstance(used, dict) else ():
                    for entry in self.entries.get(category, []) if isinstance(texts, list) else ():
                        if entry["text"] in texts and id(entry) not in seen:
                            seen.add(id(entry))
                            entry["count"] += 1
                            counted += 1
        return counted


def write_note(root: str | Path, episode: str, note: dict[str, Any]) -> None:
    """Append one note to the episode's own file (no other writer touches it)."""
    folder = Path(root) / "notes"
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", episode)[:120]
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with open(folder / f"{safe}.jsonl", "a", encoding="utf-8") as f:
            f.write(json.dumps(note) + "\n")
    except OSError as exc:  # a full disk, a library path that is not a directory, no permission
        raise errors.EnvError(f"Cannot write to the Experience library's notes in {folder}: {exc}") from exc


def write_use(root: str | Path, episode: str, found: dict[str, list[str]]) -> None:
    """Record what a ``recall`` returned (category → entry texts), for ``count_uses``."""
    write_note(root, episode, {"used": found})


Consolidator = Callable[[Library, dict[str, Any]], dict[str, Any]]


def rule_consolidator(library: Library, note: dict[str, Any]) -> dict[str, Any]:
    """ADD / UPDATE / SKIP by rules: too short → SKIP; ``forget: TEXT`` → SKIP (a note
    never removes an entry); overlap ≥ 0.5 with an entry → UPDATE it (the longer text
    wins); else ADD to the category its words suggest."""
    text = " ".join(str(note.get("text", "")).split())
    if len(words(text)) < 3:
        return {"op": "SKIP", "reason": "too short to be a skill"}
    if len(text) > MAX_TEXT:
        return {"op": "SKIP", "reason": f"longer than {MAX_TEXT} characters"}
    category = categorize(text, note.get("task_words", ()))
    if text.lower().startswith("forget:"):
        return {"op": "SKIP", "reason": NO_REMOVE}
    best = _best(library, text)
    if best is not None and best[2] >= 0.5:
        current = library.entries[best[0]][best[1]]["text"]
        if len(text) <= len(current):
            return {"op": "SKIP", "reason": f"already known (overlap {best[2]:.2f})"}
        return {"op": "UPDATE", "category": best[0], "index": best[1], "text": text,
                "reason": f"refines an entry (overlap {best[2]:.2f})"}
    return {"op": "ADD", "category": category, "text": text, "reason": "new"}


NO_REMOVE = "a note cannot remove an entry (the least used entry is evicted when a category is full)"


def note_guard(library: Library, decision: dict[str, Any]) -> dict[str, Any]:
    """What a note may do, whoever decided it (rules or a model a hostile note can steer):
    never REMOVE, and UPDATE only an entry whose words the new text keeps (overlap ≥
    ``KEEP_ON_UPDATE``), so no note deletes an entry by rewriting it."""
    op = decision.get("op")
    if op == "REMOVE":
        return {"op": "SKIP", "reason": NO_REMOVE}
    if op == "UPDATE":
        _check(library, decision)  # a malformed decision fails here, before its index is read
        kept = overlap(decision["text"], library.entries[decision["category"]][decision["index"]]["text"])
        if kept < KEEP_ON_UPDATE:
            return {"op": "SKIP", "reason": f"an update must keep the entry's words (overlap {kept:.2f} < "
                                            f"{KEEP_ON_UPDATE})"}
    return decision


def _best(library: Library, text: str) -> tuple[str, int, float] | None:
    found = [(c, i, overlap(text, e["text"])) for c in CATEGORIES for i, e in enumerate(library.entries[c])]
    return max(found, key=lambda x: x[2]) if found else None


class LLMConsolidator:
    """Asks an OpenAI-compatible endpoint for the decision; an answer that is not a valid
    decision falls back to the rule-based one (recorded as such)."""

    def __init__(self, model: str, *, base_url: str | None = None, api_key_env: str = "OPENAI_API_KEY",
                 timeout: float = 30.0) -> None:
        from openai import OpenAI

        self.model = model
        self.client = OpenAI(base_url=base_url, api_key=os.environ.get(api_key_env, "none"), timeout=timeout,
                             max_retries=1)

    def __call__(self, library: Library, note: dict[str, Any]) -> dict[str, Any]:
        listing = {c: [f"[{i}] {e['text']}" for i, e in enumerate(library.entries[c])] for c in CATEGORIES}
        prompt = ("You maintain an agent's experience library. Decide what to do with a new note.\n"
                  f"Library: {json.dumps(listing)}\nNote: {note.get('text', '')!r}\n"
                  'Answer with JSON only: {"op": "ADD|UPDATE|SKIP", "category": '
                  f'"{"|".join(CATEGORIES)}", "index": <entry index for UPDATE>, "text": "<entry text>"}}. '
                  "Prefer UPDATE when the note overlaps an existing entry.")
        import openai

        try:
            reply = self.client.chat.completions.create(model=self.model, temperature=0,
                                                        messages=[{"role": "user", "content": prompt}])
        except openai.OpenAIError as exc:  # nothing is saved: the notes stay pending for the next run
            status = getattr(exc, "status_code", None)
            message = f"The llm consolidator's endpoint failed ({type(exc).__name__}: {exc}); no note was consolidated"
            if status is None or status == 429 or status >= 500:
                kind = "transport" if status is None else "rate_limit" if status == 429 else "server"
                raise errors.EndpointError(message, kind=kind, status=status,
                                           endpoint=str(self.client.base_url)) from exc
            raise errors.EnvhError(message) from exc
        raw = reply.choices[0].message.content or ""
        try:
            decision = json.loads(raw[raw.index("{"): raw.rindex("}") + 1])
            _check(library, decision)
            return {**decision, "reason": "llm"}
        except (ValueError, KeyError, TypeError, errors.StateError):
            return {**rule_consolidator(library, note), "reason": f"llm answer unusable ({raw[:80]!r}); rules"}


def _check(library: Library, d: dict[str, Any]) -> None:
    if d.get("op") not in ("ADD", "UPDATE", "REMOVE", "SKIP"):
        raise errors.StateError(f"bad op {d.get('op')!r}")
    if d["op"] == "SKIP":
        return
    if d.get("category") not in CATEGORIES:
        raise errors.StateError("bad category")
    index = d.get("index", -1)
    if d["op"] in ("UPDATE", "REMOVE") and (type(index) is not int or not 0 <= index < len(library.entries[d["category"]])):
        raise errors.StateError(f"bad index {index!r}")
    if d["op"] in ("ADD", "UPDATE") and not (isinstance(d.get("text"), str) and d["text"].strip()):
        raise errors.StateError("the entry text must be a non-empty string")
    if d["op"] in ("ADD", "UPDATE") and len(d["text"]) > MAX_TEXT:
        raise errors.StateError(f"the entry text is longer than {MAX_TEXT} characters")


def consolidate(root: str | Path, consolidator: Consolidator = rule_consolidator) -> list[dict[str, Any]]:
    """Fold every pending note into the library (one new version) and file the notes
    under ``notes/done/``. Run it between parallel rollouts, never during them. Two
    consolidations of one library run one after the other (a lock file), so neither
    loses the other's version nor files notes the other already moved."""
    Path(root).mkdir(parents=True, exist_ok=True)
    with open(Path(root) / ".consolidate.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _consolidate(root, consolidator)


def _consolidate(root: str | Path, consolidator: Consolidator) -> list[dict[str, Any]]:
    library = Library(root)
    files = library.note_files()  # one listing: a file written meanwhile waits for the next run
    uses = library.count_uses(files)  # before the notes: an ADD evicts the least used by the episodes' counts
    pending = library.pending_notes(files)
    decisions = []
    for _, note in pending:
        decision = consolidator(library, note)
        decision = note_guard(library, decision)
        library.apply(decision)
        decisions.append({"note": note.get("text"), **decision})
    library.save()
    done = Path(root) / "notes" / "done" / f"v{library.version}"
    done.mkdir(parents=True, exist_ok=True)
    for path in files:  # the files with uses only, too
        os.replace(path, done / path.name)
    with open(Path(root) / "consolidations.jsonl", "a", encoding="utf-8") as f:
        f.write(json.dumps({"version": library.version, "uses": uses, "decisions": decisions}) + "\n")
    return decisions
