"""DLedgerCommitLog: a broker whose CommitLog is replicated by its DLedger group
(enableDLegerCommitLog=true), as RocketMQ's DLedgerCommitLog does it.

Every append the leader makes to its CommitLog becomes one DLedger entry whose body is the
appended 4.x message records, byte for byte (offsets, queue offsets and store timestamps
included). A send is answered once its group has committed the entry: the store's SYNC_MASTER
wait (``AsyncMessageStore.replica_acked``) is woken by commits instead of slave acks.

Every member applies committed entries, in index order, to its own CommitLog, so all members
hold the same records at the same offsets; a follower writes them, the leader finds its own
already there. Consume queues and the index are built by the usual dispatch, which never goes
past the last committed entry, so no consumer sees a message its group could still lose.

Roles follow the Raft core: the leader registers as the master (brokerId 0) once it has
applied everything committed before its term, the others as slaves (brokerId = the number in
``dLegerSelfId`` + 1). A leader that loses its leadership cuts its CommitLog back to the last
committed entry; if the new leader commits that tail after all, it comes back as any other
committed entry does.

After a restart the DLedger log is the truth: the CommitLog is cut back to the end of the last
committed entry it holds whole, and the rest is applied again as commits are learnt.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

import trio

from rmq.protocol.message import peek_size_and_magic
from rmq.raft.core import NotLeader
from rmq.store.aio import Replication
from rmq.store.errors import StoreError
from rmq.store.formats import BLANK_MAGIC

from .node import DLedgerNode, NodeConfig

if TYPE_CHECKING:
    from rmq.store.aio import AsyncMessageStore

log = logging.getLogger("rmq.broker.dledger")

CHECKPOINT_INTERVAL = 1.0  # seconds between writes of the committed index
_PHY = slice(28, 36)  # a 4.x record's PHYSICALOFFSET field


def record_offset(body: bytes | memoryview) -> int:
    """The CommitLog offset of the first record of an entry's body."""
    return int.from_bytes(body[_PHY], "big", signed=True)


def slave_id(self_id: str, peers: list[str]) -> int:
    """The brokerId a member registers with while it follows: RocketMQ's ``n<k>`` → k + 1
    (DLedgerCommitLog.getId); other names count by their place in dLegerPeers."""
    if self_id[:1].isalpha() and self_id[1:].isdigit():
        return int(self_id[1:]) + 1
    return peers.index(self_id) + 1


class DLedgerCommitLog(Replication):
    """The DLedger member under a broker's store.

    Args:
        astore: the broker's store (open; its tasks run while this runs).
        config: the member's settings (its log lives in ``<store root>/dledger-<selfId>``).
        preferred_leader: preferredLeaderId, "" for none.
        on_role: told ``True`` when this member starts serving as the group's master and
            ``False`` when it stops (or starts as a follower).
    """

    def __init__(
        self,
        astore: AsyncMessageStore,
        config: NodeConfig,
        on_role: Callable[[bool], None],
        *,
        preferred_leader: str = "",
    ) -> None:
        self.astore = astore
        self.store = astore.store
        self.node = DLedgerNode(config, on_commit=self._on_commit, on_role=self._on_role_change)
        self.dlog = self.node.dlog
        self._on_role = on_role
        self.preferred_leader = preferred_leader  # preferredLeaderId: leadership goes there
        self.master = False  # serving writes (leader, caught up)
        self.applied_index = -1  # last committed entry in the CommitLog
        self.committed_end = 0  # CommitLog offset where the applied entries end
        self._proposed_end = 0  # leader: CommitLog offset up to which entries were proposed
        self._own: deque[tuple[int, int]] = deque()  # leader: (index, end offset) proposed, not applied
        self._cut_pending = False
        self._wake = trio.Event()
        self._propose_wanted = trio.Event()
        self._reconcile()

    # -- startup -------------------------------------------------------------------------------

    def _reconcile(self) -> None:
        """Make the CommitLog hold exactly the committed entries it can hold whole."""
        store, dlog = self.store, self.dlog
        cl_end = store.max_phy_offset
        if dlog.end_index < 0:
            if cl_end > store.min_phy_offset:
                raise StoreError(
                    "this store has a CommitLog but no DLedger log: a DLedger member starts from an empty store"
                )
            return
        last = min(dlog.committed_index, dlog.end_index)
        index = last
        while index >= dlog.begin_index:
            body = dlog.entry(index).body
            if body:
                end = record_offset(body) + len(body)
                if end <= cl_end:
                    self.applied_index, self.committed_end = index, end
                    break
            index -= 1
        else:
            self.applied_index = dlog.begin_index - 1
            self.committed_end = store.min_phy_offset
        if cl_end > self.committed_end:
            log.info("DLedger: CommitLog holds %d bytes past its last committed entry", cl_end - self.committed_end)
            store.truncate_commitlog(self.committed_end)
        store.dispatcher.limit = self.committed_end
        self._proposed_end = store.max_phy_offset

    # -- Replication (the store calls these) ---------------------------------------------------

    def appended(self) -> None:
        """New records in the leader's CommitLog: the proposer task makes them entries once
        the appends at hand are done, so sends that arrive together share one entry."""
        self._propose_wanted.set()

    async def _proposer(self) -> None:
        while True:
            await self._propose_wanted.wait()
            self._propose_wanted = trio.Event()
            if self.master:
                self.propose_pending()

    def propose_pending(self) -> None:
        """Propose what the leader appended and has not proposed, one entry per CommitLog
        file touched. While a leadership transfer holds proposals back, the records wait
        (``_leader_loop`` proposes them if this member keeps leading; a step-down cuts them)."""
        cl = self.store.commitlog
        end = cl.max_offset
        start = cursor = self._proposed_end
        while cursor < end:
            mf = cl.files.find(cursor)
            if mf is None:
                break
            pos = cursor - mf.start
            size, magic = peek_size_and_magic(mf.mm, pos)
            if magic == BLANK_MAGIC:  # end of this file: what came before is one entry
                if not self._propose(start, cursor):
                    return
                start = cursor = mf.end
                self._proposed_end = start
                continue
            cursor += size
        if self._propose(start, cursor):
            self._proposed_end = cursor

    def _propose(self, start: int, end: int) -> bool:
        if end <= start:
            return True
        data = bytes(self.store.commitlog.transfer_data(start, end - start) or b"")
        if len(data) != end - start:
            raise StoreError(f"DLedger: cannot read CommitLog {start}..{end} to replicate it")
        try:
            index = self.node.propose(data)
        except NotLeader:
            return False
        self._own.append((index, end))
        return True

    def unavailable(self, end_offset: int) -> str | None:
        if not self.master:
            return "this broker is not the leader of its DLedger group"
        return None

    # -- events from the member ----------------------------------------------------------------

    def _on_commit(self, index: int) -> None:
        self._wake.set()

    def _on_role_change(self) -> None:
        if self.master and not self.node.core.is_leader:
            self.master = False
            self._cut_pending = True
            self._own.clear()
            self.astore.fail_replica_waits()
            self._on_role(False)
        self._wake.set()

    # -- the apply task ------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            await nursery.start(self.node.serve)
            nursery.start_soon(self._checkpointer)
            nursery.start_soon(self._leader_loop)
            nursery.start_soon(self._proposer)
            self._on_role(False)
            task_status.started()
            while True:
                await self._wake.wait()
                self._wake = trio.Event()
                await self._step()

    async def _step(self) -> None:
        if self._cut_pending:
            self._cut_pending = False
            await self.astore.truncate_commitlog(self.committed_end)
            self._proposed_end = self.store.max_phy_offset
        self._apply_committed()
        core = self.node.core
        if core.is_leader and not self.master and self.applied_index == core.commit_index:
            if self.dlog.term_at(core.commit_index) != core.term:
                return  # the no-op of this term is not committed yet
            await self.astore.wait_dispatched(self.committed_end)
            if not core.is_leader or self.applied_index != core.commit_index or self._cut_pending:
                self._wake.set()
                return
            self.store.reset_queue_offsets()
            self._proposed_end = self.store.max_phy_offset
            self.master = True
            log.info("%s serves as the master of its group in term %d", self.node.config.self_id, core.term)
            self._on_role(True)

    def _apply_committed(self) -> None:
        commit = self.node.core.commit_index
        if commit <= self.applied_index:
            return
        store, own = self.store, self._own
        end = self.committed_end
        for index in range(self.applied_index + 1, commit + 1):
            if own and own[0][0] == index:  # the leader's own append: already in the CommitLog
                end = own.popleft()[1]
                continue
            body = self.node.body_at(index)
            if body:  # empty: a leader's no-op
                offset = record_offset(body)
                store.append_entry(offset, body)  # StoreError if it does not continue the log
                end = offset + len(body)
            self.applied_index = index
            self.committed_end = end
        self.applied_index = commit
        self.committed_end = end
        store.dispatcher.limit = end
        self.astore.replica_acked(end)
        self.astore.wake_reput()

    async def _leader_loop(self) -> None:
        """Every heartbeat interval, as the master: propose records a leadership transfer held
        back, and hand leadership to preferredLeaderId once that member holds the whole log."""
        interval = self.node.config.raft.heartbeat_interval_ms / 1000
        while True:
            await trio.sleep(interval)
            if not self.master:
                continue
            if self._proposed_end < self.store.max_phy_offset:
                self.propose_pending()
            preferred = self.preferred_leader
            core = self.node.core
            if preferred and preferred != self.node.config.self_id and core.caught_up(preferred):
                log.info("handing leadership of %s to the preferred leader %s", self.node.config.group, preferred)
                self.node.transfer_leadership(preferred)

    async def _checkpointer(self) -> None:
        """Keep the committed index on disk (a restart cuts the CommitLog back to it)."""
        saved = self.dlog.committed_index
        while True:
            await trio.sleep(CHECKPOINT_INTERVAL)
            if self.dlog.committed_index != saved:
                saved = self.dlog.committed_index
                await trio.to_thread.run_sync(self.dlog.save_checkpoint)

    # -- operations ----------------------------------------------------------------------------

    def status_fields(self) -> dict[str, str]:
        """Runtime info fields (GET_BROKER_RUNTIME_INFO): role, term, indexes, leader."""
        core = self.node.core
        return {
            "dLegerGroup": self.node.config.group,
            "dLegerSelfId": self.node.config.self_id,
            "dLegerRole": core.role.value,
            "dLegerTerm": str(core.term),
            "dLegerLeaderId": core.leader_id or "",
            "dLegerCommitIndex": str(core.commit_index),
            "dLegerEndIndex": str(self.dlog.end_index),
            "dLegerAppliedIndex": str(self.applied_index),
            "dLegerPeers": ";".join(f"{k}-{v}" for k, v in self.node.config.peers.items()),
            "preferredLeaderId": self.preferred_leader,
        }
