"""Review of "Containment v3: secure by default": attacks through the public API with the
default settings (no ``trust`` argument, no ``--trust-code``).

Plain tests are attacks that are held. Tests marked ``xfail(strict=True)`` demonstrate a
hole: they assert the secure behaviour and fail today; each reason names the cause.
Risky payloads (hangs in one C call, infinite loops) run in a subprocess with a timeout.
"""

from __future__ import annotations

import ast
import gc
import http.server
import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import envh
import pytest
from envh import errors
from envh.components.contract import CodeContract
from envh.errors import SpecError
from envh.jail import bwrap_path, process, stacks

pytestmark = pytest.mark.skipif(bwrap_path() is None and os.geteuid() == 0 and not os.environ.get("CI"),
                                reason="the jail needs bubblewrap as root (dev/setup.d/jail.sh)")

REPO = Path(__file__).resolve().parents[2]
UPPER = "def filter_observation(observation, state, memo):\n    return observation.text.upper()\n"


def _contract(code: str = UPPER, **layer: object) -> dict[str, object]:
    return {"kind": "contract", "code": code, **layer}


def _spec(*layers: dict[str, object], **top: object) -> dict[str, object]:
    return {"bridge": "toy24", "layers": list(layers), **top}


def _code_contracts(env: object) -> list[CodeContract]:
    """Every CodeContract of a stack, chain legs included."""
    found: list[CodeContract] = []
    todo = [env]
    while todo:
        layer = todo.pop()
        if isinstance(layer, CodeContract):
            found.append(layer)
        legs = vars(layer).get("legs") if hasattr(layer, "__dict__") else None
        if legs:
            todo.extend(legs[1:])
        inner = getattr(layer, "inner", None)
        if inner is not None:
            todo.append(inner)
    return found


def _python(code: str, timeout: float) -> subprocess.CompletedProcess[str] | None:
    """Run ``code`` in a fresh interpreter of this venv; ``None`` when it ran past ``timeout``."""
    try:
        return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                              timeout=timeout, cwd=str(REPO))
    except subprocess.TimeoutExpired:
        return None


# ==============================================================================================
# Held: a spec cannot raise its own tier, anywhere it can say so
# ==============================================================================================
def test_trust_trusted_on_spec_layer_and_chain_legs_stays_jailed() -> None:
    leg = _spec(_contract(trust="trusted"), trust="trusted")
    spec = _spec(_contract(trust="trusted"), {"kind": "chain", "legs": [leg, leg]}, trust="trusted")
    with envh.make(spec) as env:
        contracts = _code_contracts(env)
        assert len(contracts) == 3
        assert all(c.trust == "untrusted" and c.sandbox is None for c in contracts)


def test_a_chain_leg_marked_untrusted_lowers_a_trusted_call() -> None:
    leg = _spec(_contract(), trust="untrusted")
    with envh.make(_spec(_contract(), {"kind": "chain", "legs": [leg]}), trust="trusted") as env:
        tiers = sorted(c.trust for c in _code_contracts(env))
    assert tiers == ["trusted", "untrusted"]


@pytest.mark.parametrize("cls", [
    "envh_example.alias:envh.components.contract.CodeContract",     # re-export through `import envh`
    "envh_example.alias:envh.components.chain.Chain",
    "envh_example.alias:EnvHarness",                                # envh class imported by a plugin
    "envh_rigger.guidance:GuideContract.__base__",                  # dunder traversal to envh's base
    "envh_rigger.guidance:GuideContract.__mro__",
    "envh_example.alias:Alias.__subclasses__",
    "envh_rigger.skills:SkilledPolicy",                             # a plugin class, not a harness
    "envh_example.alias :Alias", "envh_example..alias:Alias", " envh_example.alias:Alias",
    "envh_\u0435xample.alias:Alias",                                # Cyrillic 'e'
    "envh:components.contract.CodeContract", "envh.components.contract:CodeContract",
    "os:system", "builtins:object", "__main__:X", "envh_example.alias:__builtins__",
])
def test_cls_paths_cannot_reach_code_that_takes_a_tier(cls: str) -> None:
    spec = _spec({"kind": "contract", "cls": cls,
                  "config": {"code": "def filter_action(a, s, m):\n    return None\n", "trust": "trusted"}})
    with pytest.raises((SpecError, errors.PluginError)):
        envh.make(spec)


def test_cls_lookalike_packages_are_refused_before_import(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    marker = tmp_path / "imported"
    body = f"open({str(marker)!r}, 'w').close()\nfrom envh import EnvHarness\nclass X(EnvHarness):\n    pass\n"
    for name in ("envh_examplex", "envh_example_evil", "envh_rigger2"):
        (tmp_path / f"{name}.py").write_text(body)
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("envh_examplex", "envh_example_evil", "envh_rigger2"):
        with pytest.raises(SpecError, match="not a contract class of an installed plugin"):
            envh.make(_spec({"kind": "contract", "cls": f"{name}:X"}))
    assert not marker.exists()


def test_envs_dropped_without_close_end_their_jail_processes() -> None:
    gc.collect()
    before = len(process._live)
    for i in range(3):
        env = envh.make(_spec(_contract(UPPER + f"# plain {i}\n")))
        env.reset(task=env.list_tasks()[0], seed=0)
        del env
    leg = _spec(_contract(UPPER + "# leg\n"))
    env = envh.make(_spec(_contract(UPPER + "# chain\n"), {"kind": "chain", "legs": [leg, leg]}))
    del env
    gc.collect()
    assert len(process._live) == before


# -- rollout, gym, playground: the tier comes from the caller only -------------------------------
TRUSTING_SPEC = _spec(_contract(trust="trusted"), trust="trusted")


def test_a_plan_and_a_warm_worker_ignore_the_specs_own_trust() -> None:
    from envh.rollout import plan
    from envh.rollout.warm import Warm

    reg = envh.get_registry()
    requests = plan.build_plan(TRUSTING_SPEC, policy="random", tasks=[None], registry=reg)
    assert requests and all(r.trust == "untrusted" for r in requests)
    warm = Warm(reg)
    try:
        env = warm.env(requests[0].spec_id, requests[0].spec)
        assert [c.trust for c in _code_contracts(env)] == ["untrusted"]
    finally:
        warm.close()


def test_gym_envs_are_jailed_whatever_the_spec_says() -> None:
    import gymnasium
    from envh import gym as envh_gym

    ids = envh_gym.register_envs()
    try:
        env = gymnasium.make("envh/toy24", spec=TRUSTING_SPEC)
        try:
            assert [c.trust for c in _code_contracts(env.unwrapped.env)] == ["untrusted"]
        finally:
            env.close()
    finally:  # gymnasium's registry is process-wide: test_gym counts what it registers itself
        for env_id in ids:
            del gymnasium.registry[env_id]


def test_no_plugin_raises_the_tier_of_spec_data() -> None:
    """Every call in the plugins' sources that passes ``trust=`` passes the literal
    'untrusted', none builds a CodeContract or a Sandbox, and a code check (envh-ui's
    playground) names the untrusted tier."""
    offenders = []
    for path in sorted(REPO.glob("plugins/*/src/**/*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
            if name in ("CodeContract", "Sandbox"):
                offenders.append(f"{path}:{node.lineno} {name}(...)")
            if name == "check_contract_code" and not any(  # the playground checks code: jailed only
                    kw.arg == "trust" and isinstance(kw.value, ast.Constant) and kw.value.value == "untrusted"
                    for kw in node.keywords):
                offenders.append(f"{path}:{node.lineno} {name}(...) without trust='untrusted'")
            for kw in node.keywords:
                if kw.arg in ("trust", "trust_code") and not (
                        isinstance(kw.value, ast.Constant) and kw.value.value in ("untrusted", False, None)):
                    offenders.append(f"{path}:{node.lineno} {name}({kw.arg}=...)")
                if kw.arg is None:  # **kwargs into make: could carry a tier
                    if name == "make":
                        offenders.append(f"{path}:{node.lineno} make(**...)")
    assert not offenders, offenders


# ==============================================================================================
# Holes
# ==============================================================================================
GUIDE_HANG = {"kind": "contract", "cls": "envh_rigger.guidance:GuideContract",
              "config": {"rate": 1.0, "focus": {"pattern": "(.|.)*Z"}}}


def test_a_plugin_contract_class_option_cannot_hang_the_host() -> None:
    done = _python(f"""
        import envh
        from envh import Action
        env = envh.make({_spec(GUIDE_HANG)!r})
        env.reset(task=env.list_tasks()[0], seed=0)
        env.step(Action(tool="combine", args={{"i": 0, "j": 1, "op": "add"}}))
        print("stepped")
        """, timeout=8)
    # GuideContract compiles its focus pattern with stdlib ``re`` in this process: a pattern
    # that could backtrack catastrophically ('(.|.)*Z' on a 29-character action) is refused
    assert done is not None, "the host process hung in GuideContract's regex"
    assert "stepped" in done.stdout or ("SpecError" in done.stderr and "backtrack" in done.stderr), done.stderr[-2000:]


def test_bridge_config_cannot_loop_the_host_forever() -> None:
    done = _python("""
        import envh
        env = envh.make({"bridge": "toy24", "config": {"n_generated": 5000}})
        try:
            env.list_tasks("generated")
        except Exception as exc:
            print("refused", type(exc).__name__)
        """, timeout=8)
    # generate() stops with a typed error once every puzzle was drawn (~1,560 exist)
    assert done is not None, "list_tasks() never returned"
    assert "refused EnvhError" in done.stdout, done.stderr[-2000:]


def test_programs_of_dropped_stacks_are_unloaded_from_shared_jails() -> None:
    spec = _spec(_contract(UPPER + "# dropped-program leak\n"))
    keepers = [envh.make(spec) for _ in range(stacks.MAX_PER_STACK)]
    try:
        for _ in range(12):
            env = envh.make(spec)
            del env
        gc.collect()
        jails = stacks._groups[envh.spec_id(spec)].jails()
        assert sum(j.program_count for j in jails) == len(keepers), [j.program_count for j in jails]
    finally:
        for env in keepers:
            env.close()


def test_distinct_specs_cannot_starve_another_spec_of_jails(monkeypatch: pytest.MonkeyPatch) -> None:
    gc.collect()
    monkeypatch.setattr(process, "MAX_LIVE", len(process._live) + 2 * stacks.MAX_PER_STACK)
    leg = _spec(_contract())
    hogs = []
    try:
        for i in range(2):  # two distinct specs, each a chain of legs with contracts
            hogs.append(envh.make(_spec(_contract(UPPER + f"# hog {i}\n"), {"kind": "chain", "legs": [leg] * 4})))
        with envh.make(_spec(_contract(UPPER + "# victim\n"))) as victim:
            assert _code_contracts(victim)
    finally:
        for env in hogs:
            env.close()


def test_an_untrusted_bridge_config_cannot_read_host_files(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET-LINE\nmore\n")
    (tmp_path / "corpus").mkdir()
    try:
        envh.make({"bridge": "officeqa", "config": {"data": str(secret), "corpus": str(tmp_path / "corpus")}})
    except SpecError as exc:
        assert "TOP-SECRET-LINE" not in str(exc)
        assert "host path" in str(exc)
    else:
        pytest.fail("the spec's bridge config read a host file without trust")


def test_a_spec_chosen_endpoint_does_not_get_the_hosts_api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    from envh_webarena.webarena import judge

    seen: list[str] = []

    class Grab(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            seen.append(self.headers.get("Authorization", ""))
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": "m", "choices": [
                {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "correct"}}]})
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Grab)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("OPENAI_API_KEY", "sk-host-secret")
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    task = {"task_id": 1, "intent": "q", "start_url": "http://localhost",
            "eval": {"eval_types": ["string_match"], "reference_answers": {"fuzzy_match": ["a"]}}}
    spec = {"bridge": "webarena", "config": {"tasks": [task], "judge": {
        "base_url": f"http://127.0.0.1:{server.server_port}/v1", "model": "m", "timeout": 5}}}
    try:
        env = envh.make(spec)
        try:
            judge.fuzzy_match(env.unwrapped.judge, "a", "a", "q")  # what the bridge's evaluate() asks
        except errors.EnvhError:
            pass
        finally:
            env.close()
    finally:
        server.shutdown()
        server.server_close()
    assert not any("sk-host-secret" in h for h in seen), seen


def test_an_untrusted_requests_config_paths_are_not_the_workers_own(tmp_path: Path) -> None:
    from envh.rollout.executors.base import declared_data
    from envh.rollout.trajectory import EpisodeRequest

    data = tmp_path / "root-only"
    data.mkdir(mode=0o700)
    request = EpisodeRequest(key="k", spec={"bridge": "officeqa", "config": {"data": str(data)}}, spec_id="s",
                             policy="random")
    assert request.trust == "untrusted"
    paths, _ = declared_data([request], envh.get_registry())
    mine = [p for p in paths if p[0] == str(data.resolve())]
    assert mine and all(own is False for _, _, own in mine), mine
