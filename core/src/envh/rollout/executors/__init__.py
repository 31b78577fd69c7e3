"""Episode executors: inline (in-process), pool (warm worker processes), ray."""
