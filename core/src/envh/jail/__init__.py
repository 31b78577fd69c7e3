"""The untrusted tier: contract code runs in a separate, limited process (DESIGN invariant 3).

``Jail`` is a persistent helper process fed hook calls over a pipe; each env stack with
untrusted contract code has one of its own, and ``default_jail()`` is a process-wide one
for other programs (curriculum coaches). ``sandboxed_command`` wraps any command in bubblewrap
namespaces with an empty environment (for workers that must not see the parent's secrets).
"""

from .bwrap import bwrap_path, sandboxed_command
from .process import Jail, default_jail

__all__ = ["Jail", "bwrap_path", "default_jail", "sandboxed_command"]
