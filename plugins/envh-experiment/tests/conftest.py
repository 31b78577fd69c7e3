"""The tests' helpers (``experiment_files``) are importable from this folder."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))


@pytest.fixture(scope="session")
def random_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small random model of SmolLM2's shape (``envh_grpo.testing.write_random_model``)."""
    from envh_grpo.testing import write_random_model

    return write_random_model(tmp_path_factory.mktemp("random-model"))
