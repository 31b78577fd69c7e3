"""envh experiment: GRPO on reshaped worlds against GRPO on the benchmark as it is."""

from .config import Experiment, load

__all__ = ["Experiment", "load"]
