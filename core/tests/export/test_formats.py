"""Each export format from real episodes: the model's own turns, exactly, loadable by
``json``, ``datasets`` (JSONL and Parquet) and pandas (verl's loader)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from envh.rollout import export
from envh.rollout.trajectory import request_messages

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:datasets")


def envh_cli(*args):
    return subprocess.run([sys.executable, "-c", "from envh.cli import main; main()", *args],
                          capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "150"})


def lines(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_the_episodes_recorded_every_turn(played):
    _out, ts, requests = played
    assert ts["native"].success and ts["text"].success and not ts["fail"].success
    steps = [s for key in ("native", "text", "fail") for s in ts[key].steps]
    rebuilt = [m for key in ("native", "text", "fail") for m in request_messages(ts[key].steps)]
    assert all(s.turn is not None for s in steps) and rebuilt == [r["messages"] for r in requests]


def test_messages_are_the_models_own_turns(played, tmp_path):
    out, ts, requests = played
    proc = envh_cli("export", str(out), "--format", "messages", "-o", str(tmp_path / "m.jsonl"))
    assert proc.returncode == 0, proc.stderr
    rows = {r["key"]: r for r in lines(tmp_path / "m.jsonl")}
    native = rows["native"]["messages"]
    assert [m["role"] for m in native] == ["system", "user", "assistant", "tool", "assistant", "tool", "assistant",
                                           "tool", "tool", "assistant"]
    assert native[:2] == requests[0]["messages"]  # the first request, as sent (system prompt included)
    assert native[2]["tool_calls"][0]["function"] == {"name": "combine", "arguments": {"i": 0, "j": 1, "op": "mul"}}
    # the broken call is kept as the model wrote it, and answered with the error
    assert native[4]["tool_calls"][0]["function"]["arguments"] == '{"i": 0, "j": '
    assert "not valid JSON" in native[5]["content"] and native[5]["tool_call_id"] == native[4]["tool_calls"][0]["id"]
    # both parallel calls are there, each answered
    assert [c["id"] for c in native[6]["tool_calls"]] == ["p1", "p2"]
    assert [m["tool_call_id"] for m in native[7:9]] == ["p1", "p2"]
    assert [t["function"]["name"] for t in rows["native"]["tools"]] == ["combine", "reset", "stop"]
    text = rows["text"]["messages"]
    assert text[2] == {"role": "assistant", "content": "<think>2*3 is 6</think><action>combine(0, 1, mull)</action>"}
    assert all("tool_calls" not in m for m in text) and text[3]["role"] == "user"
    assert rows["native"]["success"] is True and rows["fail"]["success"] is False


def test_datasets_loads_jsonl_and_parquet_exactly(played, tmp_path):
    datasets = pytest.importorskip("datasets")
    out, ts, _ = played
    for fmt, name in (("messages", "m.jsonl"), ("parquet", "m.parquet"), ("trl", "t.jsonl")):
        assert envh_cli("export", str(out), "--format", fmt, "-o", str(tmp_path / name)).returncode == 0
    expected = {r["key"]: r for r in lines(tmp_path / "m.jsonl")}
    for name, kind in (("m.jsonl", "json"), ("m.parquet", "parquet"), ("t.jsonl", "json")):
        ds = datasets.load_dataset(kind, data_files=str(tmp_path / name), split="train")
        assert len(ds) == 3
        for row in ds:
            want = expected[row["key"]]
            assert row["messages"] == want["messages"], name
            tools = json.loads(row["tools"]) if isinstance(row["tools"], str) else row["tools"]
            assert tools == want["tools"], name
    import pyarrow.parquet as pq

    table = pq.read_table(tmp_path / "m.parquet")
    assert json.loads(table.column("trajectory")[0].as_py())["key"] in expected
    assert set(table.column_names) >= {"success", "reward", "split", "spec_id", "messages", "tools"}


def test_verl_parquet_reads_as_dicts_with_pandas(played, tmp_path):
    pd = pytest.importorskip("pandas")
    out, _ts, _ = played
    assert envh_cli("export", str(out), "--format", "verl", "-o", str(tmp_path / "v.parquet")).returncode == 0
    df = pd.read_parquet(tmp_path / "v.parquet")
    row = df[df["key"] == "native"].iloc[0]
    messages = list(row["messages"])
    assert messages[0]["role"] == "system" and messages[2]["role"] == "assistant"
    call = messages[2]["tool_calls"][0]
    assert call["function"]["name"] == "combine" and json.loads(call["function"]["arguments"])["op"] == "mul"
    assert bool(row["success"]) and "tools" in df.columns


def test_verl_tools_and_messages_round_trip_exactly(played, tmp_path):
    """What verl hands the chat template (pandas, then ``decode_verl_frame``) and what
    pyarrow and ``datasets`` read are the tools the server received and the model's own
    turns, with no field of another tool or message added."""
    pd = pytest.importorskip("pandas")
    datasets = pytest.importorskip("datasets")
    import pyarrow.parquet as pq

    out, ts, requests = played
    path = tmp_path / "v.parquet"
    assert envh_cli("export", str(out), "--format", "verl", "-o", str(path)).returncode == 0
    shown = requests[0]["tools"]  # the native episode's first request: the tools as sent
    # the schemas differ from tool to tool, so Arrow structs would have mixed their fields
    assert len({frozenset(t["function"]["parameters"].get("properties", {})) for t in shown}) > 1
    frame = export.decode_verl_frame(pd.read_parquet(path))
    by_key = {row["key"]: row for row in frame.to_dict("records")}
    native = by_key["native"]
    assert native["tools"] == shown
    assert by_key["text"]["tools"] == export.tools_of(ts["text"])
    messages = native["messages"]
    assert messages[:2] == requests[0]["messages"]  # system prompt and first observation, as sent
    assert "tool_calls" not in messages[1] and "tool_call_id" not in messages[0]
    # the calls as the model wrote them: the raw argument strings, the broken one too
    assert messages[2]["tool_calls"][0]["function"]["arguments"] == ts["native"].steps[0].turn.tool_calls[0]["arguments"]
    assert messages[4]["tool_calls"][0]["function"]["arguments"] == '{"i": 0, "j": '
    assert [c["id"] for c in messages[6]["tool_calls"]] == ["p1", "p2"]
    assert messages[5] == {"role": "tool", "tool_call_id": messages[4]["tool_calls"][0]["id"],
                           "content": requests[2]["messages"][5]["content"]}
    # pyarrow and datasets read the same exact tools
    table = pq.read_table(path).to_pylist()
    assert [export.verl_tools(r["tools"]) for r in table if r["key"] == "native"] == [shown]
    ds = datasets.load_dataset("parquet", data_files=str(path), split="train")
    row = next(r for r in ds if r["key"] == "native")
    assert json.loads(row["tools"]) == shown and export.verl_messages(row["messages"]) == messages


def test_verl_cells_that_are_not_tool_lists_are_refused():
    from envh import errors

    with pytest.raises(errors.EnvhError, match="not a list of tools"):
        export.verl_tools('{"type": "function"}')


def test_filters(played, tmp_path):
    out, ts, _ = played
    for args, keys in ((["--success-only"], {"native", "text"}), (["--split", "medium"], {"fail"}),
                       (["--spec", ts["native"].spec_id[:10]], {"native", "text", "fail"}),
                       (["--spec", "0000"], set()), (["--min-reward", "0.5"], {"native", "text"})):
        path = tmp_path / "f.jsonl"
        proc = envh_cli("export", str(out), "--format", "messages", "-o", str(path), *args)
        assert proc.returncode == 0, proc.stderr
        assert {r["key"] for r in lines(path)} == keys, args


def test_a_missing_output_directory_is_a_clear_error(played, tmp_path):
    out, _ts, _ = played
    for fmt in export.FORMATS:
        proc = envh_cli("export", str(out), "--format", fmt, "-o", str(tmp_path / "nowhere" / "x.out"))
        assert proc.returncode != 0 and "Traceback" not in proc.stderr
        assert "does not exist" in proc.stderr and "mkdir -p" in proc.stderr


def test_token_export_without_token_ids_says_which_policies_record_them(played, tmp_path):
    out, _ts, _ = played
    proc = envh_cli("export", str(out), "--format", "sft", "-o", str(tmp_path / "s.jsonl"))
    assert proc.returncode != 0 and "Traceback" not in proc.stderr and "token ids" in proc.stderr


def test_show_reports_tokens_and_latency(played):
    out, ts, _ = played
    proc = envh_cli("show", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "tokens/s" in proc.stdout and "prompt +" in proc.stdout
    shown = json.loads(envh_cli("show", str(out), "--json").stdout)[0]["model"]
    turns = sum(len(t.steps) for t in ts.values())
    assert shown["turns"] == turns
    assert shown["prompt_tokens"] == sum(t.usage.get("prompt_tokens", 0) for t in ts.values()) > 0
    assert shown["tokens_per_s"] > 0 and shown["latency_s"] > 0


def test_turns_cross_the_process_pool_and_export(tmp_path):
    """``envh run`` with pool workers (turns travel as JSON data) against the replay
    server, then ``envh export``: the conversation is the one the workers had."""
    from envh.testing_llm import LLMReplayServer, tool_reply

    with LLMReplayServer([tool_reply("stop"), tool_reply("stop")]) as server:
        proc = envh_cli("run", "toy24", "--task", "easy/2,3,4", "-k", "2", "--policy", "openai:replay-model",
                        "--policy-option", f"base_url={server.base_url}", "--policy-option", "backoff_s=0.01",
                        "--executor", "pool", "--workers", "2", "--max-steps", "2", "--out", str(tmp_path / "run"))
        assert proc.returncode == 0, proc.stderr
        sent = server.chat_requests
    assert envh_cli("export", str(tmp_path / "run"), "--format", "messages").returncode == 0
    rows = lines(tmp_path / "run" / "trajectories.jsonl")
    assert len(rows) == 2 and len(sent) == 2
    for row in rows:
        assert row["messages"][:2] in [body["messages"] for body in sent]
        assert row["messages"][2]["tool_calls"][0]["function"]["name"] == "stop"
    assert len({body["seed"] for body in sent}) == 2  # the two rollouts sample with different seeds


def test_unwritable_outputs_and_bad_filters_are_clear_errors(played):
    out, _ts, _ = played
    for args in (["-o", "/proc/envh-export.jsonl"], ["--min-reward", "nan"], ["-o", str(out)]):
        proc = envh_cli("export", str(out), "--format", "messages", *args)
        assert proc.returncode != 0 and "Traceback" not in proc.stderr, args
        assert "error" in proc.stderr.lower() or "must" in proc.stderr, proc.stderr


# A chat template that renders tools and calls the way tool-calling templates (Qwen's, Hermes')
# do: each tool schema through ``tojson``, each call's arguments as written.
TOOLS_TEMPLATE = (
    "{%- if tools %}<|im_start|>system\n{%- for tool in tools %}\n{{ tool | tojson }}{%- endfor %}<|im_end|>\n"
    "{% endif %}{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}"
    "{%- for c in m.tool_calls or [] %}<tool_call>{{ c.function.name }} {{ c.function.arguments }}</tool_call>"
    "{%- endfor %}<|im_end|>\n{% endfor %}")


def test_the_verl_rows_render_what_the_model_was_shown(played, tmp_path):
    """What verl's dataset does with a row (``pd.read_parquet``, then ``apply_chat_template``
    with the row's ``tools``), with a real tokenizer: after ``decode_verl_frame`` the
    rendered text is the conversation and tools as sent; undecoded, the JSON text is refused
    (verl's stock dataset would fail loudly, not train on wrong schemas)."""
    pd = pytest.importorskip("pandas")
    from envh.rollout.policies.localmodels import cache_root, load_tokenizer

    if not (cache_root() / "smollm2-135m" / "config.json").exists() and os.environ.get("CI") != "true":
        pytest.skip("the converted SmolLM2 model is not in the cache (dev/setup.d/local_llm.sh)")
    tokenizer = load_tokenizer("smollm2")
    tokenizer.chat_template = TOOLS_TEMPLATE
    out, ts, requests = played
    path = tmp_path / "v.parquet"
    assert envh_cli("export", str(out), "--format", "verl", "-o", str(path)).returncode == 0
    raw = pd.read_parquet(path)
    row = export.decode_verl_frame(raw).set_index("key").loc["native"]
    rendered = tokenizer.apply_chat_template(row["messages"], tools=row["tools"], tokenize=False)
    expected = tokenizer.apply_chat_template(export.to_messages(ts["native"], raw_arguments=True),
                                             tools=requests[0]["tools"], tokenize=False)
    assert rendered == expected and '"i": null' not in rendered
    assert '<tool_call>combine {"i": 0, "j": </tool_call>' in rendered  # the broken call, as written
    undecoded = raw.set_index("key").loc["native"]["tools"]
    with pytest.raises((ValueError, TypeError)):
        tokenizer.apply_chat_template([{"role": "user", "content": "x"}], tools=undecoded, tokenize=False)
