"""An episode's deadline that fires while a garbage-collector callback or a ``__del__``
runs: Python drops an exception raised there ("Exception ignored in ..."), so the runner
raises it once that code has returned instead of losing it (CI: a library's gc callback
was running when the timer fired; the deadline was printed and dropped)."""

from __future__ import annotations

import gc
import time

import pytest
from envh.rollout.runner import _alarm, _Deadline


def _spin(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


def test_a_deadline_that_fires_in_a_gc_callback_is_raised_after_it() -> None:
    inside: list[bool] = []

    def callback(phase: str, info: dict) -> None:
        if phase == "start" and not inside:
            inside.append(True)
            _spin(0.3)  # the 0.1 s timer fires in here

    gc.callbacks.append(callback)
    try:
        t0 = time.monotonic()
        with pytest.raises(_Deadline), _alarm(0.1):
            gc.collect()
            _spin(5.0)  # the deadline comes here, after the callback
        assert inside and 0.3 <= time.monotonic() - t0 < 2.0
    finally:
        gc.callbacks.remove(callback)


def test_a_deadline_that_fires_in_a_finalizer_is_raised_after_it() -> None:
    class Slow:
        def __del__(self) -> None:
            _spin(0.3)

    t0 = time.monotonic()
    with pytest.raises(_Deadline), _alarm(0.1):
        Slow()  # dropped at once: __del__ runs here, the timer fires in it
        _spin(5.0)
    assert 0.3 <= time.monotonic() - t0 < 2.0


def test_a_deadline_that_fires_in_a_weakref_callback_is_raised_after_it() -> None:
    """A weakref callback (a ``WeakValueDictionary`` dropping a dead entry, CI's case) is
    another place Python drops exceptions, and its frame looks like any function's."""
    import weakref

    class Referent:
        pass

    ran: list[bool] = []

    def callback(_ref: object) -> None:
        ran.append(True)
        _spin(0.3)  # the 0.1 s timer fires in here: raised there, Python drops it

    t0 = time.monotonic()
    with pytest.raises(_Deadline), _alarm(0.1):
        thing = Referent()
        ref = weakref.ref(thing, callback)
        del thing  # the callback runs here
        _spin(5.0)  # the deadline comes here, 10 ms after it was dropped in the callback
    assert ran and ref() is None and 0.1 <= time.monotonic() - t0 < 2.0
