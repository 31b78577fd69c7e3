"""OfficeQA through envh: the bridge contract suite, a reference solution through a
stage + contract stack, and each designer template doing what it says."""

from __future__ import annotations

import envh
import pytest
from envh import Action, TaskRef
from envh.testing import BridgeContract
from office_fixtures import GOLD

T1 = TaskRef(suite="officeqa", split="train", instance_id="UID0001")
T3 = TaskRef(suite="officeqa", split="test", instance_id="UID0003")


class TestOfficeQAContract(BridgeContract):
    @pytest.fixture
    def env_factory(self, officeqa_dirs):
        from envh_office.qa_bridge import OfficeQAEnv

        return lambda: OfficeQAEnv(officeqa_dirs["data"], officeqa_dirs["corpus"], officeqa_dirs["split_manifest"])

    @pytest.fixture
    def task(self):
        return T1

    @pytest.fixture
    def sample_actions(self):
        return [Action(tool="grep", args={"pattern": "Total budget receipts", "path_glob": "transformed/*1941*"}),
                Action(tool="read", args={"path": "transformed/treasury_bulletin_1941_01.txt", "start": 7, "limit": 6}),
                Action(tool="glob", args={"pattern": "transformed_page_level/*_1941_01_*"}),
                Action(tool="answer", args={"text": "<FINAL_ANSWER>2417 million</FINAL_ANSWER>"})]


def _spec(dirs, layers):
    return {"bridge": "officeqa", "config": {"data": dirs["csv"], "corpus": dirs["corpus"],
                                             "split_manifest": dirs["split_manifest"]}, "layers": layers}


def _template(name):
    from envh_office import qa_design

    return {t.name: t for t in (qa_design.NarrowCorpus(), qa_design.PointPages(), qa_design.RequireCitation(),
                                qa_design.HideIndex())}[name]


def test_reference_solution_through_stage_and_contract(officeqa_dirs):
    """The gold answer, reached after a staged search, under the citation contract."""
    from envh_office.qa_bridge import OfficeQAEnv

    with OfficeQAEnv(officeqa_dirs["csv"], officeqa_dirs["corpus"], officeqa_dirs["split_manifest"]) as probe:
        probe.reset(task=T3, seed=0)
        cite = _template("officeqa.require-citation").instantiate(probe, T3, 12)
    stage = {"kind": "stage", "actions": [
        {"tool": "grep", "args": {"pattern": "series B bonds: 40", "path_glob": "transformed/*"}},
        {"tool": "read", "args": {"path": "transformed/treasury_bulletin_1948_07.txt", "start": 20, "limit": 5}}]}
    with envh.make(_spec(officeqa_dirs, [stage, *cite])) as env:
        env.reset(task=T3, seed=0)
        state = env.unwrapped.get_env_state()
        assert state["docs_opened"] == ["treasury_bulletin_1948_07"] and state["grep_count"] == 1
        bare = env.step(Action(tool="answer", args={"text": f"<FINAL_ANSWER>{GOLD['UID0003']}</FINAL_ANSWER>"}))
        assert bare.info["error"]["type"] == "blocked" and not bare.terminated
        env.step(Action(tool="read", args={"path": "transformed/treasury_bulletin_1948_05.txt", "start": 20}))
        quote = '"Yield of series A bonds: 12.5 percent."'
        done = env.step(Action(tool="answer", args={"text": f"{quote} <FINAL_ANSWER>{GOLD['UID0003']}</FINAL_ANSWER>"}))
        assert done.terminated and done.reward == 1.0
        verdict = env.evaluate()
        assert verdict.success and verdict.metrics["em"] == 1.0 and verdict == env.unwrapped.evaluate()


def test_citation_must_come_from_a_read_line(officeqa_dirs):
    from envh_office.qa_bridge import OfficeQAEnv

    with OfficeQAEnv(officeqa_dirs["csv"], officeqa_dirs["corpus"], officeqa_dirs["split_manifest"]) as probe:
        probe.reset(task=T1, seed=0)
        layers = _template("officeqa.require-citation").instantiate(probe, T1, 12)
    with envh.make(_spec(officeqa_dirs, layers)) as env:
        env.reset(task=T1, seed=0)
        env.step(Action(tool="grep", args={"pattern": "Total budget receipts \\| 2417"}))  # seen by grep, not read
        made_up = env.step(Action(tool="answer", args={
            "text": '"| Total budget receipts | 2417 |" <FINAL_ANSWER>2417</FINAL_ANSWER>'}))
        assert made_up.info["error"]["type"] == "blocked"
        env.step(Action(tool="read", args={"path": "transformed/treasury_bulletin_1941_01.txt"}))
        # what the environment wrapped around the lines is not a citation
        footer = env.step(Action(tool="answer", args={
            "text": '"of transformed/treasury_bulletin_1941_01.txt; end of file" <FINAL_ANSWER>2417</FINAL_ANSWER>'}))
        assert footer.info["error"]["type"] == "blocked"
        ok = env.step(Action(tool="answer", args={
            "text": '"| Total budget receipts | 2417 |" <FINAL_ANSWER>2417</FINAL_ANSWER>'}))
        assert ok.terminated and env.evaluate().success


def test_narrow_corpus_and_hints(officeqa_dirs):
    from envh_office.qa_bridge import OfficeQAEnv

    with OfficeQAEnv(officeqa_dirs["csv"], officeqa_dirs["corpus"], officeqa_dirs["split_manifest"]) as probe:
        probe.reset(task=T3, seed=0)
        narrow = _template("officeqa.narrow-corpus")
        assert narrow.magnitudes(probe, T3) == [1]
        layers = narrow.instantiate(probe, T3, 1)
        point = _template("officeqa.point-pages")
        assert point.magnitudes(probe, T3) == [1, 2]
        layers += point.instantiate(probe, T3, 2)
    with envh.make(_spec(officeqa_dirs, layers)) as env:
        first = env.reset(task=T3, seed=0).observation.text
        assert "treasury_bulletin_1948_05, treasury_bulletin_1948_07" in first and "pages 2-4" in first
        hits = env.step(Action(tool="grep", args={"pattern": "Yield of series A", "path_glob": "**"}))
        # 2 source bulletins x (full file + page file) — not the 6 bulletins of the corpus
        assert hits.observation.data["hits"] == 4
        listed = env.step(Action(tool="glob", args={"pattern": "**"})).observation.text
        assert "1948_05" in listed and "1941" not in listed
        blocked = env.step(Action(tool="read", args={"path": "transformed/treasury_bulletin_1941_01.txt"}))
        assert blocked.info["error"]["type"] == "blocked"
        assert env.step(Action(tool="read", args={"path": "transformed/treasury_bulletin_1948_07.txt"})).info.get(
            "error") is None


def test_hide_index(officeqa_dirs):
    from envh_office.qa_bridge import OfficeQAEnv

    t_all = TaskRef(suite="officeqa", split="all", instance_id="UID0001")
    with OfficeQAEnv(officeqa_dirs["csv"], officeqa_dirs["corpus"]) as probe:
        probe.reset(task=t_all, seed=0)
        layers = _template("officeqa.hide-index").instantiate(probe, t_all, 2)
    with envh.make(_spec({**officeqa_dirs, "split_manifest": None}, layers)) as env:
        first = env.reset(task=t_all, seed=0).observation.text
        assert "Bulletin index" not in first and "1941: 01" not in first and "Question:" in first
        assert env.step(Action(tool="glob", args={"pattern": "**"})).info["error"]["type"] == "blocked"
        assert env.step(Action(tool="grep", args={"pattern": "1941"})).observation.data["hits"] > 0


def test_a_question_file_without_its_columns_is_refused_without_quoting_it(tmp_path) -> None:
    """A spec may name any file as its questions: the error names what is missing, never
    the file's first line (its content)."""
    from envh.errors import SpecError
    from envh_office.qa_data import load_questions

    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET-LINE,second\nmore\n")
    with pytest.raises(SpecError, match="lacks column") as info:
        load_questions(secret)
    assert "TOP-SECRET" not in str(info.value) and "2 field(s)" in str(info.value)
