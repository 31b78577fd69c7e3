"""Solvability on SWE-bench (envh-rigger + envh-swebench, real Docker containers).

The reference is the instance's gold patch, applied through the bridge's bash tool and
submitted; the sealed grader in a fresh container gives the verdict. A candidate that
rewrites every bash command into a no-op leaves the gold patch unapplied: the cascade
rejects it as unsolvable. One that only truncates output leaves it solvable.
"""

from __future__ import annotations

import os
from pathlib import Path

import envh
import pytest

INSTANCES = Path(__file__).resolve().parents[1] / "plugins/envh-swebench/tests/images/mathx/instances.json"
NEUTER_BASH = '''
def filter_action(action, state, memo):
    if action.tool == "bash":
        return Action(tool="bash", args={"command": "true"})
    return None
'''
SHORT_OUTPUT = '''
def filter_observation(observation, state, memo):
    return Observation(text=observation.text[:200], data=observation.data)
'''


@pytest.fixture(scope="module")
def spec():
    pytest.importorskip("envh_swebench")
    try:
        from envh_swebench import runtime
        from envh_swebench.instances import load_instances

        client = runtime.client()
        for inst in load_instances(str(INSTANCES)).values():
            if not runtime.image_exists(client, inst.image):
                raise RuntimeError(f"image {inst.image} is not built")
    except Exception as exc:  # noqa: BLE001
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"Docker and the mathx image are required under CI: {exc!r}", pytrace=False)
        pytest.skip(f"Docker unavailable: {exc!r}")
    from envh.hostpaths import granted

    with granted(INSTANCES):  # the caller's data (--data), for every spec the tests build on it
        yield {"bridge": "swebench", "config": {"instances": str(INSTANCES)}}


@pytest.mark.slow
def test_gold_patch_is_the_reference_and_a_candidate_breaking_it_is_rejected(spec):
    from envh_rigger import cascade

    registry = envh.get_registry()
    task = envh.TaskRef(suite="swebench", split="test", instance_id="envh__mathx-1")
    with envh.make(spec) as env:
        env.reset(task=task, seed=0)
        plan = cascade.reference_of(env)
        assert plan is not None and [a.tool for a in plan] == ["bash", "submit"]
    broken = cascade.check(spec, [{"kind": "contract", "id": "neuter", "code": NEUTER_BASH}], task,
                           registry=registry)
    assert not broken.ok and broken.stage == "unsolvable", broken
    fine = cascade.check(spec, [{"kind": "contract", "id": "short", "code": SHORT_OUTPUT}], task,
                         registry=registry, seeds=[0])  # a container and a grading run per seed
    assert fine.ok and fine.reference.startswith("replayed"), fine


BREAK_PACKAGE = 'printf "raise ImportError(\\"staged\\")\\n" >> mathx/__init__.py'
HALF_FIX = "sed -i 's|return ordered\\[len(ordered) // 2\\]|return ordered[0]  # staged|' mathx/stats.py"


def _stage(command):
    return {"kind": "stage", "actions": [{"tool": "bash", "args": {"command": command}}]}


@pytest.mark.slow
def test_a_staged_state_has_the_gold_patch_as_its_reference(spec):
    """A stage (a new start state) had no reference: such candidates fell back to the probe.
    The gold patch is now applied on the staged tree. A stage that edits the file the gold
    patch changes leaves it solvable (that file goes back to the base commit first); one that
    breaks the package the tests import is rejected by the replayed reference."""
    from envh_rigger import cascade

    registry = envh.get_registry()
    task = envh.TaskRef(suite="swebench", split="test", instance_id="envh__mathx-1")
    with envh.make({**spec, "layers": [_stage(HALF_FIX)]}) as env:
        env.reset(task=task, seed=0)
        plan = cascade.reference_of(env)
        assert plan is not None and [a.tool for a in plan] == ["bash", "submit"]
    edited = cascade.check(spec, [_stage(HALF_FIX)], task, registry=registry, seeds=[0])
    assert edited.ok and edited.reference.startswith("replayed"), edited
    broken = cascade.check(spec, [_stage(BREAK_PACKAGE)], task, registry=registry, seeds=[0])
    assert not broken.ok and broken.stage == "unsolvable" and broken.reference.startswith("replayed"), broken


def test_the_gold_patch_paths_restored_before_applying_it_on_a_staged_tree():
    """Changed and deleted files come back from the base commit, created ones (a rename's
    target too) are removed first; paths with spaces are quoted for the shell."""
    pytest.importorskip("envh_swebench")
    from envh_swebench.reference import apply_command, gold_paths

    patch = ("diff --git a/pkg/a.py b/pkg/a.py\n--- a/pkg/a.py\n+++ b/pkg/a.py\n@@ -1 +1 @@\n-x\n+y\n"
             "diff --git a/gone.py b/gone.py\ndeleted file mode 100644\n--- a/gone.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-z\n"
             "diff --git a/new file.py b/new file.py\nnew file mode 100644\n--- /dev/null\n+++ b/new file.py\t\n"
             "@@ -0,0 +1 @@\n+n\n"
             "diff --git a/old.py b/moved.py\n--- a/old.py\n+++ b/moved.py\n@@ -1 +1 @@\n-o\n+m\n")
    assert gold_paths(patch) == (["pkg/a.py", "gone.py", "old.py"], ["new file.py", "moved.py"])
    command = apply_command(patch, "abc123")
    assert "rm -rf -- 'new file.py' moved.py" in command and "git checkout abc123 -- pkg/a.py gone.py old.py" in command
    assert command.endswith("status=$?; rm -f /tmp/envh_gold.diff; exit $status")  # no gold patch left behind
    # a pure rename has no ---/+++ lines; git C-quotes unusual paths
    assert gold_paths("diff --git a/src/old.py b/src/new.py\nsimilarity index 100%\nrename from src/old.py\n"
                      "rename to src/new.py\n") == (["src/old.py"], ["src/new.py"])
    quoted = '--- "a/src/sp\\303\\251.py"\n+++ "b/src/sp\\303\\251.py"\n@@ -1 +1 @@\n-a\n+b\n'
    assert gold_paths(quoted) == (["src/sp\u00e9.py"], [])
