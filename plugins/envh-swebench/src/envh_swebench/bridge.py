"""SWEBenchEnv: SWE-bench behind ``envh.ActionableEnv``, one container per episode.

Tools are the SWE-agent set: ``bash`` (a fresh shell per call in the repository, with a
timeout and truncated output), ``str_replace_editor`` and ``submit``. ``submit`` captures
the diff against the base commit and ends the episode; ``evaluate`` grades that diff in
a fresh container with swebench's own parsers (see ``grading``), also after ``close()``
(the diff is captured when the container goes away).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
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

from . import runtime
from .containers import FileTooLargeError, SnapshotTooLargeError
from .editor import TOOL_PARAMETERS, Editor, EditorError
from .instances import Instance, diff_file_count, load_instances
from .state import (
    STATE_SCHEMA,
    EpisodeState,
    changed_paths,
    is_test_command,
    witnessed_call,
    witnessed_command,
    witnessed_pipe,
    witnessed_ran,
)

DIFF_PATH = "/tmp/envh_submission.diff"
MAX_DIFF_BYTES = 64 * 2**20


def submit_text(patch: str) -> str:
    """What submit says: the diff's size and how many files it changes (a file edited and
    then restored is touched but not in the diff)."""
    return f"Submitted a diff of {len(patch)} characters touching {diff_file_count(patch)} file(s)."


class DiffTooLargeError(errors.EnvhError):
    """The working tree's diff is too large to submit."""

    def __init__(self, size: int) -> None:
        super().__init__(f"The diff against the base commit holds {size} bytes, more than the "
                         f"{MAX_DIFF_BYTES} a submission may; remove large or generated files and submit again.")


NO_SPACE = "No space left on device"  # strerror(ENOSPC), as tools print it


class NoSpaceForDiffError(errors.EnvhError):
    """The episode filled the disk: the diff cannot be captured until it frees some."""

    def __init__(self) -> None:
        super().__init__("Submitting needs a little free space in /tmp to capture the diff, and the disk "
                         "limit is reached; delete files you do not need (in /tmp, build output, large "
                         "files) and submit again.")
TREE_MARK = "@@envh-tree@@"
# After each bash call: what git reports changed, then size and modification time of every
# modified or untracked file (summed), so any change by any command is seen (sed -i, an
# editor inside bash, a second edit of an already modified file) for a few milliseconds.
# Test runners' caches (__pycache__, .pytest_cache, *.pyc) are not changes: a test run
# that writes them, in a repository that does not ignore them, has edited nothing.
CACHES = r"(^|[ /])(__pycache__|\.pytest_cache)(/|$)|\.py[co]$"
TRACK = ('s="$(git status --porcelain --untracked-files=all)" || exit 1; '
         f"s=\"$(printf '%s\\n' \"$s\" | grep -v -E '{CACHES}')\"; "
         '[ -z "$s" ] || printf "%s\\n" "$s"; '
         "echo " + TREE_MARK + '; [ -z "$s" ] || '
         f"git ls-files -m -o --exclude-standard -z | grep -z -v -E '{CACHES}' "
         "| xargs -0 -r stat -c '%n %s %y' 2>/dev/null | cksum")


_WITNESS: str | None = None


def _witness_source() -> str:
    global _WITNESS
    if _WITNESS is None:
        from importlib import resources

        _WITNESS = resources.files("envh_swebench").joinpath("_witness.py").read_text()
    return _WITNESS


def _tree(post_output: str) -> tuple[str, str | None]:
    """(porcelain part, fingerprint of the working tree) from TRACK's output."""
    porcelain, mark, sums = post_output.rpartition(TREE_MARK)
    if not mark:
        return post_output, None
    return porcelain, f"{hash(porcelain)}:{sums.strip()}"


TOOLS = [
    ToolSpec(name="bash", description=(
        "Run a bash command in the repository's root directory. Each call starts a fresh "
        "shell (no state such as `cd` or variables carries over); long output is truncated."),
        parameters={"type": "object", "properties": {
            "command": {"type": "string", "description": "the bash command to run"}},
            "required": ["command"], "additionalProperties": False}),
    ToolSpec(name="str_replace_editor", description=(
        "View, create and edit files: `view` a file (with line numbers) or directory, "
        "`create` a new file, `str_replace` an exact unique snippet, `insert` text after a "
        "line, `undo_edit` the last edit of a file."), parameters=TOOL_PARAMETERS),
    ToolSpec(name="submit", description="Submit the current changes as your solution; ends the episode."),
]


class SWEBenchEnv(Bridge):
    """SWE-bench tasks as tool-calling episodes in Docker containers."""

    name = "swebench"

    def __init__(self, instances: str | list[dict[str, Any]] | None = None, *, split: str = "test",
                 docker_url: str | None = None, image_namespace: str | None = None,
                 workdir: str = "/testbed", cpus: float = 1.0, memory: str = "2g", pids: int = 512,
                 network: bool = False, command_timeout: float = 120.0, eval_timeout: float = 1800.0,
                 output_limit: int = 16_000, reward_on_submit: bool = True, snapshot: bool = False,
                 command_prefix: str | None = None, track_files: bool = True, disk: str | None = "4g",
                 disk_mode: str = "auto", scratch: str = "512m", shm: str | None = "64m",
                 eval_cpus: float | None = None, eval_memory: str | None = None,
                 eval_pids: int | None = 4096, eval_sys_admin: bool = False,
                 max_snapshots: int = 4, keep_snapshots: bool = False) -> None:
        if instances is None:
            raise errors.SpecError("The swebench bridge needs instances: a .json/.jsonl/.parquet "
                                   "path, 'hf://NAME@SPLIT', or a list of instance rows.")
        self.source = str(instances) if isinstance(instances, (str, Path)) else "<rows>"
        self.instances: dict[str, Instance] = load_instances(
            instances, namespace=image_namespace, workdir=workdir)
        self.split, self.docker_url = split, docker_url
        # a malformed size or mode fails here, not at reset
        self.limits = runtime.Limits(cpus=cpus, memory=memory, pids=pids, network=network, disk=disk,
                                     disk_mode=disk_mode, scratch=scratch, shm=shm)
        # Evaluation as run_instance (root, Docker's default capabilities, no cpu/memory
        # limits unless configured), except: the patch under test is the policy's code, so
        # SYS_ADMIN (run_instance adds it for browser sandboxes) only on request, since with
        # it root can mount the host's cgroup v1 hierarchies, release_agent included; and a
        # pids bound, so a fork bomb in the patch stops in its container.
        self.eval_limits = runtime.Limits(cpus=eval_cpus, memory=eval_memory, pids=eval_pids, network=network,
                                          disk=None, hardened=False,
                                          cap_add=("SYS_ADMIN",) if eval_sys_admin else ())
        self.max_snapshots, self.keep_snapshots = max_snapshots, keep_snapshots
        self._snapshots: list[str] = []
        self._tree: str | None = None
        self._over_disk = False  # the last step left the writable layer over `disk`
        self.command_timeout, self.eval_timeout, self.output_limit = command_timeout, eval_timeout, output_limit
        self.reward_on_submit, self.snapshot, self.track_files = reward_on_submit, snapshot, track_files
        self.command_prefix_config = command_prefix
        self.command_prefix = command_prefix or ""
        self._prefixes: dict[str, str] = {}  # image -> detected prefix
        self.box: runtime.Sandbox | None = None
        self.editor: Editor | None = None
        self.inst: Instance | None = None
        self.state: EpisodeState | None = None
        self.patch: str | None = None
        self._last: Observation | None = None
        self._verdicts: dict[str | None, EvaluationResult] = {}
        self._restore: dict[str, Any] | None = None
        self.timings: dict[str, float] = {}
        self._disposing: list[threading.Thread] = []

    # -- tasks ------------------------------------------------------------------------
    def tools(self) -> list[ToolSpec]:
        return TOOLS

    def list_tasks(self, split: str | None = None) -> list[TaskRef]:
        if split is not None and split != self.split:
            return []
        return [TaskRef(suite="swebench", split=self.split, instance_id=i, group=self.instances[i].repo)
                for i in sorted(self.instances)]

    def _instance(self, task: TaskRef | None) -> Instance:
        if task is None:
            return self.instances[min(self.instances)]
        try:
            return self.instances[task.instance_id]
        except KeyError:
            raise errors.UnknownNameError("SWE-bench instance", task.instance_id, list(self.instances)) from None

    # -- episode ----------------------------------------------------------------------
    def _reset(self, task: TaskRef | None, seed: int | None, options: dict[str, Any]) -> ResetResult:
        if self.box is not None:  # the last episode's container goes away in the background
            self._disposing = [t for t in self._disposing if t.is_alive()]
            self._disposing.append(runtime.dispose(self.box))
            self.box = None
        inst = self.inst = self._instance(task)
        self._over_disk = False
        client = runtime.client(self.docker_url)
        restore, self._restore = self._restore, None
        t0 = time.perf_counter()
        self.box = runtime.Sandbox.start(client, restore["image"] if restore else inst.image,
                                         workdir=inst.workdir, limits=self.limits, instance_id=inst.instance_id)
        runtime.track(self.box)
        if self.command_prefix_config is None and inst.activation:  # as the eval script does
            self.command_prefix = inst.command_prefix()
        elif self.command_prefix_config is None:  # SWE-bench images keep the repo's env in conda
            if inst.image not in self._prefixes:
                probe = self.box.run("test -f /opt/miniconda3/bin/activate", timeout=30, limit=100)
                self._prefixes[inst.image] = ("source /opt/miniconda3/bin/activate testbed >/dev/null 2>&1; "
                                              if probe["exit_code"] == 0 else "")
            self.command_prefix = self._prefixes[inst.image]
        self.timings = {"start_to_first_observation": time.perf_counter() - t0}
        self.editor = Editor(self.box, view_limit=self.output_limit)
        self._tree = self._fingerprint(self.box) if self.track_files else None
        self.state = EpisodeState(instance_id=inst.instance_id, repo=inst.repo,
                                  problem_statement=inst.problem_statement, workdir=inst.workdir)
        self.patch, self._verdicts = None, {}
        if restore:
            self.state = EpisodeState.from_json(restore["env_state"])
            self.editor.history = {k: list(v) for k, v in restore["editor_history"].items()}
            self.patch = restore["patch"]
        self._last = Observation(
            text=(f"{inst.problem_statement.rstrip()}\n\nThe repository {inst.repo} is checked out at "
                  f"{inst.workdir}. Fix the issue above with the bash and str_replace_editor tools, "
                  "then call submit."),
            data={"instance_id": inst.instance_id, "repo": inst.repo, "workdir": inst.workdir})
        if restore:
            self._last = Observation(text=restore["observation"]["text"], data=restore["observation"]["data"])
        return ResetResult(observation=self._last, info={"task": f"swebench/{self.split}/{inst.instance_id}",
                                                         "image": inst.image, **self.timings})

    def _fingerprint(self, box: runtime.Sandbox) -> str | None:
        res = box.run(TRACK, timeout=120, limit=1_000_000)
        return _tree(res["output"])[1] if res["exit_code"] == 0 else None

    def _live(self) -> tuple[runtime.Sandbox, Editor, EpisodeState, Instance]:
        if self.box is None or self.editor is None or self.state is None or self.inst is None:
            raise errors.EnvhError("SWEBenchEnv.step() called before reset() or after close()")
        return self.box, self.editor, self.state, self.inst

    def _step(self, action: Action) -> EnvResponse:
        box, editor, state, inst = self._live()
        if state.submitted:
            return self.error_response("The episode is over: submit() was already called.", kind="episode_over")
        if action.tool == "bash":
            return self._bash(box, state, inst, action.args["command"])
        if action.tool == "str_replace_editor":
            label = f"str_replace_editor {action.args['command']} {action.args['path']}"
            try:
                text, written = editor(action.args)
            except EditorError as exc:
                state.record(action.tool, command=label, output=str(exc), error=str(exc))
                return self._respond(self.error_response(str(exc), kind="editor_error"))
            if written:
                state.touch([written])
                state.edited()
                if self.track_files:
                    self._tree = self._fingerprint(box)
            state.record(action.tool, command=label, output=text)
            return self._respond(EnvResponse(observation=Observation(text=text, data={"path": editor.resolve(action.args["path"])})))
        return self._submit(box, state, inst)

    def _bash(self, box: runtime.Sandbox, state: EpisodeState, inst: Instance, command: str) -> EnvResponse:
        # Over the disk bound, a command may shrink files and delete them but grow none
        # (a file of at most one byte): the bound is kept, not only reported.
        # A plain test invocation is run by the bridge itself, under the witness: whether
        # tests ran is what the witness reports, never what the output says (see state).
        call = witnessed_call(command, inst.workdir)
        if call is None:
            run = f"{self.command_prefix}{command}"
        else:  # the environment's activation runs without the key (stdin) or the witness's pipe (fd 63),
            # and without the user site: conda's activate evals what a python program prints
            prefix = self.command_prefix.strip().rstrip(";")
            run = ('envh_u="${PYTHONNOUSERSITE+set}"; export PYTHONNOUSERSITE=1; '
                   + (f"{{ {prefix}; }} </dev/null 63>&-; " if prefix else "")
                   + '[ -n "$envh_u" ] || unset PYTHONNOUSERSITE; '
                   + witnessed_command(call, _witness_source()))
        res = box.run(run, timeout=self.command_timeout, limit=self.output_limit,
                      post=TRACK if self.track_files else None, fsize=1 if self._over_disk else None,
                      witness=call is not None)
        code, output = res["exit_code"], res["output"] or ""
        if call is not None and call.pipe is not None:  # `| tail -n N`: the pipeline's status is tail's
            output, code = witnessed_pipe(call, output), 0 if not res["timed_out"] else code
        text = output or "(no output)\n"
        if call is None and is_test_command(command, inst.test_cmd):  # say which form is recorded
            text += ("\n[not recorded as a test run: a test command is recorded when it is run on its own, "
                     "e.g. `python -m pytest tests/test_x.py`, optionally with `cd DIR && ` before it and "
                     "`2>&1 | tail -n 50` after it]")
        if res["timed_out"]:
            text += f"\n[command timed out after {self.command_timeout:g} s and was killed]"
        elif code:
            text += f"\n[exit code: {code}]"
        # A witnessed command is only the test run: a change to the working tree it made
        # (a test or conftest rewriting the code) came during or after the tests, so it is
        # an edit after them ("tests after the last edit" must not hold for it).
        if call is not None and witnessed_ran(res.get("witness"), res["exit_code"], res["timed_out"]):
            state.tested(command, res["exit_code"])
        if res.get("post_output"):
            porcelain, tree = _tree(res["post_output"])
            state.touch(changed_paths(porcelain))
            if tree and tree != self._tree:
                state.edited()
            self._tree = tree or self._tree
        # A non-zero exit is information (a failing test run is useful), not a mistake;
        # a command that could not run or ran out of time is the policy's error.
        error = None
        if res["timed_out"]:
            error = {"type": "timeout", "message": f"command timed out after {self.command_timeout:g} s"}
        elif res.get("runner_killed"):
            error = {"type": "runner_killed", "message": "the command killed the environment's command runner"}
        elif code in (126, 127):
            error = {"type": "command_not_runnable", "message": f"exit code {code}: command not found or not executable"}
        used = box.disk_used() if box.disk_mode == "check" else None
        self._over_disk = bool(used and self.limits.disk_bytes and used > self.limits.disk_bytes)
        if box.disk_mode in ("tmpfs", "storage-opt") and NO_SPACE in (res["output"] or ""):
            where = (f"the repository ({self.limits.disk}) or a scratch place, /tmp, /root or /var/tmp "
                     f"({self.limits.scratch} each), /dev/shm ({self.limits.shm or '64m'}) or /dev (64m)"
                     ) if box.disk_mode == "tmpfs" else f"the container ({self.limits.disk}) or /dev/shm"
            text += (f"\n[disk limit: a write failed because {where} is full; delete what you do not "
                     "need (build output, caches, large files) and go on]")
            error = {"type": "disk_limit", "message": f"no space left: the disk limit of {where} was reached"}
        if self._over_disk:
            text += (f"\n[disk limit: the container's files grew by {used} bytes, over the {self.limits.disk} "
                     "allowed; no file can grow until you delete what you do not need]")
            error = {"type": "disk_limit", "message": f"the container's writable layer holds {used} bytes, "
                                                      f"over the {self.limits.disk} limit"}
        state.record("bash", command=command, exit_code=code, output=text,
                     error=error["message"] if error else None)
        data = {"exit_code": code, "timed_out": res["timed_out"], "truncated_bytes": res["dropped"]}
        info: dict[str, Any] = {"exit_code": code}
        if error:
            info["error"] = error
        return self._respond(EnvResponse(observation=Observation(text=text, data=data), info=info))

    def _diff(self, box: runtime.Sandbox, inst: Instance, *, make_room: bool = False) -> str:
        """The working tree against the base commit, new files included. Staged through a
        scratch index, so neither submit nor evaluate changes what `git status` shows.
        Both need room in /tmp: when the episode filled it, NoSpaceForDiffError, or with
        ``make_room`` (the episode is over) /tmp is emptied and it retries."""
        capture = ('idx="$(mktemp)" && { cp "$(git rev-parse --git-dir)/index" "$idx" 2>/dev/null; '
                   'GIT_INDEX_FILE="$idx" git add -A && GIT_INDEX_FILE="$idx" git -c core.fileMode=false '
                   f'diff --cached --binary {inst.base_commit} > {DIFF_PATH}; }}; code=$?; rm -f "$idx"; exit $code')
        res = box.run(capture, timeout=120, limit=20_000)
        if res["exit_code"] != 0 and self._disk_full(box, res["output"]):
            if not make_room:
                raise NoSpaceForDiffError()
            box.run("find /tmp -xdev -mindepth 1 -delete 2>/dev/null; true", timeout=120, limit=1000)
            res = box.run(capture, timeout=120, limit=20_000)
        if res["exit_code"] != 0:
            raise box.infra_error(f"capturing the diff failed: {res['output'][-500:]}")
        try:  # read back whole: a diff cut in the middle would grade a different patch
            raw, _ = box.read_file(DIFF_PATH, max_bytes=MAX_DIFF_BYTES)
        except FileTooLargeError as exc:
            raise DiffTooLargeError(exc.size) from None
        except FileNotFoundError:
            raise box.infra_error("capturing the diff failed: no diff file") from None
        box.run(f"rm -f {DIFF_PATH}", timeout=30, limit=1000)
        return raw.decode("utf-8", "replace")

    def _disk_full(self, box: runtime.Sandbox, output: str) -> bool:
        """Did a failed bookkeeping command fail for want of space the episode used up?"""
        if not self.limits.disk_bytes:
            return False
        if NO_SPACE in output or "smaller than expected" in output:
            return True
        free = box.run("df -Pk /tmp | awk 'NR == 2 { print $4 }'", timeout=30, limit=200)
        return free["exit_code"] == 0 and free["output"].strip().isdigit() and int(free["output"]) < 8192

    def _submit(self, box: runtime.Sandbox, state: EpisodeState, inst: Instance) -> EnvResponse:
        try:
            self.patch = self._diff(box, inst)
        except DiffTooLargeError as exc:
            state.record("submit", output=str(exc), error=str(exc))
            return self._respond(self.error_response(str(exc), kind="diff_too_large"))
        except NoSpaceForDiffError as exc:
            state.record("submit", output=str(exc), error=str(exc))
            return self._respond(self.error_response(str(exc), kind="disk_limit"))
        state.submitted, state.patch_chars = True, len(self.patch)
        text = submit_text(self.patch)
        state.record("submit", output=text)
        reward = self.evaluate().score if self.reward_on_submit else 0.0
        return self._respond(EnvResponse(observation=Observation(text=text, data={"patch": self.patch}),
                                         reward=reward, terminated=True))

    def _respond(self, resp: EnvResponse) -> EnvResponse:
        self._last = resp.observation
        return resp

    def observe(self) -> Observation:
        if self._last is None:
            raise errors.EnvhError("SWEBenchEnv.observe() called before reset()")
        return self._last

    # -- verifier and state -----------------------------------------------------------
    def evaluate(self) -> EvaluationResult:
        """Grade the submitted diff, or (before submit) the working tree's current diff,
        as SWE-agent submits on exit. Cached per diff."""
        state, inst = self.state, self.inst
        if state is None or inst is None:
            raise errors.EnvhError("SWEBenchEnv.evaluate() called before reset()")
        if state.submitted or self.box is None:  # after close(): the diff captured then
            patch = self.patch
        else:
            patch = self._diff(self.box, inst, make_room=True)
        if patch is None:
            raise errors.EnvhError("SWEBenchEnv.evaluate(): the episode's container is gone and no diff was captured")
        if patch not in self._verdicts:
            from .grading import grade
            verdict = grade(runtime.client(self.docker_url), inst, patch,
                            limits=self.eval_limits, timeout=self.eval_timeout)
            self._verdicts[patch] = EvaluationResult(
                success=verdict.success, score=verdict.score,
                metrics={**verdict.metrics, "submitted": state.submitted})
        return self._verdicts[patch]

    def reference_actions(self) -> list[Action] | None:
        """The gold patch, applied with the bash tool, then submit (see ``reference.py``)."""
        from .reference import gold_patch_actions

        return gold_patch_actions(self)

    def get_env_state(self) -> dict[str, Any]:
        if self.state is None:
            raise errors.EnvhError("SWEBenchEnv.get_env_state() called before reset()")
        return self.state.to_json()

    def env_state_schema(self) -> dict[str, Any]:
        return STATE_SCHEMA

    def save_state(self) -> dict[str, Any]:
        """The replay form (task, seed, actions); with ``snapshot=True`` also a
        ``docker commit`` of the container, which ``from_state`` starts from directly."""
        saved = super().save_state()
        if self.snapshot and self.box is not None and self.state is not None and self._last is not None:
            try:
                image = self.box.commit(max_bytes=self.limits.disk_bytes)
            except SnapshotTooLargeError as exc:  # the replay form still restores it
                saved["snapshot_skipped"] = str(exc)
                return saved
            self._snapshots.append(image)
            self._gc_snapshots(keep=self.max_snapshots)
            saved["snapshot"] = {
                "image": image, "env_state": self.state.to_json(), "patch": self.patch,
                "editor_history": {k: list(v) for k, v in (self.editor.history if self.editor else {}).items()},
                "observation": {"text": self._last.text, "data": dict(self._last.data)}}
        return saved

    def from_state(self, state: Mapping[str, Any]) -> Observation:
        snap = state.get("snapshot")
        if not isinstance(snap, Mapping) or not runtime.is_snapshot(runtime.client(self.docker_url), snap.get("image")):
            return super().from_state(state)  # replay, the default (also for an image we did not make)
        self._restore = dict(snap)
        task = TaskRef(**state["task"]) if state.get("task") else None
        self.reset(task=task, seed=state.get("seed"), options=state.get("options"))
        assert self._episode is not None
        self._episode["actions"] = [Action(tool=a["tool"], args=dict(a.get("args") or {}))
                                    for a in state.get("actions", [])]
        self._episode["mark"] = state.get("replay_mark")
        return self.observe()

    def _gc_snapshots(self, keep: int) -> None:
        """Remove this env's oldest snapshot images beyond ``keep`` (a state whose image
        is gone restores by replay)."""
        client = runtime.client(self.docker_url)
        drop, self._snapshots = self._snapshots[:len(self._snapshots) - keep], self._snapshots[len(self._snapshots) - keep:]
        for image in reversed(drop):  # children before the parents they were committed from
            runtime.remove_image(client, image)

    def _close_box(self) -> None:
        if self.box is not None:
            box = self.box
            if self.inst is not None and self.state is not None and not self.state.submitted:
                try:  # evaluate() after close() grades what the episode left
                    self.patch = self._diff(box, self.inst, make_room=True)
                except errors.EnvhError:  # a dead container, or a diff too large to grade
                    self.patch = None
            self.box = None
            runtime.untrack(box)
            box.close()

    def close(self) -> None:
        self._close_box()
        if self._snapshots and not self.keep_snapshots:
            self._gc_snapshots(keep=0)
        for thread in self._disposing:
            thread.join()
        self._disposing = []
