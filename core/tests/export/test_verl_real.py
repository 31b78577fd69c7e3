"""envh's verl exports loaded by verl's own classes (verl 0.9.1, installed by
``dev/setup.d/verl.sh`` into a directory of its own and run in a child process), with
SmolLM2's real tokenizer and its own chat template: the tokens verl's multi-turn SFT
dataset trains on are the conversation the model had, with the tool calls it wrote inside
the loss; per-request rows put the loss on the reply only; and ``RLHFDataset`` reads the
RL layout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from envh.rollout import export

SITE = Path(sys.prefix) / "verl-site"

def envh_cli(*args):
    return subprocess.run([sys.executable, "-c", "from envh.cli import main; main()", *args],
                          capture_output=True, text=True, timeout=120)


LOAD = """
import json, sys
from envh.rollout.policies.localmodels import load_tokenizer
from {module} import {cls} as Dataset
tokenizer = load_tokenizer("smollm2")  # SmolLM2's own chat template
out = {{}}
for path in sys.argv[1:]:
    try:
        ds = Dataset(parquet_files=[path], tokenizer=tokenizer,
                     config={{"max_length": 4096, "truncation": "error", "pad_mode": "no_padding"}})
        rows = []
        for i in range(len(ds)):
            item = ds[i]
            rows.append({{"input_ids": item["input_ids"].tolist(), "loss_mask": item["loss_mask"].tolist()}})
        out[path] = {{"rows": rows, "keys": ds.dataframe["key"].tolist()}}
    except Exception as exc:
        out[path] = {{"error": type(exc).__name__ + ": " + str(exc)[:300]}}
print(json.dumps(out))
"""

LOAD_RL = """
import json, sys
from envh.rollout.policies.localmodels import load_tokenizer
from verl.utils.dataset.rl_dataset import RLHFDataset
ds = RLHFDataset(data_files=[sys.argv[1]], tokenizer=load_tokenizer("smollm2"),
                 config={"max_prompt_length": 4096, "filter_overlong_prompts_workers": 1,
                         "cache_dir": sys.argv[2]})
rows = [ds[i] for i in range(len(ds))]
print(json.dumps([{k: r[k] for k in ("raw_prompt", "data_source", "reward_model", "extra_info", "index")}
                  for r in rows]))
"""


def child(script: str, *args: str) -> object:
    if not (SITE / "verl").is_dir():
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail("verl's dataset code is missing (dev/setup.d/verl.sh installs it; required under CI)",
                        pytrace=False)
        pytest.skip("verl's dataset code is not installed; run dev/setup.d/verl.sh")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SITE), os.environ.get("PYTHONPATH", "")]),
           "HF_HUB_OFFLINE": "1", "PYTHONWARNINGS": "ignore", "TOKENIZERS_PARALLELISM": "false"}
    proc = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def load_with_verl(module: str, cls: str, *paths: Path) -> list[dict]:
    got = child(LOAD.format(module=module, cls=cls), *map(str, paths))
    assert isinstance(got, dict)
    return [got[str(p)] for p in paths]


@pytest.fixture(scope="module")
def verl_file(played, tmp_path_factory):
    out, _, _ = played
    path = tmp_path_factory.mktemp("verl") / "v.parquet"
    proc = envh_cli("export", str(out), "--format", "verl", "-o", str(path))
    assert proc.returncode == 0, proc.stderr
    return path


CALLS = ['<tool_call>\n{"name": "combine", "arguments": {"i": 0, "j": 1, "op": "mul"}}\n</tool_call>',
         '<tool_call>\n{"name": "stop", "arguments": {}}\n</tool_call>']


def test_verl_trains_on_the_calls_the_model_wrote(written_played, smollm2_tokenizer, tmp_path):
    written, requests = written_played
    conversation, per_request = tmp_path / "c.parquet", tmp_path / "r.parquet"
    assert export.export([written], "verl", conversation) == 1
    assert export.export([written], "verl", per_request, per_request=True) == 3
    got, by_request = load_with_verl("envh.rollout.verl_dataset", "EnvhMultiTurnSFTDataset", conversation, per_request)
    assert "error" not in got and "error" not in by_request, (got, by_request)
    tokenizer = smollm2_tokenizer  # SmolLM2's own chat template: no tools, no tool calls
    [item] = got["rows"]
    expected = tokenizer.apply_chat_template(export.to_messages(written, raw_arguments=True), tokenize=False)
    assert tokenizer.decode(item["input_ids"]) == expected  # every token: prompt and turns
    trained = tokenizer.decode([t for t, m in zip(item["input_ids"], item["loss_mask"], strict=True) if m])
    assert trained.count(CALLS[0]) == 2 and trained.count(CALLS[1]) == 1  # the calls carry the loss
    assert "Numbers" not in trained  # observations and tool answers do not
    # per request: each row is the request as sent, the loss on its reply only
    assert len(by_request["rows"]) == len(requests) == 3
    for row, step, body in zip(by_request["rows"], written.steps, requests, strict=True):
        text = tokenizer.decode(row["input_ids"])
        loss = tokenizer.decode([t for t, m in zip(row["input_ids"], row["loss_mask"], strict=True) if m])
        assert loss.startswith(step.turn.written) and loss.count("<tool_call>") == 1
        # the request as sent (earlier replies as the policy sent them back: native calls,
        # which SmolLM2's template does not render, as a server with it would not), then the reply
        sent = [*body["messages"], {"role": "assistant", "content": step.turn.written}]
        assert text == tokenizer.apply_chat_template([{**m, "content": m["content"] or ""} for m in sent],
                                                     tokenize=False)


def test_verls_rl_dataset_reads_the_rl_layout(played, tmp_path):
    out, ts, requests = played
    path = tmp_path / "rl.parquet"
    proc = envh_cli("export", str(out), "--format", "verl-rl", "-o", str(path))
    assert proc.returncode == 0, proc.stderr
    rows = child(LOAD_RL, str(path), str(tmp_path / "cache"))
    assert isinstance(rows, list) and len(rows) == 3
    by_key = {r["extra_info"]["key"]: r for r in rows}
    native = by_key["native"]
    assert native["raw_prompt"] == requests[0]["messages"]  # the first request, as sent
    assert native["data_source"] == "envh/toy24"
    assert native["reward_model"] == {"style": "rule", "ground_truth": str(ts["native"].task)}
    assert json.loads(native["extra_info"]["tools"]) == requests[0]["tools"]
    assert sorted(r["index"] for r in rows) == [0, 1, 2]


def test_verls_stock_dataset_refuses_the_file_rather_than_train_on_wrong_schemas(verl_file):
    [got] = load_with_verl("verl.utils.dataset.multiturn_sft_dataset", "MultiTurnSFTDataset", verl_file)
    assert "error" in got, "stock verl read the JSON-text tools column without decoding it"
    assert "Tools should either be a JSON schema" in got["error"], got["error"]  # transformers on the text column
