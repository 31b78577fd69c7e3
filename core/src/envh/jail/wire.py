"""The jail's wire format: length-prefixed JSON, never pickle (the host must not execute
anything the jail sends), and the tagged encoding of the records hooks take and return."""

from __future__ import annotations

import json
import os
import select
import struct
import time
from types import MappingProxyType
from typing import Any

from ..types import Action, Block, EnvResponse, Observation, thaw

MAX_MESSAGE = 32 << 20  # bytes; a bigger answer from the jail is an error, not a read
# JSON values in one answer from the jail: 24 MB of '[],' decode to 450 MB of lists in the
# host. Counted as ',' '[' '{' bytes (an over-count when strings hold them), before decoding.
MAX_ITEMS = 500_000


class TooBig(ValueError):
    """A message over ``MAX_MESSAGE`` bytes or ``MAX_ITEMS`` values; never decoded."""
_HEADER = struct.Struct(">I")
FIRST_READ = 1 << 16  # body bytes asked for with the header (a pipe's default capacity)


def _plain(value: Any) -> Any:
    if isinstance(value, MappingProxyType):
        return dict(value)
    raise TypeError(f"{type(value).__name__} is not JSON data")


def _lenient(value: Any) -> Any:
    return dict(value) if isinstance(value, MappingProxyType) else repr(value)


def pack(message: Any, *, lenient: bool = False) -> bytes:
    """One message as bytes to ``write``. The host packs ``lenient``ly (a bridge's odd
    ``info`` value crosses as its repr); the jail strictly (its memo and records must be
    JSON data)."""
    body = json.dumps(message, separators=(",", ":"), ensure_ascii=False,
                      default=_lenient if lenient else _plain).encode()
    return _HEADER.pack(len(body)) + body


def send(fd: int, message: Any, *, lenient: bool = False, deadline: float | None = None) -> None:
    """Write one message (``pack`` then ``write``)."""
    write(fd, pack(message, lenient=lenient), deadline)


def write(fd: int, data: bytes, deadline: float | None = None) -> None:
    """Write all of ``data``. The host's end of the pipe is non-blocking: when it is full,
    this waits until ``deadline`` (``time.monotonic()``) at most, then ``TimeoutError``, so
    a jail that stops reading cannot hold the host."""
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view):]
        except BlockingIOError:  # a non-blocking pipe, full: wait until it drains
            _wait(fd, select.POLLOUT, deadline)


def write_some(fd: int, data: bytes) -> int:
    """Write what the non-blocking ``fd`` takes now, without waiting; the bytes written."""
    try:
        return os.write(fd, data)
    except BlockingIOError:
        return 0


def readable(fd: int) -> bool:
    """Whether ``fd`` holds bytes to read now (a closed pipe with none left is not)."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return any(event & select.POLLIN for _, event in poller.poll(0))


def read_exact(fd: int, n: int, deadline: float | None = None) -> bytes:
    """``n`` bytes from ``fd``; with a ``deadline`` (``time.monotonic()``), all of them by
    then or ``TimeoutError``: a jail that sends part of an answer and goes silent must not
    hold the host."""
    chunks, got = [], 0
    while got < n:
        if deadline is not None:
            _wait(fd, select.POLLIN, deadline)
        chunk = os.read(fd, min(n - got, 1 << 20))
        if not chunk:
            raise EOFError("the jail closed its pipe")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _wait(fd: int, event: int, deadline: float | None) -> None:
    """Block until ``fd`` is ready for ``event`` (or its other end closed); ``TimeoutError``
    past ``deadline``. ``poll``, not ``select``: a host with many open files has descriptors
    past 1024."""
    poller = select.poll()
    poller.register(fd, event)
    while True:
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            raise TimeoutError("the message was not sent or received whole before the deadline")
        if poller.poll(None if left is None else max(1, int(left * 1000))):
            return


def _spin(fd: int, spin_s: float) -> None:
    """Poll ``fd`` without sleeping for up to ``spin_s`` seconds: an answer that comes
    within it is read without the wake-up of a sleeping process (about 0.1 ms on a
    virtual machine, more than a whole exchange with an idle jail takes)."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    end = time.perf_counter() + spin_s
    while not poller.poll(0) and time.perf_counter() < end:
        pass


def recv(fd: int, *, max_items: int | None = None, deadline: float | None = None, spin_s: float = 0.0) -> Any:
    """Read and decode one message; with a ``deadline``, the whole message by then."""
    return json.loads(recv_body(fd, max_items=max_items, deadline=deadline, spin_s=spin_s))


def recv_body(fd: int, *, max_items: int | None = None, deadline: float | None = None,
              spin_s: float = 0.0) -> bytes:
    """Read one message's undecoded body (the jail decodes it under its CPU timer). The
    host passes a ``deadline`` (``time.monotonic()``) that covers the header and the body
    together, and ``spin_s`` to wait that long for the answer awake (``_spin``); the jail,
    waiting for the host's next call, passes neither."""
    if spin_s > 0:
        _spin(fd, spin_s)
    # one read takes the header and, for most messages, the whole body: a message is the
    # only one in flight (each side answers one, then waits), so a byte past its end is a
    # protocol violation, not the next message
    if deadline is not None:
        _wait(fd, select.POLLIN, deadline)
    head = os.read(fd, _HEADER.size + FIRST_READ)  # what has arrived: never blocks after the wait
    if not head:
        raise EOFError("the jail closed its pipe")
    if len(head) < _HEADER.size:
        head += read_exact(fd, _HEADER.size - len(head), deadline)
    (size,) = _HEADER.unpack_from(head)
    if size > MAX_MESSAGE:
        raise TooBig(f"an answer of {size:,} bytes exceeds the {MAX_MESSAGE:,} byte limit")
    body = head[_HEADER.size:]
    if len(body) > size:
        raise ValueError(f"{len(body) - size} bytes followed a message of {size:,} bytes")
    if len(body) < size:
        body += read_exact(fd, size - len(body), deadline)
    if max_items is not None and body.count(b",") + body.count(b"[") + body.count(b"{") > max_items:
        raise TooBig(f"an answer with more than {max_items:,} JSON values (memo and results together)")
    return body


def encode(value: Any) -> Any:
    """A hook argument or result as JSON data, tagged by record type."""
    t = type(value)
    if t is Action:
        return {"t": "Action", "tool": value.tool, "args": thaw(value.args)}
    if t is Observation:
        return {"t": "Observation", "text": value.text, "data": thaw(value.data)}
    if t is Block:
        return {"t": "Block", "reason": value.reason}
    if t is EnvResponse:
        return {"t": "EnvResponse", "observation": encode(value.observation), "reward": value.reward,
                "terminated": value.terminated, "truncated": value.truncated, "info": thaw(value.info)}
    if value is None or t is str:
        return {"t": "value", "value": value}
    return {"t": "other", "type": t.__name__[:80]}  # a wrong return type: named, not sent


class Foreign:
    """What a hook returned that is no record: only its type name crosses the pipe."""

    __slots__ = ("type_name",)

    def __init__(self, type_name: str) -> None:
        self.type_name = type_name


def _str(v: Any, what: str) -> str:
    if type(v) is not str:
        raise TypeError(f"{what} must be a str")
    return v


def _obj(v: Any, what: str) -> dict[str, Any]:
    if type(v) is not dict:
        raise TypeError(f"{what} must be an object")
    return v


def decode(data: Any) -> Any:
    """Rebuild a record from ``encode``'s form, checking every field (the jail is hostile)."""
    tag = _obj(data, "a jail message").get("t")
    if tag == "Action":
        return Action(tool=_str(data.get("tool"), "Action.tool"), args=_obj(data.get("args"), "Action.args"))
    if tag == "Observation":
        return Observation(text=_str(data.get("text"), "Observation.text"),
                           data=_obj(data.get("data"), "Observation.data"))
    if tag == "Block":
        return Block(reason=_str(data.get("reason"), "Block.reason"))
    if tag == "EnvResponse":
        obs = decode(data.get("observation"))
        reward, flags = data.get("reward"), (data.get("terminated"), data.get("truncated"))
        if type(obs) is not Observation or type(reward) not in (int, float) or \
                any(type(f) is not bool for f in flags):
            raise TypeError("malformed EnvResponse")
        try:
            reward = float(reward)
        except OverflowError:  # a JSON integer past the float range
            raise ValueError("malformed EnvResponse: its reward is out of range") from None
        return EnvResponse(observation=obs, reward=reward, terminated=flags[0], truncated=flags[1],
                           info=_obj(data.get("info"), "EnvResponse.info"))
    if tag == "other":
        return Foreign(_str(data.get("type"), "type"))
    if tag == "value" and (data.get("value") is None or type(data.get("value")) is str):
        return data.get("value")
    raise TypeError(f"unknown jail record {str(tag)[:40]!r}")
