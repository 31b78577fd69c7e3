"""Test data shipped in the instance's environment (not in the repository)."""

EVEN_CASES = [([4, 1, 3, 2], 2.5), ([1, 2], 1.5), ([10, 0, 5, 5], 5.0)]
