"""Client identity: the local IP, client ids and UNIQ_KEY message ids.

`UniqueIdGenerator` makes ids the way RocketMQ's MessageClientIDSetter does (PROTOCOL.md
5.5): 16 bytes as 32 uppercase hex characters,

    ip (4 bytes; 16 for IPv6) | pid (int16) | class-loader hash (int32, random per process)
    | ms since the start of the current month, local time (int32) | counter (int16)

The first three parts are fixed for the process; the counter wraps at 2**16.
"""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import itertools
import os
import random
import socket
import struct
import time
from collections.abc import Callable

_PREFIX = struct.Struct(">hi")  # pid (int16), class-loader hash (int32)
_SUFFIX = struct.Struct(">iH")  # ms since month start (int32), counter (uint16)


def wall_clock_ms() -> int:
    """Milliseconds since the epoch: the default wall clock of the client."""
    return time.time_ns() // 1_000_000


def local_ip() -> str:
    """The address other hosts would reach us at (IPv4 preferred), else 127.0.0.1.

    Uses the route the kernel would pick for an outside address; a UDP connect sends nothing.
    """
    for family, target in ((socket.AF_INET, "10.255.255.255"), (socket.AF_INET6, "fd00::1")):
        with contextlib.suppress(OSError), socket.socket(family, socket.SOCK_DGRAM) as s:
            s.connect((target, 9))
            addr = s.getsockname()[0]
            if not ipaddress.ip_address(addr).is_unspecified:
                return str(addr)
    with contextlib.suppress(OSError):
        return socket.gethostbyname(socket.gethostname())
    return "127.0.0.1"


def _month_bounds(now_ms: int) -> tuple[int, int]:
    """(start of this month, start of next month) in epoch ms, local time."""
    now = datetime.datetime.fromtimestamp(now_ms / 1000).astimezone()
    start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    nxt = start.replace(year=start.year + 1, month=1) if start.month == 12 else start.replace(month=start.month + 1)
    return int(start.timestamp() * 1000), int(nxt.timestamp() * 1000)


class UniqueIdGenerator:
    """MessageClientIDSetter.createUniqID: `next_id()` gives the next UNIQ_KEY."""

    def __init__(
        self,
        ip: str | None = None,
        *,
        pid: int | None = None,
        loader_hash: int | None = None,
        clock: Callable[[], int] = wall_clock_ms,
    ) -> None:
        packed_ip = ipaddress.ip_address(ip or local_ip()).packed
        pid = os.getpid() if pid is None else pid
        loader_hash = random.getrandbits(32) - 2**31 if loader_hash is None else loader_hash
        # int16 / int32 wraparound, as Java's (short) and (int) casts
        prefix = _PREFIX.pack(((pid + 2**15) % 2**16) - 2**15, loader_hash)
        self._fixed = (packed_ip + prefix).hex().upper()
        self._clock = clock
        self._counter = itertools.count()
        self._start, self._next_start = _month_bounds(clock())
        self._last_ms: int | None = None  # the clock at the last id, and the id's part up to the counter
        self._head = ""

    @property
    def length(self) -> int:
        """Characters in every id this generator makes (32, or 56 with an IPv6 address)."""
        return len(self._fixed) + 2 * _SUFFIX.size

    def next_id(self) -> str:
        now = self._clock()
        if now != self._last_ms:  # the time part changes once a millisecond, not per id
            if now >= self._next_start:
                self._start, self._next_start = _month_bounds(now)
            diff = now - self._start
            if -1_000_000 < diff < 0:  # the clock stepped back a little (NTP)
                diff = 0
            # _SUFFIX's bytes in hex: the int32 diff's two's complement, then the counter's
            self._head = f"{self._fixed}{diff & 0xFFFFFFFF:08X}"
            self._last_ms = now
        return f"{self._head}{next(self._counter) & 0xFFFF:04X}"


def default_instance_name() -> str:
    """ClientConfig's replacement for instanceName DEFAULT in 4.9.x: `<pid>#<nanoTime>`."""
    return f"{os.getpid()}#{time.monotonic_ns()}"


def client_id(ip: str, instance_name: str, unit_name: str | None = None) -> str:
    """`clientIP@instanceName[@unitName]` (ClientConfig.buildMQClientId)."""
    return f"{ip}@{instance_name}" + (f"@{unit_name}" if unit_name else "")
