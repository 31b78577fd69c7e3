"""An official-schema row graded in Docker end to end, on an image whose tests need an
environment that only the eval script's activation line provides (as SWE-bench's conda
``testbed`` env): the row's eval script is used verbatim, and episodes run in the same
environment."""

from __future__ import annotations

import json
from pathlib import Path

from envh import Action
from envh_swebench.containers import Limits
from envh_swebench.grading import grade
from envh_swebench.instances import Instance, load_instances


def test_gold_resolves_and_empty_does_not(env_instances_path, docker_client):
    inst = load_instances(env_instances_path)["envh__mathx-2"]
    assert inst.grading == "dataset" and inst.activation == ("source /opt/envh-env/bin/activate",)
    gold = grade(docker_client, inst, inst.patch, limits=Limits(), timeout=120)
    assert gold.success, gold.metrics
    assert gold.metrics["FAIL_TO_PASS"]["success"] == ["tests/test_stats.py::test_median_even_kit"]
    empty = grade(docker_client, inst, "", limits=Limits(), timeout=120)
    assert not empty.success and empty.metrics["FAIL_TO_PASS"]["failure"] == inst.fail_to_pass
    assert empty.metrics["pass_to_pass_rate"] == 1.0


def test_without_activation_the_tests_cannot_pass(env_instances_path, docker_client):
    """The activation line is load-bearing: drop it and the gold patch no longer resolves."""
    row = json.loads(Path(env_instances_path).read_text())[0]
    row["eval_script"] = row["eval_script"].replace("source /opt/envh-env/bin/activate\n", "")
    inst = Instance.from_row(row)
    assert inst.activation == ()
    assert not grade(docker_client, inst, inst.patch, limits=Limits(), timeout=120).success


def test_episodes_run_in_the_activated_environment(env_instances_path):
    from envh_swebench.bridge import SWEBenchEnv

    env = SWEBenchEnv(env_instances_path, reward_on_submit=False)
    try:
        env.reset()
        probe = env.step(Action(tool="bash", args={"command": 'python3 -c "import mathx_testkit; print(1)"; echo $ENVH_ENV'}))
        assert probe.observation.text.split() == ["1", "/opt/envh-env"]
    finally:
        env.close()
