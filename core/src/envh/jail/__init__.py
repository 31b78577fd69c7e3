"""The untrusted tier: contract code runs in a separate, limited process (DESIGN invariant 3).

``Jail`` is a persistent helper process fed hook calls over a pipe, stopped between calls.
``stack_jail`` picks the jail for a spec's untrusted code (contracts, chain legs,
curriculum coaches): the spec's own jails, never another spec's, at most
``stacks.MAX_PER_STACK`` of them. ``sandboxed_command`` wraps any command in bubblewrap
namespaces with an empty environment (for workers that must not see the parent's secrets).
"""

from .bwrap import bwrap_path, sandboxed_command
from .process import Jail
from .stacks import stack_jail

__all__ = ["Jail", "bwrap_path", "sandboxed_command", "stack_jail"]
