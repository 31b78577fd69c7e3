"""envh's verl export loaded by verl's own ``MultiTurnSFTDataset`` (verl 0.9.1, installed
by ``dev/setup.d/verl.sh`` into a directory of its own and run in a child process), with
SmolLM2's real tokenizer: the tokens verl trains on are the conversation the model had,
with the tools it was shown, and the loss covers the model's own turns only."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from envh.rollout import export

SITE = Path(sys.prefix) / "verl-site"

# a chat template that renders tools and tool calls (SmolLM2's own has no tools)
TOOLS_TEMPLATE = (
    "{%- if tools %}<|im_start|>system\n{%- for tool in tools %}\n{{ tool | tojson }}{%- endfor %}<|im_end|>\n"
    "{% endif %}{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}"
    "{%- for c in m.tool_calls or [] %}<tool_call>{{ c.function.name }} {{ c.function.arguments }}</tool_call>"
    "{%- endfor %}<|im_end|>\n{% endfor %}")


def envh_cli(*args):
    return subprocess.run([sys.executable, "-c", "from envh.cli import main; main()", *args],
                          capture_output=True, text=True, timeout=120)


LOAD = """
import json, sys
from envh.rollout.policies.localmodels import load_tokenizer
from {module} import {cls} as Dataset
tokenizer = load_tokenizer("smollm2")
tokenizer.chat_template = sys.argv[2]
try:
    ds = Dataset(parquet_files=[sys.argv[1]], tokenizer=tokenizer,
                 config={{"max_length": 4096, "truncation": "error", "pad_mode": "no_padding"}})
    rows = []
    for i in range(len(ds)):
        item = ds[i]
        rows.append({{"input_ids": item["input_ids"].tolist(), "loss_mask": item["loss_mask"].tolist()}})
except Exception as exc:
    print(json.dumps({{"error": type(exc).__name__ + ": " + str(exc)[:300]}}))
    sys.exit(0)
print(json.dumps({{"rows": rows, "keys": ds.dataframe["key"].tolist()}}))
"""


def load_with_verl(path: Path, module: str, cls: str) -> dict:
    if not (SITE / "verl").is_dir():
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail("verl's dataset code is missing (dev/setup.d/verl.sh installs it; required under CI)",
                        pytrace=False)
        pytest.skip("verl's dataset code is not installed; run dev/setup.d/verl.sh")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SITE), os.environ.get("PYTHONPATH", "")]),
           "HF_HUB_OFFLINE": "1", "PYTHONWARNINGS": "ignore", "TOKENIZERS_PARALLELISM": "false"}
    proc = subprocess.run([sys.executable, "-c", LOAD.format(module=module, cls=cls), str(path), TOOLS_TEMPLATE],
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def verl_file(played, tmp_path_factory):
    out, _, _ = played
    path = tmp_path_factory.mktemp("verl") / "v.parquet"
    proc = envh_cli("export", str(out), "--format", "verl", "-o", str(path))
    assert proc.returncode == 0, proc.stderr
    return path


def test_verl_trains_on_the_conversation_and_tools_the_model_had(played, verl_file):
    from envh.rollout.policies.localmodels import load_tokenizer

    got = load_with_verl(verl_file, "envh.rollout.verl_dataset", "EnvhMultiTurnSFTDataset")
    assert "error" not in got, got
    _, ts, requests = played
    tokenizer = load_tokenizer("smollm2")
    tokenizer.chat_template = TOOLS_TEMPLATE
    item = dict(zip(got["keys"], got["rows"]))["native"]
    expected = tokenizer.apply_chat_template(export.to_messages(ts["native"], raw_arguments=True),
                                             tools=requests[0]["tools"], tokenize=False)
    assert tokenizer.decode(item["input_ids"]) == expected  # every token: prompt, tools, turns
    trained = tokenizer.decode([t for t, m in zip(item["input_ids"], item["loss_mask"]) if m])
    completions = [m for m in export.to_messages(ts["native"], raw_arguments=True) if m["role"] == "assistant"]
    assert trained and all(c["function"]["name"] in trained for m in completions for c in m.get("tool_calls") or [])
    assert '"i": null' not in expected and "Numbers" not in trained  # tool answers are not trained on


def test_verls_stock_dataset_refuses_the_file_rather_than_train_on_wrong_schemas(verl_file):
    got = load_with_verl(verl_file, "verl.utils.dataset.multiturn_sft_dataset", "MultiTurnSFTDataset")
    assert "error" in got, "stock verl read the JSON-text tools column without decoding it"
    assert "Tools should either be a JSON schema" in got["error"], got["error"]  # transformers on the text column
