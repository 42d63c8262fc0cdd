"""Direct writes: a synchronous, non-blocking write to the socket under a stage stack.

Trio writes through `await stream.send_all(...)`, which yields to the scheduler even when
the socket takes the bytes at once. A connection's answers and requests go through its
writer task, so one frame written alone costs two scheduler passes and a task switch on
top of the `send` itself: at one request in flight that is a good part of a round trip.
When nothing is queued and nothing is being written, the connection instead writes the
frame itself with the function made here (see Connection._write_now).

Only plain TCP under stages that pass bytes through unchanged (idle, prefixed) gets one;
TLS and WebSocket frame or encrypt what they send and keep the writer task.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import trio

DirectWrite = Callable[[bytes], int]


def direct_writer(stream: trio.abc.Stream) -> DirectWrite | None:
    """A function writing as much of its argument as the socket takes now and returning
    the count (BlockingIOError when it takes nothing; OSError when the socket is broken),
    or None when `stream` is not plain TCP underneath."""
    if isinstance(stream, trio.SocketStream):
        fd = stream.socket.fileno()
        write = os.write

        def write_socket(data: bytes) -> int:
            return write(fd, data)

        return write_socket
    make = getattr(stream, "direct_writer", None)
    return make() if make is not None else None
