"""fdatasync without a thread: Linux AIO's IOCB_CMD_FDSYNC, finished on an eventfd.

A sync round in a worker thread pays the GIL twice: the thread takes it to reach its
fdatasync and again to report back, each time after the busy event loop reaches its next
syscall. Submitted through AIO, the kernel runs the sync in its own worker and signals an
eventfd, which the event loop waits on like a socket; no Python thread is involved.

Linux 4.18 and later. ``KernelSync.open()`` returns None elsewhere (another OS or machine,
a kernel or sandbox that refuses io_setup), and the caller keeps its thread. No I/O waits
here (the store has no Trio below ``aio``): ``rmq.store.aio.sync_files`` submits the syncs of
mapped files, waits for ``eventfd`` on Trio and reaps them.
"""

from __future__ import annotations

import ctypes
import errno
import logging
import os
import platform
import struct
from collections.abc import Sequence

log = logging.getLogger("rmq.store.kernel_sync")

# io_setup, io_destroy, io_getevents, io_submit
_SYSCALLS = {"x86_64": (206, 207, 208, 209), "aarch64": (0, 1, 4, 2)}
IOCB_CMD_FDSYNC = 3
IOCB_FLAG_RESFD = 1
# struct iocb: aio_data, aio_key, aio_rw_flags, aio_lio_opcode, aio_reqprio, aio_fildes,
# aio_buf, aio_nbytes, aio_offset, aio_reserved2, aio_flags, aio_resfd (64 bytes)
_IOCB = struct.Struct("=QIIHhIQQqQII")
# struct io_event: data, obj, res, res2 (32 bytes)
_EVENT = struct.Struct("=QQqq")
MAX_EVENTS = 64


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class KernelSync:
    """An AIO context and its eventfd; see the module docstring."""

    def __init__(self, libc: ctypes.CDLL, calls: tuple[int, int, int, int], ctx: int, eventfd: int) -> None:
        self._libc = libc
        self._setup, self._destroy, self._getevents, self._submit = calls
        self._ctx = ctypes.c_ulong(ctx)
        self.eventfd = eventfd
        self._events = ctypes.create_string_buffer(_EVENT.size * MAX_EVENTS)
        self._zero = _Timespec(0, 0)

    @classmethod
    def open(cls) -> KernelSync | None:
        calls = _SYSCALLS.get(platform.machine())
        if calls is None or not hasattr(os, "eventfd"):
            return None
        try:
            libc = ctypes.CDLL(None, use_errno=True)
        except OSError:
            return None
        syscall = libc.syscall
        syscall.restype = ctypes.c_long
        ctx = ctypes.c_ulong(0)
        if syscall(ctypes.c_long(calls[0]), ctypes.c_long(MAX_EVENTS), ctypes.byref(ctx)) != 0:
            log.info("no kernel AIO (io_setup: %s): syncs run in a thread", os.strerror(ctypes.get_errno()))
            return None
        eventfd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        return cls(libc, calls, ctx.value, eventfd)

    def submit(self, fds: Sequence[int], tag: int) -> None:
        """Start an fdatasync of each descriptor; their completions carry ``tag``.

        Raises:
            OSError: the kernel refused (EINVAL where it cannot sync this way); those taken
                before the refusal still complete.
        """
        flags, resfd = IOCB_FLAG_RESFD, self.eventfd
        blocks = [
            ctypes.create_string_buffer(_IOCB.pack(tag, 0, 0, IOCB_CMD_FDSYNC, 0, fd, 0, 0, 0, 0, flags, resfd))
            for fd in fds
        ]
        pointers = (ctypes.c_void_p * len(blocks))(*[ctypes.addressof(b) for b in blocks])
        done = 0
        while done < len(blocks):  # io_submit may take fewer than asked
            n = self._libc.syscall(
                ctypes.c_long(self._submit),
                self._ctx,
                ctypes.c_long(len(blocks) - done),
                ctypes.c_void_p(ctypes.addressof(pointers) + done * ctypes.sizeof(ctypes.c_void_p)),
            )
            if n < 0:
                err = ctypes.get_errno()
                raise OSError(err, f"io_submit: {os.strerror(err)}")
            done += n

    def reap(self) -> list[tuple[int, int]]:
        """The (tag, result) of each finished sync, result 0 or -errno; [] when none."""
        try:
            os.eventfd_read(self.eventfd)
        except BlockingIOError:
            pass
        out: list[tuple[int, int]] = []
        while True:
            n = self._libc.syscall(
                ctypes.c_long(self._getevents),
                self._ctx,
                ctypes.c_long(0),
                ctypes.c_long(MAX_EVENTS),
                self._events,
                ctypes.byref(self._zero),
            )
            if n < 0:
                err = ctypes.get_errno()
                if err == errno.EINTR:
                    continue
                raise OSError(err, f"io_getevents: {os.strerror(err)}")
            for i in range(n):
                data, _, res, _ = _EVENT.unpack_from(self._events, i * _EVENT.size)
                out.append((data, res))
            if n < MAX_EVENTS:
                return out

    def close(self) -> None:
        """Tear the context down (the kernel waits for syncs still running)."""
        if self.eventfd >= 0:
            self._libc.syscall(ctypes.c_long(self._destroy), self._ctx)
            os.close(self.eventfd)
            self.eventfd = -1
