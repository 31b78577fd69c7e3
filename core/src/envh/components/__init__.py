"""Built-in component kinds: stage, contract, chain, budget."""
