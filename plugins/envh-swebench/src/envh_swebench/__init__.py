"""envh-swebench: SWE-bench behind envh's ActionableEnv, one Docker container per episode.

Importing this package is cheap; docker and swebench load when a bridge is built.
"""

__version__ = "0.1.0"
