"""fdatasync without a thread: submitted from the event loop, finished on an eventfd.

A sync round in a worker thread pays the GIL twice: the thread takes it to reach its
fdatasync and again to report back, each time after the busy event loop reaches its next
syscall. Submitted to the kernel instead, the sync runs in a kernel worker and signals an
eventfd, which the event loop waits on like a socket; no Python thread is involved.

Two ways, tried in this order by ``KernelSync.open()``:

* io_uring (Linux 5.1+, x86_64 here: the rings are shared memory written without explicit
  barriers, which x86's ordering makes safe). Its fsync runs in an io-wq worker, a thread of
  this process that the scheduler puts on any idle CPU.
* Linux AIO's IOCB_CMD_FDSYNC (4.18+). Its worker is queued on the submitting CPU, so it waits
  for the event loop that submitted it to give up that CPU: with the loop busy, until the next
  scheduler tick (4 ms at HZ=250) rather than the 0.5 ms the sync takes.

``open()`` returns None where neither serves (another OS or machine, a kernel or sandbox
that refuses both), and the caller keeps its thread. No I/O waits here (the store has no
Trio below ``aio``): ``rmq.store.aio.sync_files`` submits the syncs of mapped files, waits for
``eventfd`` on Trio and reaps them.
"""

from __future__ import annotations

import abc
import ctypes
import errno
import logging
import mmap
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

# io_uring_setup, io_uring_enter, io_uring_register: one number on every architecture
URING_SETUP, URING_ENTER, URING_REGISTER = 425, 426, 427
URING_ENTRIES = 64
IORING_OP_FSYNC = 3
IORING_FSYNC_DATASYNC = 1
IORING_REGISTER_EVENTFD = 4
IORING_FEAT_SINGLE_MMAP = 1
IORING_OFF_SQ_RING, IORING_OFF_CQ_RING, IORING_OFF_SQES = 0, 0x8000000, 0x10000000
# struct io_uring_params: sq_entries, cq_entries, flags, sq_thread_cpu, sq_thread_idle,
# features, wq_fd, resv[3], then the SQ and CQ ring offsets (40 bytes each; 120 in all)
_PARAMS = struct.Struct("=7I3I")
_RING_OFFSETS = struct.Struct("=8IQ")  # sq: head tail mask entries flags dropped array; cq: ... cqes
# struct io_uring_sqe as an fsync uses it: opcode, flags, ioprio, fd, off, addr, len,
# fsync_flags, user_data, then zeros (64 bytes)
_SQE = struct.Struct("=BBHiQQIIQ24x")
_CQE = struct.Struct("=QiI")  # user_data, res, flags
_U32 = struct.Struct("=I")


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class KernelSync(abc.ABC):
    """Syncs submitted to the kernel, finished on ``eventfd``; see the module docstring."""

    name = ""  # how logs name the way: "io_uring" or "AIO"
    eventfd = -1

    @staticmethod
    def open() -> KernelSync | None:
        """io_uring where it serves, else AIO, else None."""
        return UringSync.open() or AioSync.open()

    @abc.abstractmethod
    def submit(self, fds: Sequence[int], tag: int) -> None:
        """Start an fdatasync of each descriptor; their completions carry ``tag``.

        Raises:
            OSError: the kernel refused (EINVAL where it cannot sync this way); those taken
                before the refusal still complete.
        """

    def completed(self) -> bool:
        """Whether a completion may wait to be reaped, known without a syscall: True where
        the kernel's ring is visible (io_uring), False where only ``eventfd`` tells."""
        return False

    def wake(self) -> None:
        """Make ``eventfd`` readable, so that a task waiting on it looks again."""
        os.eventfd_write(self.eventfd, 1)

    def _drain_eventfd(self) -> None:
        """Reset ``eventfd`` before reaping: a completion after this makes it readable again."""
        try:
            os.eventfd_read(self.eventfd)
        except BlockingIOError:
            pass

    @abc.abstractmethod
    def reap(self) -> list[tuple[int, int]]:
        """The (tag, result) of each finished sync, result 0 or -errno; [] when none."""

    @abc.abstractmethod
    def close(self) -> None:
        """Tear down (the kernel waits for syncs still running)."""


def _libc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None
    libc.syscall.restype = ctypes.c_long
    return libc


class AioSync(KernelSync):
    """An AIO context and its eventfd."""

    name = "AIO"

    def __init__(self, libc: ctypes.CDLL, calls: tuple[int, int, int, int], ctx: int, eventfd: int) -> None:
        self._libc = libc
        self._setup, self._destroy, self._getevents, self._submit = calls
        self._ctx = ctypes.c_ulong(ctx)
        self.eventfd = eventfd
        self._events = ctypes.create_string_buffer(_EVENT.size * MAX_EVENTS)
        self._zero = _Timespec(0, 0)

    @classmethod
    def open(cls) -> AioSync | None:
        calls = _SYSCALLS.get(platform.machine())
        libc = _libc() if calls is not None and hasattr(os, "eventfd") else None
        if libc is None or calls is None:
            return None
        ctx = ctypes.c_ulong(0)
        if libc.syscall(ctypes.c_long(calls[0]), ctypes.c_long(MAX_EVENTS), ctypes.byref(ctx)) != 0:
            log.info("no kernel AIO (io_setup: %s): syncs run in a thread", os.strerror(ctypes.get_errno()))
            return None
        eventfd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        return cls(libc, calls, ctx.value, eventfd)

    def submit(self, fds: Sequence[int], tag: int) -> None:
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
        self._drain_eventfd()
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
        if self.eventfd >= 0:
            self._libc.syscall(ctypes.c_long(self._destroy), self._ctx)
            os.close(self.eventfd)
            self.eventfd = -1


class UringSync(KernelSync):
    """An io_uring with its eventfd registered: each fsync is one submission queue entry."""

    name = "io_uring"

    def __init__(self, libc: ctypes.CDLL, fd: int, params: bytes, eventfd: int) -> None:
        self._libc = libc
        self._fd = fd
        self.eventfd = eventfd
        sq_entries, cq_entries, _, _, _, features, *_ = _PARAMS.unpack_from(params, 0)
        sq_head, self._sq_tail, sq_mask, _, _, _, self._sq_array, *_ = _RING_OFFSETS.unpack_from(params, 40)
        self._cq_head, self._cq_tail, cq_mask, _, _, self._cqes, *_ = _RING_OFFSETS.unpack_from(params, 80)
        sq_size = self._sq_array + sq_entries * 4
        cq_size = self._cqes + cq_entries * _CQE.size
        if features & IORING_FEAT_SINGLE_MMAP:
            self._sq = self._cq = mmap.mmap(fd, max(sq_size, cq_size), offset=IORING_OFF_SQ_RING)
        else:
            self._sq = mmap.mmap(fd, sq_size, offset=IORING_OFF_SQ_RING)
            self._cq = mmap.mmap(fd, cq_size, offset=IORING_OFF_CQ_RING)
        self._sqes = mmap.mmap(fd, sq_entries * _SQE.size, offset=IORING_OFF_SQES)
        self._sq_mask = _U32.unpack_from(self._sq, sq_mask)[0]
        self._cq_mask = _U32.unpack_from(self._cq, cq_mask)[0]
        self._sq_head = sq_head

    @classmethod
    def open(cls) -> UringSync | None:
        if platform.machine() != "x86_64" or not hasattr(os, "eventfd"):
            return None
        libc = _libc()
        if libc is None:
            return None
        params = ctypes.create_string_buffer(120)
        fd = libc.syscall(ctypes.c_long(URING_SETUP), ctypes.c_long(URING_ENTRIES), params)
        if fd < 0:  # ENOSYS, or EPERM where a sandbox or kernel.io_uring_disabled forbids it
            log.info("no io_uring (io_uring_setup: %s)", os.strerror(ctypes.get_errno()))
            return None
        eventfd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        try:
            ring = cls(libc, fd, params.raw, eventfd)
        except (OSError, ValueError) as exc:  # the rings could not be mapped
            log.info("no io_uring (%s)", exc)
            os.close(eventfd)
            os.close(fd)
            return None
        value = ctypes.c_int(eventfd)
        if libc.syscall(ctypes.c_long(URING_REGISTER), fd, IORING_REGISTER_EVENTFD, ctypes.byref(value), 1) < 0:
            log.info("no io_uring (io_uring_register: %s)", os.strerror(ctypes.get_errno()))
            ring.close()
            return None
        return ring

    def submit(self, fds: Sequence[int], tag: int) -> None:
        sq, sqes, mask = self._sq, self._sqes, self._sq_mask
        tail = _U32.unpack_from(sq, self._sq_tail)[0]
        if len(fds) > URING_ENTRIES - (tail - _U32.unpack_from(sq, self._sq_head)[0]) % (1 << 32):
            raise OSError(errno.EBUSY, "io_uring submission queue full")
        for fd in fds:
            slot = tail & mask
            _SQE.pack_into(sqes, slot * _SQE.size, IORING_OP_FSYNC, 0, 0, fd, 0, 0, 0, IORING_FSYNC_DATASYNC, tag)
            _U32.pack_into(sq, self._sq_array + 4 * slot, slot)
            tail = (tail + 1) % (1 << 32)
        _U32.pack_into(sq, self._sq_tail, tail)  # the kernel reads the entries once it sees this
        left = len(fds)
        while left:
            n = self._libc.syscall(ctypes.c_long(URING_ENTER), self._fd, left, 0, 0, None, 0)
            if n < 0:
                err = ctypes.get_errno()
                if err == errno.EINTR:
                    continue
                raise OSError(err, f"io_uring_enter: {os.strerror(err)}")
            if n == 0:  # the kernel took none: asking again would spin
                raise OSError(errno.EAGAIN, "io_uring_enter took no entry")
            left -= n

    def completed(self) -> bool:
        cq = self._cq
        head: int = _U32.unpack_from(cq, self._cq_head)[0]
        tail: int = _U32.unpack_from(cq, self._cq_tail)[0]
        return head != tail

    def reap(self) -> list[tuple[int, int]]:
        self._drain_eventfd()
        cq, mask, cqes = self._cq, self._cq_mask, self._cqes
        head = _U32.unpack_from(cq, self._cq_head)[0]
        tail = _U32.unpack_from(cq, self._cq_tail)[0]
        out: list[tuple[int, int]] = []
        while head != tail:
            data, res, _ = _CQE.unpack_from(cq, cqes + (head & mask) * _CQE.size)
            out.append((data, res))
            head = (head + 1) % (1 << 32)
        _U32.pack_into(cq, self._cq_head, head)
        return out

    def close(self) -> None:
        if self._fd >= 0:
            for m in {id(x): x for x in (self._sq, self._cq, self._sqes)}.values():
                m.close()
            os.close(self._fd)  # the kernel finishes the fsyncs still running
            os.close(self.eventfd)
            self._fd = self.eventfd = -1
