"""Bridges that ship with core."""
