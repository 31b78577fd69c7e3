"""The plugin's component kinds: curriculum (training only) and workspace."""
