"""Exports are consumable, not just parseable: one real TRL ``SFTTrainer`` step on
SmolLM2-135M (CPU) with SmolLM2's own chat template for each of: the conversations and
the per-request samples of a tool-calling policy (its calls are in the tokens that carry
the loss), the conversations of a text-format policy (the real local model), and the
token-level rows of the local model's recorded ids."""

from __future__ import annotations

import importlib.util
import os

import envh
import pytest
from envh import TaskRef
from envh.rollout import export
from envh.rollout.trajectory import EpisodeRequest

MISSING = next((m for m in ("trl", "datasets", "transformers", "torch") if importlib.util.find_spec(m) is None), None)
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(MISSING is not None and os.environ.get("CI") != "true", reason=f"{MISSING} missing"),
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),  # TRL/transformers internals on CPU
    pytest.mark.filterwarnings("ignore::UserWarning"),  # torch: pin_memory/no accelerator on CPU
    pytest.mark.filterwarnings("ignore::FutureWarning"),
]
SPEC = {"bridge": "toy24", "layers": []}


@pytest.fixture(scope="module")
def local_trajectories():
    """Two Toy24 episodes of the real local model, text format, token ids recorded."""
    from envh.rollout.runner import run_episode
    from envh.rollout.warm import Warm

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    warm = Warm()
    out = []
    for n, task in enumerate(("2,3,4", "1,2,6,6")):
        req = EpisodeRequest(key=f"local{n}", spec=envh.spec_to_data(envh.parse_spec(SPEC)), spec_id=envh.spec_id(SPEC),
                             task=TaskRef(suite="toy24", split="easy", instance_id=task), seed=n,
                             policy="local:smollm2", policy_options={"max_new_tokens": 16, "threads": 1},
                             max_steps=2)
        out.append(run_episode(req, warm))
    warm.close()
    assert all(t.error_class is None for t in out), [t.error for t in out]
    return out


@pytest.fixture(scope="module")
def model_dir():
    from envh.rollout.policies.localmodels import cache_root

    return str(cache_root() / "smollm2-135m")


def one_step(model_dir, dataset, tmp_path, max_length=48):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    before = model.lm_head.weight.detach().clone()
    args = SFTConfig(output_dir=str(tmp_path / "trl"), max_steps=1, per_device_train_batch_size=2, max_length=max_length,
                     learning_rate=1e-3, report_to="none", save_strategy="no", logging_steps=1, use_cpu=True,
                     dataloader_num_workers=0, disable_tqdm=True, bf16=False, fp16=False, gradient_checkpointing=False)
    trainer = SFTTrainer(model=model, args=args, train_dataset=dataset, processing_class=tokenizer)
    result = trainer.train()
    assert result.global_step == 1 and result.training_loss == result.training_loss  # finite, not NaN
    assert 0 < result.training_loss < 100
    assert not torch.equal(before, model.lm_head.weight.detach())  # the step changed the weights
    return trainer


def trained(trainer, tokenizer):
    """Each training row as (all its tokens, the tokens that carry the loss), decoded."""
    rows = [trainer.train_dataset[i] for i in range(len(trainer.train_dataset))]
    labels = trainer.data_collator(rows)["labels"].tolist()
    return [(tokenizer.decode(row["input_ids"]), tokenizer.decode([t for t in lab if t != -100]))
            for row, lab in zip(rows, labels, strict=True)]


CALLS = ['<tool_call>\n{"name": "combine", "arguments": {"i": 0, "j": 1, "op": "mul"}}\n</tool_call>',
         '<tool_call>\n{"name": "stop", "arguments": {}}\n</tool_call>']


def test_tool_call_conversations_train_on_the_calls(played, written_played, model_dir, tmp_path):
    import datasets
    from transformers import AutoTokenizer

    _out, ts, _ = played
    written, _ = written_played
    path = tmp_path / "tools.trl.jsonl"
    assert export.write_trl([written, ts["native"]], path) == 2
    ds = datasets.load_dataset("json", data_files=str(path), split="train").select_columns(["messages", "tools"])
    trainer = one_step(model_dir, ds, tmp_path, max_length=1024)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)  # SmolLM2's own chat template
    assert "tools" not in tokenizer.chat_template and "tool_calls" not in tokenizer.chat_template
    text, loss = trained(trainer, tokenizer)[0]
    assert len(tokenizer(text)["input_ids"]) < 1024  # the whole episode, not a truncated prefix
    assert loss.count(CALLS[0]) == 2 and loss.count(CALLS[1]) == 1 and "thinking..." in loss


def test_per_request_samples_train_on_the_reply_only(written_played, model_dir, tmp_path):
    import datasets
    from transformers import AutoTokenizer

    written, requests = written_played
    path = tmp_path / "requests.trl.jsonl"
    assert export.write_trl([written], path, per_request=True) == 3
    ds = datasets.load_dataset("json", data_files=str(path), split="train").select_columns(
        ["prompt", "completion", "tools"])
    trainer = one_step(model_dir, ds, tmp_path, max_length=1024)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    rows = trained(trainer, tokenizer)
    assert len(rows) == len(requests) == 3
    for (text, loss), body, step in zip(rows, requests, written.steps, strict=True):
        assert body["messages"][-1]["content"] in text  # the request as sent is the context
        assert loss.startswith(step.turn.written) and "Numbers" not in loss  # the loss: the reply only
    assert [CALLS[0] in loss for _, loss in rows] == [True, True, False] and CALLS[1] in rows[2][1]


def test_text_format_conversations_of_the_local_model_train(local_trajectories, model_dir, tmp_path):
    import datasets

    path = tmp_path / "local.parquet"
    assert export.write_parquet(local_trajectories, path) == 2
    ds = datasets.load_dataset("parquet", data_files=str(path), split="train")
    assert ds[0]["messages"][2]["content"].startswith("<action>")  # the primed reply, as the model continued it
    one_step(model_dir, ds.select_columns(["messages", "tools"]), tmp_path)


def test_token_level_rows_train_on_exactly_the_models_tokens(local_trajectories, model_dir, tmp_path):
    import datasets

    path = tmp_path / "tokens.jsonl"
    n = export.write_tokens(local_trajectories, path)
    ds = datasets.load_dataset("json", data_files=str(path), split="train")
    assert len(ds) == n >= 2
    for row in ds:
        t = next(t for t in local_trajectories if t.key == row["key"])
        produced = [i for k in row["turns"] for i in t.steps[k].turn.completion_token_ids]
        assert [i for i, m in zip(row["input_ids"], row["loss_mask"], strict=True) if m] == produced
        assert [x for x in row["labels"] if x != -100] == produced
        assert row["reward"] == t.total_reward
    one_step(model_dir, ds.select_columns(["input_ids", "completion_mask"]), tmp_path)
