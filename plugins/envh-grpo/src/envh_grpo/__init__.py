"""envh-grpo: multi-turn GRPO over any envh stack.

Importing this package is cheap: torch, transformers, DeepSpeed and vLLM load only
inside the modules that use them (``loss``, ``generation``, ``trainer``).
"""

__version__ = "0.1.0"
