"""A DLedger member's log syncs (sync_flush): the plan, and the flusher through Linux AIO or a
thread, with real files and a one-member group in this process."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest
import trio

from rmq.dledger.node import DLedgerNode, NodeConfig
from rmq.raft.core import RaftConfig
from rmq.store.dledger_log import DLedgerLog
from rmq.store.kernel_sync import KernelSync

FILE = 64 * 1024


def test_a_sync_plan_covers_what_was_appended_and_a_cut_voids_its_mark(tmp_path: Path) -> None:
    log = DLedgerLog(tmp_path, "n0", data_file_size=FILE)
    for i in range(40):  # more than one data file
        log.append(i, 1, b"x" * 3000)
    plan = log.sync_plan()
    assert plan.ends == (log.data.max_offset, log.index.max_offset)
    assert len({mf.path for mf, _ in plan.files}) == len(log.data.files) + len(log.index.files)
    for mf, upto in plan.files:
        mf.sync(upto)
    log.synced(plan)
    assert (log.data.flushed_where, log.index.flushed_where) == plan.ends
    # a plan made before the log was cut vouches for nothing past the cut
    log.append(40, 1, b"y" * 3000)
    stale = log.sync_plan()
    log.truncate_after(30)
    log.append(31, 2, b"z" * 10)
    log.synced(stale)
    assert log.data.flushed_where <= log.data.max_offset
    assert log.data.flushed_where < stale.ends[0]
    log.close()


async def _commit_through_one_member(tmp_path: Path, refuse: bool) -> DLedgerNode:
    config = NodeConfig(
        "n0", {"n0": "127.0.0.1:0"}, str(tmp_path), raft=RaftConfig(election_timeout_ms=100, heartbeat_interval_ms=50),
        data_file_size=FILE, sync_flush=True,
    )  # fmt: skip
    node = DLedgerNode(config)
    async with trio.open_nursery() as nursery:
        await nursery.start(node.serve)
        with trio.fail_after(10):
            while not node.core.is_leader:
                await trio.sleep(0.01)
        if refuse and node._kernel_sync is not None:

            class Refusing(type(node._kernel_sync)):  # a filesystem without fsync there: EINVAL
                def submit(self, fds: object, tag: int) -> None:
                    raise OSError(errno.EINVAL, "io_submit: Invalid argument")

            node._kernel_sync.__class__ = Refusing
        last = -1
        for i in range(50):
            last = node.propose(b"entry %d " % i * 100)
        with trio.fail_after(10):
            while node.core.commit_index < last:  # one member: committed once synced
                await trio.sleep(0.01)
        assert node.dlog.data.flushed_where >= node.dlog.entry_end(last)
        nursery.cancel_scope.cancel()
    return node


async def test_a_sync_flush_member_syncs_its_log_through_the_kernel(tmp_path: Path) -> None:
    probe = KernelSync.open()
    if probe is None:
        pytest.skip("no kernel sync here")
    probe.close()
    node = await _commit_through_one_member(tmp_path, refuse=False)
    assert node._sync_tag > 0  # the syncs went through the kernel (io_uring or AIO)
    assert node._kernel_sync is None  # closed with the member


async def test_a_kernel_that_refuses_aio_leaves_the_syncs_to_a_thread(tmp_path: Path) -> None:
    node = await _commit_through_one_member(tmp_path, refuse=True)
    assert node._kernel_sync is None
    reopened = DLedgerLog(tmp_path, "n0", data_file_size=FILE)
    assert reopened.end_index == node.dlog.end_index
    reopened.close()
