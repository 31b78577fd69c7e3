"""envh-adaptive: component kinds that adapt to the policy as it learns.

``curriculum`` adapts a bridge's tunable parameters between episodes (``curriculum``: the
decision logic; ``coach``: a user policy run in the jail; ``params``: what is tuned);
``workspace`` gives the policy Belief, Progress and Experience behind four meta-actions
(``experience``: the cross-episode library and its consolidation). Both are registered
through ``hooks`` like any plugin's kinds.
"""

__version__ = "0.1.0"
