"""KernelSync: fdatasync through io_uring or Linux AIO, finished on an eventfd (rmq.store.kernel_sync)."""

from __future__ import annotations

import errno
import os
import select
from pathlib import Path

import pytest

from rmq.store.kernel_sync import AioSync, KernelSync, UringSync


@pytest.fixture(params=[UringSync, AioSync])
def ks(request):
    ks = request.param.open()
    if ks is None:  # the store then takes the other way, or a thread, as test_aio covers
        pytest.skip(f"no {request.param.name} here")
    yield ks
    ks.close()


def test_open_prefers_io_uring() -> None:
    ring = UringSync.open()
    if ring is None:
        pytest.skip("no io_uring here")
    ring.close()
    ks = KernelSync.open()
    assert isinstance(ks, UringSync) and ks.name == "io_uring"
    ks.close()


def _wait(ks: KernelSync, count: int) -> list[tuple[int, int]]:
    poller = select.poll()
    poller.register(ks.eventfd, select.POLLIN)
    got: list[tuple[int, int]] = []
    while len(got) < count:
        assert poller.poll(10_000), "no completion within 10 s"
        got += ks.reap()
    return got


def test_syncs_complete_with_their_tag(ks: KernelSync, tmp_path: Path) -> None:
    fds = [os.open(tmp_path / f"f{i}", os.O_RDWR | os.O_CREAT, 0o644) for i in range(3)]
    try:
        for fd in fds:
            os.pwrite(fd, b"x" * 8192, 0)
        ks.submit(fds[:1], 1)
        assert _wait(ks, 1) == [(1, 0)]
        ks.submit(fds, 2)
        assert _wait(ks, 3) == [(2, 0)] * 3
        assert ks.reap() == []  # nothing left, and the eventfd is drained
    finally:
        for fd in fds:
            os.close(fd)


def test_a_bad_descriptor_is_refused_or_fails(ks: KernelSync, tmp_path: Path) -> None:
    fd = os.open(tmp_path / "gone", os.O_RDWR | os.O_CREAT, 0o644)
    os.close(fd)
    if isinstance(ks, AioSync):  # AIO looks the descriptor up at submit
        with pytest.raises(OSError):
            ks.submit([fd], 3)
    else:  # io_uring, in its worker: the completion carries the error
        ks.submit([fd], 3)
        assert _wait(ks, 1) == [(3, -errno.EBADF)]


def test_many_rounds_reuse_the_ring(ks: KernelSync, tmp_path: Path) -> None:
    # more submissions than the ring has entries, each reaped before the next
    fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        for tag in range(200):
            os.pwrite(fd, b"y" * 100, tag * 100)
            ks.submit([fd], tag)
            assert _wait(ks, 1) == [(tag, 0)]
    finally:
        os.close(fd)
