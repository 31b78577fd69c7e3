"""mathx: a tiny statistics package used as a SWE-style test repository."""

from mathx.stats import mean, median

__all__ = ["mean", "median"]
