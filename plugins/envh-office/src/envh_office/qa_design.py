"""OfficeQA templates for designers (contributed with ``bridge="officeqa"``).

Each has ``name``, ``direction``, ``magnitudes(env, task)`` (settings that keep the task
solvable, weakest first; empty when the template does not apply) and
``instantiate(env, task, magnitude)`` returning env-spec layer dicts. Templates are
trusted code and may read the question's source list from the bridge; the contract code
they emit reads only ``get_env_state()`` and what the policy itself saw.
"""

from __future__ import annotations

from typing import Any

from envh import ActionableEnv, TaskRef

from .qa_bridge import INDEX_HEADER

NARROW_CODE = '''SOURCES = {sources!r}
SOURCE_GLOB = {glob!r}


def filter_action(action, state, memo):
    if action.tool in ("grep", "glob"):
        args = dict(action.args)
        args["path_glob" if action.tool == "grep" else "pattern"] = SOURCE_GLOB
        return Action(tool=action.tool, args=args)
    if action.tool == "read":
        path = action.args.get("path", "")
        if not any(name in path for name in SOURCES):
            return Block(reason="In this world only the source bulletins can be read: " + ", ".join(SOURCES) + ".")
    return None


def filter_observation(observation, state, memo):
    if not memo.get("shown"):  # the episode's first observation, after any stage
        memo["shown"] = True
        return observation.text + "\\n\\nThe answer is in: " + ", ".join(SOURCES) + " (searches cover only these)."
    return None
'''

POINT_CODE = '''HINT = {hint!r}


def filter_observation(observation, state, memo):
    if not memo.get("shown"):  # the episode's first observation, after any stage
        memo["shown"] = True
        return observation.text + "\\n\\n" + HINT
    return None
'''

CITE_CODE = '''import re

LIMIT = 200000
MIN_CHARS = {min_chars!r}
MESSAGE = ("Before answering, quote (in double quotes) a line of at least " + str(MIN_CHARS)
           + " characters that you read with read(), and put the answer itself in "
           + "<FINAL_ANSWER>...</FINAL_ANSWER>.")


def modify_transition(action, response, state, memo):
    if action.tool == "read" and not response.info.get("error"):
        # only the document's lines count (not the line numbers or the '[lines 1-200 of ...]'
        # footer the environment adds, which any policy could quote without reading)
        lines = re.findall("(?m)^ *[0-9]+\\t(.*)$", response.observation.text)
        memo["seen"] = (memo.get("seen", "") + "\\n" + "\\n".join(lines))[-LIMIT:]
    return None


def filter_action(action, state, memo):
    if action.tool != "answer":
        return None
    text = action.args.get("text", "")
    if "<FINAL_ANSWER>" not in text.upper():
        return Block(reason=MESSAGE)
    seen = memo.get("seen", "")
    for quote in re.findall('"([^"\\\\n]+)"', text):
        if len(quote.strip()) >= MIN_CHARS and quote.strip() in seen:
            return None
    return Block(reason=MESSAGE)
'''

HIDE_CODE = '''HEADER = {header!r}
NO_GLOB = {no_glob!r}


def filter_action(action, state, memo):
    if NO_GLOB and action.tool == "glob":
        return Block(reason="glob is not available in this world; find documents with grep.")
    return None


def filter_observation(observation, state, memo):
    if HEADER in observation.text:  # only the reset observation carries the index
        return observation.text.split(HEADER)[0].rstrip()
    return None
'''


def _question(env: ActionableEnv, task: TaskRef) -> Any:
    return getattr(env.unwrapped, "questions", {}).get(task.instance_id)


class NarrowCorpus:
    """Scaffold: every search and read reaches only the question's source bulletins."""

    name = "officeqa.narrow-corpus"
    direction = "scaffold"
    axis = "A"  # the diagnosed failure axis it answers (the template designer tries it first)

    def magnitudes(self, env: ActionableEnv, task: TaskRef) -> list[int]:
        q = _question(env, task)
        return [1] if q is not None and q.source_bulletins else []

    def instantiate(self, env: ActionableEnv, task: TaskRef, magnitude: Any) -> list[dict[str, Any]]:
        sources = list(_question(env, task).source_bulletins)
        glob = "**/{" + ",".join(sources) + "}*" if len(sources) > 1 else f"**/{sources[0]}*"
        return [{"kind": "contract", "id": "narrow-corpus", "code": NARROW_CODE.format(sources=sources, glob=glob)}]


class PointPages:
    """Scaffold: name the source bulletins (1), and the pages the answer is on (2)."""

    name = "officeqa.point-pages"
    direction = "scaffold"
    axis = "task_understanding"  # the diagnosed failure axis it answers (the template designer tries it first)

    def magnitudes(self, env: ActionableEnv, task: TaskRef) -> list[int]:
        q = _question(env, task)
        if q is None or not q.source_bulletins:
            return []
        return [1, 2] if q.source_pages else [1]

    def instantiate(self, env: ActionableEnv, task: TaskRef, magnitude: Any) -> list[dict[str, Any]]:
        q = _question(env, task)
        hint = "Look in " + ", ".join(q.source_bulletins)
        if int(magnitude) >= 2 and q.source_pages:
            pages = q.source_pages
            span = f"page {pages[0]}" if len(pages) == 1 else f"pages {pages[0]}-{pages[-1]}"
            hint += f", {span}"
        return [{"kind": "contract", "id": f"point-pages-{magnitude}",
                 "code": POINT_CODE.format(hint=hint + ".")}]


class RequireCitation:
    """Pressure: ``answer`` must quote a line the policy read (at least N characters)."""

    name = "officeqa.require-citation"
    direction = "pressure"

    def magnitudes(self, env: ActionableEnv, task: TaskRef) -> list[int]:
        return [12, 30]

    def instantiate(self, env: ActionableEnv, task: TaskRef, magnitude: Any) -> list[dict[str, Any]]:
        return [{"kind": "contract", "id": f"require-citation-{magnitude}",
                 "code": CITE_CODE.format(min_chars=int(magnitude))}]


class HideIndex:
    """Pressure: no bulletin index in the first observation (1); no glob either (2)."""

    name = "officeqa.hide-index"
    direction = "pressure"

    def magnitudes(self, env: ActionableEnv, task: TaskRef) -> list[int]:
        return [1, 2]

    def instantiate(self, env: ActionableEnv, task: TaskRef, magnitude: Any) -> list[dict[str, Any]]:
        return [{"kind": "contract", "id": f"hide-index-{magnitude}",
                 "code": HIDE_CODE.format(header=INDEX_HEADER, no_glob=int(magnitude) >= 2)}]
