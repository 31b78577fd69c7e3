"""What an OfficeQA episode looks like as plain data: ``get_env_state()`` and its schema.

No gold answer and no source-document list: components may show state to the policy.
"""

from __future__ import annotations

from typing import Any

import attrs

MAX_QUERIES = 50
MAX_PAGES = 500


@attrs.define
class QAState:
    """Mutable tracker of one episode; ``to_json`` is ``get_env_state()``."""

    uid: str
    question: str
    difficulty: str = ""
    steps: int = 0
    last_tool: str | None = None
    last_error: str | None = None
    docs_opened: list[str] = attrs.Factory(list)
    pages_read: list[str] = attrs.Factory(list)
    grep_queries: list[dict[str, Any]] = attrs.Factory(list)
    grep_count: int = 0
    answered: bool = False
    answer: str | None = None

    def opened(self, doc: str, pages: tuple[int, ...]) -> None:
        if doc not in self.docs_opened:
            self.docs_opened.append(doc)
        for p in pages:
            key = f"{doc}#{p}"
            if key not in self.pages_read and len(self.pages_read) < MAX_PAGES:
                self.pages_read.append(key)

    def grepped(self, pattern: str, path_glob: str, hits: int) -> None:
        self.grep_count += 1
        self.grep_queries.append({"pattern": pattern[:500], "path_glob": path_glob[:500], "hits": hits})
        del self.grep_queries[:-MAX_QUERIES]

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self, recurse=True)


def _p(type_: str | list[str], description: str, **extra: Any) -> dict[str, Any]:
    return {"type": type_, "description": description, **extra}


STATE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": ("An OfficeQA episode: the policy answers a question about U.S. Treasury Bulletins by "
                    "searching the parsed corpus (glob, read, grep) and calling answer once."),
    "properties": {
        "uid": _p("string", "the question's uid in the benchmark CSV"),
        "question": _p("string", "the question text"),
        "difficulty": _p("string", "the benchmark's difficulty label (easy, hard), '' if absent"),
        "steps": _p("integer", "actions that reached the environment this episode"),
        "last_tool": _p(["string", "null"], "tool of the last action: glob, read, grep or answer"),
        "last_error": _p(["string", "null"], "error message of the last action if it failed, else null"),
        "docs_opened": _p("array", "bulletins read so far ('treasury_bulletin_YYYY_MM'), in order",
                          items={"type": "string"}),
        "pages_read": _p("array", "pages read so far as 'treasury_bulletin_YYYY_MM#PAGE' (page-level "
                         f"files and files with page markers; at most {MAX_PAGES})", items={"type": "string"}),
        "grep_queries": _p("array", f"the last {MAX_QUERIES} grep calls with their hit counts", items={
            "type": "object", "properties": {"pattern": {"type": "string"}, "path_glob": {"type": "string"},
                                             "hits": {"type": "integer"}},
            "required": ["pattern", "path_glob", "hits"], "additionalProperties": False}),
        "grep_count": _p("integer", "grep calls this episode"),
        "answered": _p("boolean", "answer() was called: the episode is over"),
        "answer": _p(["string", "null"], "the policy's answer text (first 4000 characters), null before answer()"),
    },
    "required": ["uid", "question", "steps", "docs_opened", "pages_read", "grep_queries", "answered"],
    "additionalProperties": False,
}
