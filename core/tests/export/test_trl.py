"""Exports are consumable, not just parseable: one real TRL ``SFTTrainer`` step on
SmolLM2-135M (CPU, tiny max length) for each of: the conversations of a tool-calling
policy, the conversations of a text-format policy (the real local model), and the
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


def one_step(model_dir, dataset, tmp_path):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    before = model.lm_head.weight.detach().clone()
    args = SFTConfig(output_dir=str(tmp_path / "trl"), max_steps=1, per_device_train_batch_size=2, max_length=48,
                     learning_rate=1e-3, report_to="none", save_strategy="no", logging_steps=1, use_cpu=True,
                     dataloader_num_workers=0, disable_tqdm=True, bf16=False, fp16=False, gradient_checkpointing=False)
    trainer = SFTTrainer(model=model, args=args, train_dataset=dataset, processing_class=tokenizer)
    result = trainer.train()
    assert result.global_step == 1 and result.training_loss == result.training_loss  # finite, not NaN
    assert 0 < result.training_loss < 100
    assert not torch.equal(before, model.lm_head.weight.detach())  # the step changed the weights
    return trainer


def test_tool_call_conversations_train(played, model_dir, tmp_path):
    import datasets

    _out, ts, _ = played
    path = tmp_path / "tools.trl.jsonl"
    assert export.write_trl([ts["native"], ts["text"], ts["fail"]], path) == 3
    ds = datasets.load_dataset("json", data_files=str(path), split="train").select_columns(["messages", "tools"])
    assert any("tool_calls" in m for row in ds for m in row["messages"])
    one_step(model_dir, ds, tmp_path)


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
