"""Ports for servers that tests start in child processes.

They come from below the kernel's ephemeral range. A port found free with bind(0) lies inside
it, and any outgoing connection can take it before the child binds it: one of the child's own
peers dialing it, or a client of an earlier server. The child then fails to start, now and
then. Below the range only a listener can hold a port, and this process hands each out once.
"""

from __future__ import annotations

import random
import socket
from collections.abc import Iterable

_given: set[int] = set()


def _ephemeral_low() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def _bindable(port: int) -> bool:
    with socket.socket() as s:  # no SO_REUSEADDR: a TIME_WAIT on the port counts as taken
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_ports(span: int = 1, *, below: int = 0, extra: Iterable[int] = ()) -> int:
    """A port p with p-below .. p+span-1 and p+e for each e in extra free now and never handed
    out before by this process (a broker listens on listenPort-2, listenPort and +1)."""
    offsets = [*range(-below, span), *extra]
    low, high = 10000 + below, _ephemeral_low() - span
    for _ in range(500):
        base = random.randrange(low, max(high, low + 1))
        block = [base + o for o in offsets]
        if max(block) < 65536 and not _given.intersection(block) and all(map(_bindable, block)):
            _given.update(block)
            return base
    raise RuntimeError("no free block of ports")
