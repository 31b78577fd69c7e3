"""OfficeQAEnv: grounded question answering over U.S. Treasury Bulletins.

The policy searches the parsed corpus with ``glob``, ``read`` and ``grep`` (confined,
bounded, RE2; see ``corpus``) and ends the episode with ``answer``. The verdict is the
benchmark's own matching (``qa_scoring``) at the configured tolerance, with EM, token F1
and the 0/1/5 % scores as metrics. The gold answer lives only inside ``evaluate``: no
observation and no state field carries it.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from envh import (
    Action,
    Bridge,
    EnvResponse,
    EvaluationResult,
    Observation,
    ResetResult,
    TaskRef,
    ToolSpec,
    errors,
)

from . import qa_data, qa_scoring
from .corpus import Corpus, CorpusError
from .qa_state import STATE_SCHEMA, QAState

INDEX_HEADER = "Bulletin index (documents in the corpus):"
INDEX_CHARS = 6000
MAX_RAW_ANSWER_CHARS = 100_000  # the whole `answer` text, reasoning and tags included

TOOLS = [
    ToolSpec(name="glob", description=(
        "List corpus files matching a glob pattern relative to the corpus root "
        "(`*` within a folder, `**` across folders, `{a,b}` alternatives)."),
        parameters={"type": "object", "properties": {
            "pattern": {"type": "string", "description": "e.g. 'transformed/treasury_bulletin_1941_*.txt'"}},
            "required": ["pattern"], "additionalProperties": False}),
    ToolSpec(name="read", description=(
        "Read a corpus file with line numbers, `limit` lines (at most 400) from line `start`."),
        parameters={"type": "object", "properties": {
            "path": {"type": "string", "description": "file path relative to the corpus root"},
            "start": {"type": "integer", "description": "first line to show (1-based, default 1)"},
            "limit": {"type": "integer", "description": "how many lines (default 200, at most 400)"}},
            "required": ["path"], "additionalProperties": False}),
    ToolSpec(name="grep", description=(
        "Search corpus files for a regular expression (RE2 syntax) and list matching lines "
        "as path:line: text."),
        parameters={"type": "object", "properties": {
            "pattern": {"type": "string", "description": "RE2 regular expression"},
            "path_glob": {"type": "string", "description": "which files to search (default '**': all)"},
            "max_hits": {"type": "integer", "description": "stop after this many lines (default 50, at most 200)"},
            "ignore_case": {"type": "boolean", "description": "case-insensitive search (default false)"}},
            "required": ["pattern"], "additionalProperties": False}),
    ToolSpec(name="answer", description=(
        "Give your final answer (wrap it in <FINAL_ANSWER>...</FINAL_ANSWER> if you add "
        "reasoning); ends the episode."),
        parameters={"type": "object", "properties": {"text": {"type": "string", "description": "the answer"}},
                    "required": ["text"], "additionalProperties": False}),
]


class OfficeQAEnv(Bridge):
    """OfficeQA questions as tool-calling episodes over the parsed bulletin corpus."""

    name = "officeqa"

    def __init__(self, data: str | None = None, corpus: str | None = None, split_manifest: str | None = None,
                 *, tolerance: float = 0.0, reward_on_answer: bool = True, show_index: bool = True,
                 max_answer_chars: int | None = 400, strict_answers: bool = True) -> None:
        cfg = qa_data.resolve_config(data, corpus, split_manifest)
        csv_path = qa_data.find_csv(cfg["data"])
        if csv_path is None:
            raise errors.SpecError(f"OfficeQA needs its question CSV (config 'data' or OFFICEQA_DATA; got "
                                   f"{cfg['data']!r}). {qa_data.OBTAIN} `envh office check` shows what is found.")
        if not cfg["corpus"] or not Path(cfg["corpus"]).expanduser().is_dir():
            raise errors.SpecError(f"OfficeQA needs its corpus folder (config 'corpus' or OFFICEQA_CORPUS; got "
                                   f"{cfg['corpus']!r}). {qa_data.OBTAIN}")
        if not 0 <= tolerance <= 1:
            raise errors.SpecError(f"tolerance must be within [0, 1] (0.01 = 1 %), got {tolerance}")
        self.questions = qa_data.load_questions(csv_path)
        self.splits = qa_data.load_splits(cfg["split_manifest"], list(self.questions))
        hidden = tuple(str(p) for p in (csv_path, cfg["split_manifest"]) if p)
        self.corpus = Corpus(qa_data.corpus_root(str(cfg["corpus"])), hidden=hidden)
        self.tolerance, self.reward_on_answer, self.show_index = tolerance, reward_on_answer, show_index
        # The benchmark's matcher accepts an answer if *any* number in it is close enough, so
        # a policy listing hundreds of numbers would be rewarded; the graded part is capped
        # (None: no cap, as the benchmark's own evaluation).
        self.max_answer_chars = max_answer_chars
        # ... and passes 'no' for 'not known', '543 billion' for '543 million', '12 to 13' for
        # '12': strict matching refuses those (qa_scoring); False grades as the benchmark does
        # (the benchmark's own score is in the metrics either way, as score_benchmark).
        self.strict_answers = strict_answers
        self.question: qa_data.Question | None = None
        self.state: QAState | None = None
        self._graded = ""
        self._last: Observation | None = None
        self._split = next(iter(self.splits))

    # -- tasks ------------------------------------------------------------------------
    def tools(self) -> list[ToolSpec]:
        return TOOLS

    def list_tasks(self, split: str | None = None) -> list[TaskRef]:
        names = [split] if split is not None else list(self.splits)
        return [TaskRef(suite="officeqa", split=s, instance_id=u) for s in names for u in self.splits.get(s, [])]

    def tunable_parameters(self) -> dict[str, dict[str, Any]]:
        from envh_office.qa_tunable import PARAMETERS  # easy / hard, from the difficulty column

        return {name: dict(spec) for name, spec in PARAMETERS.items()}

    def task_for(self, params: Any, rng: Any) -> TaskRef:
        from envh_office.qa_tunable import task_for

        return task_for(self, params, rng)

    def _question(self, task: TaskRef | None) -> qa_data.Question:
        if task is None:
            return self.questions[self.splits[self._split][0]]
        if task.instance_id not in self.questions:
            raise errors.UnknownNameError("OfficeQA question", task.instance_id, list(self.questions))
        return self.questions[task.instance_id]

    def index_text(self) -> str:
        """Bulletins in the corpus grouped by year: '1941: 01 02 03'."""
        by_year: dict[str, list[str]] = defaultdict(list)
        for rel in self.corpus.files:
            name = rel.rsplit("/", 1)[-1]
            if name.startswith("treasury_bulletin_") and name.count("_") == 3:
                year, month = name[18:22], name[23:25]
                if month not in by_year[year]:
                    by_year[year].append(month)
        text = "\n".join(f"{y}: {' '.join(sorted(m))}" for y, m in sorted(by_year.items()))
        if len(text) > INDEX_CHARS:
            text = text[:INDEX_CHARS] + "\n[... index cut; use glob() for the rest]"
        folders = sorted({rel.rsplit("/", 1)[0] for rel in self.corpus.files if "/" in rel})
        where = f"Folders: {', '.join(folders[:10])}. " if folders else ""
        return f"{INDEX_HEADER}\n{where}Files are named treasury_bulletin_YYYY_MM.txt.\n{text}"

    # -- episode ----------------------------------------------------------------------
    def _reset(self, task: TaskRef | None, seed: int | None, options: dict[str, Any]) -> ResetResult:
        q = self.question = self._question(task)
        self.state = QAState(uid=q.uid, question=q.question, difficulty=q.difficulty)
        self._graded = ""
        text = (f"Question: {q.question}\n\nAnswer it from the U.S. Treasury Bulletins in the corpus, using "
                "glob, read and grep, then call answer(text).")
        if self.show_index:
            text += "\n\n" + self.index_text()
        self._last = Observation(text=text, data={"uid": q.uid})
        return ResetResult(observation=self._last, info={"task": f"officeqa/{q.uid}"})

    def _step(self, action: Action) -> EnvResponse:
        state = self._live()
        if state.answered:
            return self._respond(state, action.tool, self.error_response(
                "The episode is over: answer() was already called.", kind="episode_over"))
        args = action.args
        try:
            if action.tool == "glob":
                text = self.corpus.list_text(args["pattern"])
                return self._respond(state, "glob", EnvResponse(observation=Observation(text=text)))
            if action.tool == "read":
                res = self.corpus.read(args["path"], args.get("start", 1), args.get("limit", 200))
                state.opened(res.doc, res.pages)
                return self._respond(state, "read", EnvResponse(observation=Observation(
                    text=res.text, data={"doc": res.doc, "pages": list(res.pages)})))
            if action.tool == "grep":
                res = self.corpus.grep(args["pattern"], args.get("path_glob", "**"), args.get("max_hits", 50),
                                       bool(args.get("ignore_case", False)))
                state.grepped(args["pattern"], args.get("path_glob", "**"), res.hits)
                return self._respond(state, "grep", EnvResponse(observation=Observation(
                    text=res.text, data={"hits": res.hits})))
        except CorpusError as exc:
            return self._respond(state, action.tool, self.error_response(str(exc), kind="corpus_error"))
        return self._answer(state, args["text"])

    def _answer(self, state: QAState, text: str) -> EnvResponse:
        if len(text) > MAX_RAW_ANSWER_CHARS:  # before any parsing: a huge text must cost nothing
            return self._respond(state, "answer", self.error_response(
                f"The answer text is {len(text)} characters long; at most {MAX_RAW_ANSWER_CHARS} are accepted. "
                "Put just the answer in <FINAL_ANSWER>...</FINAL_ANSWER>.", kind="answer_too_long"))
        if not text.strip() or not qa_scoring.final_answer(text).strip():
            return self._respond(state, "answer", self.error_response(
                "The answer is empty; give a value.", kind="empty_answer"))
        graded = qa_scoring.final_answer(text).strip()
        if self.max_answer_chars is not None and len(graded) > self.max_answer_chars:
            return self._respond(state, "answer", self.error_response(
                f"The answer is {len(graded)} characters long; at most {self.max_answer_chars} are graded. Put "
                "just the answer in <FINAL_ANSWER>...</FINAL_ANSWER>.", kind="answer_too_long"))
        # the state keeps a bounded copy for display; the verdict grades exactly what was
        # checked here (a cut copy could lose a late <FINAL_ANSWER> tag, and then the whole
        # reasoning before it, numbers and all, would be graded)
        state.answered, state.answer, self._graded = True, text[:4000], graded
        reward = self.evaluate().score if self.reward_on_answer else 0.0
        return self._respond(state, "answer", EnvResponse(
            observation=Observation(text="Answer recorded; the episode is over."), reward=reward, terminated=True))

    def _respond(self, state: QAState, tool: str, resp: EnvResponse) -> EnvResponse:
        error = resp.info.get("error")
        state.steps += 1
        state.last_tool, state.last_error = tool, error["message"] if error else None
        self._last = resp.observation
        return resp

    def _live(self) -> QAState:
        if self.state is None:
            raise errors.EnvhError("OfficeQAEnv.step() called before reset()")
        return self.state

    def observe(self) -> Observation:
        if self._last is None:
            raise errors.EnvhError("OfficeQAEnv.observe() called before reset()")
        return self._last

    # -- verifier and state -----------------------------------------------------------
    def evaluate(self) -> EvaluationResult:
        """The benchmark's match of the given answer (no answer yet: not solved)."""
        state = self._live()
        assert self.question is not None
        given = self._graded if state.answered else ""
        metrics: dict[str, Any] = {"answered": state.answered, "tolerance": self.tolerance,
                                   "strict_answers": self.strict_answers}
        if not state.answered:
            metrics.update({"em": 0.0, "f1": 0.0, "score_benchmark": 0.0,
                            **{f"score_benchmark_{v}": 0.0 for v in qa_scoring.BENCHMARK_VERSIONS},
                            **{f"score_tol_{round(t * 100)}": 0.0 for t in qa_scoring.TOLERANCES}})
            return EvaluationResult(success=False, score=0.0, metrics=metrics)
        gold, strict = self.question.answer, self.strict_answers
        for t in qa_scoring.TOLERANCES:
            metrics[f"score_tol_{round(t * 100)}"] = qa_scoring.score_answer(gold, given, t, strict)
        metrics["score_benchmark"] = qa_scoring.score_answer(gold, given, self.tolerance)
        # each version of the benchmark's reward.py on its own (score_benchmark needs both)
        for version, value in qa_scoring.benchmark_scores(gold, given, self.tolerance).items():
            metrics[f"score_benchmark_{version}"] = value
        metrics["em"] = qa_scoring.exact_match(gold, given)
        metrics["f1"] = round(qa_scoring.token_f1(gold, given), 6)
        score = qa_scoring.score_answer(gold, given, self.tolerance, strict)
        return EvaluationResult(success=score == 1.0, score=score, metrics=metrics)

    def get_env_state(self) -> dict[str, Any]:
        return self._live().to_json()

    def env_state_schema(self) -> dict[str, Any]:
        return STATE_SCHEMA

    def close(self) -> None:
        """Nothing to release: the corpus is plain files."""
