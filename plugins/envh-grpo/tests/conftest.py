"""Shared fixtures: the embedded SmolLM2-135M (tokenizer and model), loaded once."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
if str(HERE) not in sys.path:  # grpo_scripted: helpers of the tests and of the processes they launch
    sys.path.insert(0, str(HERE))


@pytest.fixture(scope="session")
def smollm2():
    import torch
    from envh_grpo.trainer import resolve_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = resolve_model("smollm2")  # converted by dev/setup.d/local_llm.sh; never downloaded
    tok = AutoTokenizer.from_pretrained(str(folder))
    model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32).eval()
    return folder, tok, model


@pytest.fixture(scope="session")
def tokenizer():
    """The tokenizer alone (tests of segments and the rollout loop need no weights)."""
    from envh_grpo.trainer import resolve_model
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(resolve_model("smollm2")))


@pytest.fixture(scope="session")
def random_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small random model of SmolLM2's shape (``envh_grpo.testing.write_random_model``)."""
    from envh_grpo.testing import write_random_model

    return write_random_model(tmp_path_factory.mktemp("random-model"))


@pytest.fixture(scope="session")
def repeating_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The small random model whose replies sometimes repeat, so rewards differ within a
    group (``write_random_model(repeats=True)``)."""
    from envh_grpo.testing import write_random_model

    return write_random_model(tmp_path_factory.mktemp("repeating-model"), repeats=True)
