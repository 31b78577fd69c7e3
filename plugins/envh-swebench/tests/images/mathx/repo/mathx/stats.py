"""Descriptive statistics over plain lists of numbers."""


def mean(values):
    """Arithmetic mean of a non-empty sequence."""
    if not values:
        raise ValueError("mean() of an empty sequence")
    return sum(values) / len(values)


def median(values):
    """Middle value of a non-empty sequence."""
    if not values:
        raise ValueError("median() of an empty sequence")
    ordered = sorted(values)
    return ordered[len(ordered) // 2]
