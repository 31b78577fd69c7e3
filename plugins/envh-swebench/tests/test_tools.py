"""bash, str_replace_editor and submit against a real container, and the state they leave."""

from __future__ import annotations

from envh import Action


def bash(env, command):
    return env.step(Action(tool="bash", args={"command": command}))


def edit(env, **args):
    return env.step(Action(tool="str_replace_editor", args=args))


def test_bash_is_stateless_and_reports_exit_codes(make_env):
    env = make_env()
    env.reset()
    assert bash(env, "cd /tmp && export X=1 && pwd").observation.text.strip() == "/tmp"
    again = bash(env, 'pwd; echo "X=${X:-unset}"')
    assert again.observation.text.split() == ["/testbed", "X=unset"]
    failed = bash(env, "python3 -m pytest -q tests/test_stats.py::test_nope")
    assert failed.observation.data["exit_code"] == 4 and "[exit code: 4]" in failed.observation.text
    assert "error" not in failed.info  # a failing command is information, not a mistake
    assert not env.get_env_state()["tests_run"], "a usage error ran no tests"
    bash(env, "sed -i 's|sum(values) / len|sum(values) // len|' mathx/stats.py")
    red = bash(env, "python3 -m pytest -q tests")
    assert red.observation.data["exit_code"] == 1 and "failed" in red.observation.text
    missing = bash(env, "no-such-tool --version")
    assert missing.info["error"]["type"] == "command_not_runnable"
    state = env.get_env_state()
    assert state["tests_run"] and state["test_runs"] == 1 and state["last_test_exit_code"] == 1
    assert state["last_exit_code"] == 127 and state["last_error"]


def test_bash_timeout_and_truncation(make_env):
    env = make_env(command_timeout=1, output_limit=1000)
    env.reset()
    slow = bash(env, "echo started; sleep 30")
    assert slow.info["error"]["type"] == "timeout"
    assert "started" in slow.observation.text and "timed out after 1 s" in slow.observation.text
    big = bash(env, "seq 1 100000")
    text = big.observation.text
    assert big.observation.data["truncated_bytes"] > 500_000
    assert text.startswith("1\n2\n") and text.rstrip().endswith("100000")
    assert "bytes of output truncated" in text and len(text) < 1200


def test_editor_commands_and_undo(make_env):
    env = make_env()
    env.reset()
    view = edit(env, command="view", path="/testbed/mathx/stats.py", view_range=[11, 12])
    assert view.observation.text.splitlines()[1:] == ["    11\tdef median(values):",
                                                      '    12\t    """Middle value of a non-empty sequence."""']
    listing = edit(env, command="view", path="/testbed")
    assert "/testbed/mathx/stats.py" in listing.observation.text and ".git" not in listing.observation.text
    created = edit(env, command="create", path="docs/notes.txt", file_text="alpha\nbeta\n")
    assert "created" in created.observation.text
    assert edit(env, command="create", path="docs/notes.txt", file_text="x").info["error"]["type"] == "editor_error"
    edit(env, command="insert", path="docs/notes.txt", insert_line=1, new_str="between")
    assert bash(env, "cat docs/notes.txt").observation.text == "alpha\nbetween\nbeta\n"
    dup = edit(env, command="str_replace", path="docs/notes.txt", old_str="e", new_str="E")
    assert "Multiple occurrences" in dup.observation.text and dup.info["error"]
    absent = edit(env, command="str_replace", path="docs/notes.txt", old_str="gamma", new_str="")
    assert "did not appear verbatim" in absent.observation.text
    edit(env, command="str_replace", path="docs/notes.txt", old_str="beta", new_str="BETA")
    edit(env, command="undo_edit", path="docs/notes.txt")
    assert bash(env, "cat docs/notes.txt").observation.text == "alpha\nbetween\nbeta\n"
    edit(env, command="undo_edit", path="docs/notes.txt")
    edit(env, command="undo_edit", path="docs/notes.txt")
    assert "[exit code: 2]" in bash(env, "ls docs/notes.txt").observation.text
    assert edit(env, command="undo_edit", path="docs/notes.txt").info["error"]
    assert edit(env, command="view", path="/nope/x.py").info["error"]
    bad_range = edit(env, command="view", path="mathx/stats.py", view_range=[50, 60])
    assert "view_range" in bad_range.info["error"]["message"]
    assert "docs/notes.txt" in env.get_env_state()["files_touched"]


def test_editor_keeps_file_mode(make_env):
    env = make_env()
    env.reset()
    bash(env, "printf '#!/bin/sh\\necho one\\n' > run.sh && chmod 755 run.sh")
    edit(env, command="str_replace", path="run.sh", old_str="one", new_str="two")
    assert bash(env, "./run.sh").observation.text == "two\n"


def test_submit_captures_the_diff_and_ends_the_episode(make_env):
    env = make_env(reward_on_submit=False)
    env.reset()
    bash(env, "echo 'new file' > added.txt && sed -i 's/Middle value/The middle value/' mathx/stats.py")
    done = env.step(Action(tool="submit"))
    patch = done.observation.data["patch"]
    assert done.terminated and done.reward == 0.0
    assert "diff --git a/added.txt b/added.txt" in patch and "+The middle value" not in patch
    assert '+    """The middle value of a non-empty sequence."""' in patch
    state = env.get_env_state()
    assert state["submitted"] and state["patch_chars"] == len(patch)
    assert sorted(state["files_touched"]) == ["added.txt", "mathx/stats.py"]
    after = bash(env, "ls")
    assert after.info["error"]["type"] == "episode_over"
    assert not env.evaluate().success


def test_evaluate_before_submit_grades_the_tree_without_touching_it(make_env, fix_action):
    env = make_env()
    env.reset()
    env.step(fix_action)
    before = bash(env, "git status --porcelain").observation.text
    verdict = env.evaluate()
    assert verdict.success and verdict.metrics["submitted"] is False
    assert bash(env, "git status --porcelain").observation.text == before == " M mathx/stats.py\n"
    assert not env.get_env_state()["submitted"]


def test_submit_counts_the_files_of_the_diff_not_every_file_touched(make_env, fix_action):
    """A file edited and then restored is touched, but not in the diff: submit said
    "touching 2 file(s)" for a one-file diff."""
    env = make_env()
    env.reset()
    edit(env, command="create", path="scratch.py", file_text="print('trying')\n")
    bash(env, "rm scratch.py")
    env.step(fix_action)
    assert sorted(env.get_env_state()["files_touched"]) == ["mathx/stats.py", "scratch.py"]
    done = env.step(Action(tool="submit"))
    assert "touching 1 file(s)" in done.observation.text, done.observation.text


def test_submit_text_counts_diff_headers():
    from envh_swebench.bridge import submit_text

    two = ("diff --git a/a.py b/a.py\n--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-x\n+y\n"
           'diff --git "a/b c.py" "b/b c.py"\nnew file mode 100644\n--- /dev/null\n+++ "b/b c.py"\n'
           "@@ -0,0 +1 @@\n+diff --git a/not b/a-header\n")
    assert submit_text(two) == f"Submitted a diff of {len(two)} characters touching 2 file(s)."
    assert submit_text("").endswith("touching 0 file(s).")
