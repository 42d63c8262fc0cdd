"""KernelSync: fdatasync through Linux AIO, finished on an eventfd (rmq.store.kernel_sync)."""

from __future__ import annotations

import os
import select
from pathlib import Path

import pytest

from rmq.store.kernel_sync import KernelSync


@pytest.fixture
def ks():
    ks = KernelSync.open()
    if ks is None:  # the store then syncs in a thread, as test_aio covers
        pytest.skip("no Linux AIO here")
    yield ks
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


def test_a_bad_descriptor_is_refused(ks: KernelSync, tmp_path: Path) -> None:
    fd = os.open(tmp_path / "gone", os.O_RDWR | os.O_CREAT, 0o644)
    os.close(fd)
    with pytest.raises(OSError):
        ks.submit([fd], 3)
