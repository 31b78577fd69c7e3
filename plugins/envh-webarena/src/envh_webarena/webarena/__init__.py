"""WebArena: task configs, evaluators and the bridge."""
