"""envh-example: the smallest complete envh plugin.

It contributes one bridge (``corridor``: walk to the end of a five-cell corridor) and one
component kind (``alias``: extra tools that stand for fixed tool calls), both through
the ``envh`` entry point in ``hooks.py``. Copy it to start your own plugin.
"""

__version__ = "0.1.0"
