"""envh-alfworld: ALFWorld's text games behind envh's interface, plus a procedural game builder.

Import cost stays low: the engine (textworld, fast-downward) loads on first use.
Entry points: ``envh_alfworld.bridge.AlfworldEnv`` (the bridge),
``envh_alfworld.builder.build_games`` and ``envh_alfworld.sampling.sample_room`` (new games),
``envh_alfworld.templates`` (layer specs for designers).
"""

__version__ = "0.1.0"
