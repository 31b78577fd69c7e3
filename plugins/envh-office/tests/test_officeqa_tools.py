"""OfficeQA tools on a real corpus folder: confinement, hostile patterns, bounded output,
state, and the gold answer never reaching the policy or the components."""

from __future__ import annotations

import json
import time

import pytest
from envh import Action, TaskRef
from envh_office.corpus import MAX_HITS, Corpus
from office_fixtures import GOLD, QUESTIONS

T1 = TaskRef(suite="officeqa", split="train", instance_id="UID0001")
PAGE = "treasury_bulletins_parsed/transformed/treasury_bulletin_1941_01.txt"


def _plain(o):
    return dict(o) if hasattr(o, "items") else list(o)


def step(env, tool, **args):
    return env.step(Action(tool=tool, args=args))


def test_tasks_and_first_observation(qa_env):
    assert [t.instance_id for t in qa_env.list_tasks("test")] == ["UID0002", "UID0003"]
    assert len(qa_env.list_tasks()) == 3
    first = qa_env.reset(task=T1, seed=0).observation.text
    assert QUESTIONS[0]["question"] in first
    assert "Bulletin index" in first and "1941: 01 02" in first and "1977: 05 06" in first


def test_read_grep_glob_and_state(qa_env):
    qa_env.reset(task=T1, seed=0)
    listed = step(qa_env, "glob", pattern="**/treasury_bulletin_1941_01*.txt").observation.text
    assert "transformed/treasury_bulletin_1941_01.txt" in listed and "transformed_page_level/treasury_bulletin_1941_01_2.txt" in listed
    hits = step(qa_env, "grep", pattern=r"Total budget receipts \| \d+", path_glob="**/transformed/*.txt")
    assert hits.observation.data["hits"] == 6 and f"{PAGE[len('treasury_bulletins_parsed/'):]}:" in hits.observation.text
    read = step(qa_env, "read", path="transformed/treasury_bulletin_1941_01.txt", start=5, limit=8)
    assert "     9\t| Item | Amount (millions) |" in read.observation.text
    assert "    11\t| Total budget receipts | 2417 |" in read.observation.text
    assert "more follow: read(" in read.observation.text
    paged = step(qa_env, "read", path="transformed_page_level/treasury_bulletin_1977_05_3.txt")
    assert "end of file" in paged.observation.text
    state = qa_env.get_env_state()
    assert state["docs_opened"] == ["treasury_bulletin_1941_01", "treasury_bulletin_1977_05"]
    assert state["pages_read"] == ["treasury_bulletin_1941_01#1", "treasury_bulletin_1941_01#2",
                                   "treasury_bulletin_1977_05#3"]
    assert state["grep_queries"] == [{"pattern": r"Total budget receipts \| \d+", "path_glob": "**/transformed/*.txt",
                                      "hits": 6}]
    assert state["steps"] == 4 and not state["answered"]


@pytest.mark.parametrize("path", [
    "../secret.txt", "transformed/../../secret.txt", "/etc/passwd", "~/x", "escape.txt",
    "escape_dir/secret.txt", "escape_dir/officeqa.csv", "transformed/\x00x", "C:/windows",
])
def test_paths_cannot_leave_the_corpus(qa_env, path):
    qa_env.reset(task=T1, seed=0)
    resp = step(qa_env, "read", path=path)
    assert resp.info["error"]["type"] == "corpus_error"
    assert "outside world" not in resp.observation.text and GOLD["UID0001"] not in resp.observation.text


def test_glob_and_grep_do_not_follow_links_out(qa_env):
    qa_env.reset(task=T1, seed=0)
    listed = step(qa_env, "glob", pattern="**").observation.text
    assert "escape" not in listed and "secret" not in listed and "officeqa.csv" not in listed
    assert step(qa_env, "grep", pattern="outside world").observation.data["hits"] == 0
    for pattern in ("../*", "/etc/*"):
        assert step(qa_env, "glob", pattern=pattern).info["error"]["type"] == "corpus_error"
    assert step(qa_env, "grep", pattern="x", path_glob="../**").info["error"]["type"] == "corpus_error"


@pytest.mark.parametrize("pattern", [r"(a+)+$", r"(x+x+)+y", r"(.*a){25}", r"^(\w+\s?)*$", r"(a|aa)+b"])
def test_hostile_regexes_finish_fast(tmp_path, pattern):
    (tmp_path / "treasury_bulletin_2000_01.txt").write_text(("a" * 5000 + "!\n") * 200 + "x" * 30000 + "\n")
    corpus = Corpus(tmp_path)
    t0 = time.perf_counter()
    corpus.grep(pattern, max_hits=5)
    assert time.perf_counter() - t0 < 2.0


@pytest.mark.parametrize("pattern", [r"(a)\1", r"(?=a)", r"(?<!a)b", "", "[", "x" * 3000])
def test_unsupported_or_bad_patterns_are_errors(qa_env, pattern):
    qa_env.reset(task=T1, seed=0)
    resp = step(qa_env, "grep", pattern=pattern)
    assert resp.info["error"]["type"] == "corpus_error" and len(resp.observation.text) < 3000


def test_huge_files_and_outputs_are_bounded(tmp_path):
    big = tmp_path / "treasury_bulletin_2001_01.txt"
    with open(big, "w") as f:
        f.write("y" * 5_000_000 + "\n")  # one 5 MB line
        for i in range(50_000):
            f.write(f"row {i} total 12\n")
    corpus = Corpus(tmp_path)
    read = corpus.read("treasury_bulletin_2001_01.txt", 1, 10_000)
    assert read.lines == 400 and len(read.text) < 30_000
    assert "[... line cut]" in read.text and "longer than 1000 characters were cut" in read.text
    far = corpus.read("treasury_bulletin_2001_01.txt", 49_000, 5)
    assert "48998 total 12" in far.text and "more follow" in far.text
    with pytest.raises(Exception, match="past its end"):
        corpus.read("treasury_bulletin_2001_01.txt", 10**12, 5)
    hits = corpus.grep("total", max_hits=10**9)
    assert hits.hits == MAX_HITS and "stopped at max_hits=200" in hits.text
    everything = corpus.grep("y", max_hits=1)
    assert len(everything.text) < 1000 and "[... line cut]" in everything.text


def test_answer_ends_the_episode_and_gold_never_leaks(qa_env):
    """Play every question with a search-heavy episode; no observation, state, saved
    state or info ever contains a gold answer (except where the policy's answer says it)."""
    seen = []
    for q in QUESTIONS:
        task = TaskRef(suite="officeqa", split="test" if q["uid"] != "UID0001" else "train", instance_id=q["uid"])
        seen.append(qa_env.reset(task=task, seed=0).observation.text)
        for action in [Action(tool="glob", args={"pattern": "**"}),
                       Action(tool="grep", args={"pattern": "receipts|debt|yield", "ignore_case": True}),
                       Action(tool="read", args={"path": "transformed/treasury_bulletin_1948_07.txt"}),
                       Action(tool="answer", args={"text": "I do not know"}),
                       Action(tool="answer", args={"text": "again"})]:
            resp = qa_env.step(action)
            seen += [resp.observation.text, json.dumps(dict(resp.observation.data)), json.dumps(resp.info, default=str),
                     json.dumps(qa_env.get_env_state()), json.dumps(qa_env.save_state(), default=_plain)]
        assert resp.info["error"]["type"] == "episode_over"
        verdict = qa_env.evaluate()
        assert not verdict.success and verdict.metrics["em"] == 0.0
        seen.append(json.dumps(verdict.metrics))
    blob = "\n".join(seen)
    for gold in GOLD.values():
        assert gold not in blob
    assert "source_files" not in blob and "?page=" not in blob


def test_empty_answer_is_a_policy_error(qa_env):
    qa_env.reset(task=T1, seed=0)
    resp = step(qa_env, "answer", text="<FINAL_ANSWER></FINAL_ANSWER>")
    assert resp.info["error"]["type"] == "empty_answer" and not resp.terminated
    assert not qa_env.get_env_state()["answered"]


def test_tolerance_config_and_metrics(officeqa_dirs):
    from envh_office.qa_bridge import OfficeQAEnv

    with OfficeQAEnv(officeqa_dirs["csv"], officeqa_dirs["corpus"], tolerance=0.05) as env:
        env.reset(task=TaskRef(suite="officeqa", split="all", instance_id="UID0001"), seed=0)
        done = step(env, "answer", text="2,500")  # 3.4 % off
        assert done.terminated and done.reward == 1.0
        m = env.evaluate().metrics
        assert (m["score_tol_0"], m["score_tol_1"], m["score_tol_5"]) == (0.0, 0.0, 1.0)
        assert env.list_tasks() and {t.split for t in env.list_tasks()} == {"all"}
        # prose around a numeric answer: one version of the benchmark's reward.py passes it,
        # the other refuses it, so the benchmark score (and the reward) is 0
        env.reset(task=TaskRef(suite="officeqa", split="all", instance_id="UID0001"), seed=0)
        done = step(env, "answer", text="about 2,500")
        assert done.terminated and done.reward == 0.0
        m = env.evaluate().metrics
        assert (m["score_benchmark_lists"], m["score_benchmark_prose"], m["score_benchmark"]) == (1.0, 0.0, 0.0)
        assert env.list_tasks() and {t.split for t in env.list_tasks()} == {"all"}


def test_question_csv_inside_the_corpus_is_never_served(tmp_path):
    """A user who keeps officeqa.csv (gold answers) inside the corpus folder: the tools
    neither list, read nor grep it."""
    import csv

    from envh_office.qa_bridge import OfficeQAEnv
    from office_fixtures import write_corpus

    write_corpus(tmp_path, [(1941, 1)])
    root = tmp_path / "treasury_bulletins_parsed"
    with open(root / "officeqa.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["uid", "question", "answer", "source_docs", "source_files", "difficulty"])
        w.writeheader()
        w.writerow(QUESTIONS[0])
    (root / "splits.json").write_text(json.dumps({"dev": ["UID0001"]}))
    (root / "answers_link.csv").symlink_to(root / "officeqa.csv")
    with OfficeQAEnv(str(root / "officeqa.csv"), str(tmp_path), str(root / "splits.json")) as env:
        env.reset(task=TaskRef(suite="officeqa", split="dev", instance_id="UID0001"), seed=0)
        texts = [step(env, "glob", pattern="**").observation.text,
                 step(env, "grep", pattern="UID0001|budget receipts in fiscal").observation.text,
                 step(env, "read", path="officeqa.csv").observation.text,
                 step(env, "read", path="answers_link.csv").observation.text,
                 step(env, "read", path="splits.json").observation.text]
    assert not any(GOLD["UID0001"] in t for t in texts)
    assert "officeqa.csv" not in texts[0] and "splits.json" not in texts[0] and "answers_link" not in texts[0]


@pytest.mark.parametrize("pattern", ["?*" * 40 + "X", "**a" * 30 + "b", "{" * 50 + "a", "[" * 30, "x" * 2000])
def test_hostile_globs_finish_fast(qa_env, pattern):
    qa_env.reset(task=T1, seed=0)
    t0 = time.perf_counter()
    resp = step(qa_env, "glob", pattern=pattern)
    assert time.perf_counter() - t0 < 1.0 and len(resp.observation.text) < 3000


def test_number_spam_is_not_graded(qa_env):
    """Listing every number would match any single-number gold answer under the
    benchmark's rules; the graded part of an answer is capped."""
    qa_env.reset(task=T1, seed=0)
    spam = " ".join(str(n) for n in range(2000, 3000))
    resp = step(qa_env, "answer", text=f"<FINAL_ANSWER>{spam}</FINAL_ANSWER>")
    assert resp.info["error"]["type"] == "answer_too_long" and not resp.terminated
    assert step(qa_env, "answer", text=spam).info["error"]["type"] == "answer_too_long"
    ok = step(qa_env, "answer", text="Long reasoning. " * 100 + "<FINAL_ANSWER>2417</FINAL_ANSWER>")
    assert ok.terminated and ok.reward == 1.0


def test_huge_answer_text_is_refused_before_parsing(qa_env):
    """32000 unclosed <FINAL_ANSWER> tags took minutes in the benchmark's tag regex; the
    whole answer text is capped before any parsing, with a message."""
    from envh_office.qa_bridge import MAX_RAW_ANSWER_CHARS

    qa_env.reset(task=T1, seed=0)
    t0 = time.perf_counter()
    resp = step(qa_env, "answer", text="<FINAL_ANSWER>" * (MAX_RAW_ANSWER_CHARS // 14 + 1))
    assert resp.info["error"]["type"] == "answer_too_long" and not resp.terminated
    assert "at most" in resp.info["error"]["message"] and time.perf_counter() - t0 < 5
    ok = step(qa_env, "answer", text="reasoning " * 9000 + "<FINAL_ANSWER>2417</FINAL_ANSWER>")
    assert ok.terminated and ok.reward == 1.0


def test_sibling_question_tables_and_hard_links_are_never_served(tmp_path):
    """The benchmark ships officeqa.csv, officeqa_full.csv and officeqa_pro.csv together,
    with the same answers; a corpus folder that holds the data folder must not serve the
    two that were not configured, a hard link to the configured one, or a renamed copy."""
    import csv
    import os

    from envh_office.qa_bridge import OfficeQAEnv
    from office_fixtures import write_corpus

    write_corpus(tmp_path, [(1941, 1)])
    root = tmp_path / "treasury_bulletins_parsed"
    for name in ("officeqa.csv", "officeqa_full.csv", "officeqa_pro.csv", "notes/q.csv"):
        (root / name).parent.mkdir(exist_ok=True)
        with open(root / name, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=["uid", "question", "answer", "source_docs", "source_files",
                                              "difficulty"])
            w.writeheader()
            w.writerow(QUESTIONS[0])
    os.link(root / "officeqa.csv", root / "hardlinked.txt")
    with OfficeQAEnv(str(root / "officeqa.csv"), str(tmp_path)) as env:
        env.reset(task=TaskRef(suite="officeqa", split="all", instance_id="UID0001"), seed=0)
        listed = step(env, "glob", pattern="**").observation.text
        texts = [listed, step(env, "grep", pattern="UID0001").observation.text,
                 *(step(env, "read", path=p).observation.text
                   for p in ("officeqa_full.csv", "officeqa_pro.csv", "notes/q.csv", "hardlinked.txt"))]
    assert not any(GOLD["UID0001"] in t for t in texts), texts
    assert "treasury_bulletin_1941_01" in listed
    assert not any(n in listed for n in ("officeqa", "q.csv", "hardlinked"))


def test_env_grades_strictly_by_default_and_reports_the_benchmark_score(qa_env):
    """A fragment of the gold word ('arc' for 'March'): the benchmark's rules pass it, the
    episode's reward does not; score_benchmark still says what the benchmark would give."""
    task = TaskRef(suite="officeqa", split="test", instance_id="UID0002")
    qa_env.reset(task=task, seed=0)
    resp = step(qa_env, "answer", text="<FINAL_ANSWER>arc 1977</FINAL_ANSWER>")
    assert resp.terminated and resp.reward == 0.0
    m = qa_env.evaluate().metrics
    assert m["score_benchmark"] == 1.0 and m["score_tol_0"] == 0.0 and m["strict_answers"] is True


@pytest.mark.parametrize("strict", [True, False])
def test_the_verdict_grades_the_checked_answer_not_a_cut_copy(officeqa_dirs, strict):
    """The state keeps the first 4000 characters of an answer. Grading that copy lost a
    late <FINAL_ANSWER> tag: a wrong tagged answer after 4000 characters of numbers scored
    (any number close enough), and a right one after long reasoning did not."""
    from envh_office.qa_bridge import OfficeQAEnv

    with OfficeQAEnv(officeqa_dirs["data"], officeqa_dirs["corpus"], officeqa_dirs["split_manifest"],
                     strict_answers=strict) as env:
        env.reset(task=T1, seed=0)
        spam = " ".join(str(n) for n in range(2000, 3000))
        wrong = step(env, "answer", text=spam + " <FINAL_ANSWER>7</FINAL_ANSWER>")
        assert wrong.terminated and wrong.reward == 0.0
        assert env.evaluate().metrics["score_benchmark"] == 0.0
        env.reset(task=T1, seed=0)
        right = step(env, "answer", text="x" * 4000 + " <FINAL_ANSWER>2,417 million</FINAL_ANSWER>")
        assert right.terminated and right.reward == 1.0
        assert len(env.get_env_state()["answer"]) == 4000


def test_megabyte_globs_are_refused_before_any_work(qa_env):
    """'[' and '{' each scan ahead for their closing bracket: a pattern of them at the
    largest argument the core lets through took over a second per call, each call, before
    the length check ran."""
    qa_env.reset(task=T1, seed=0)
    for pattern in ("[" * 199_999, "{" * 199_999):
        t0 = time.perf_counter()
        glob = step(qa_env, "glob", pattern=pattern)
        grep = step(qa_env, "grep", pattern="x", path_glob=pattern)
        assert time.perf_counter() - t0 < 0.5
        assert "longer than 1000" in glob.observation.text and "longer than 1000" in grep.observation.text
