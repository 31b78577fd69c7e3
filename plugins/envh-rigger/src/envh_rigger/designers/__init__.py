"""Designers: write candidate components for a target (template, llm)."""
