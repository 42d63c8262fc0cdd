"""DLedgerCommitLog: a broker whose CommitLog is replicated by its DLedger group
(enableDLegerCommitLog=true), as RocketMQ's DLedgerCommitLog does it.

The store's CommitLog is a view over the member's DLedger data files (rmq.store.dledger_view):
every 4.x record lives in the body of a DLedger entry, once, and its CommitLog offset is its
position there. The leader writes records in place; the proposer task proposes the entry they
fill once the appends at hand are done, so sends that arrive together share one entry. A send
is answered once its group has committed the entry: the store's SYNC_MASTER wait
(``AsyncMessageStore.replica_acked``) is woken by commits instead of slave acks. Followers get
whole entries from the leader. Consume queues and the index are built by the usual dispatch,
which never goes past the last committed entry, so no consumer sees a message its group could
still lose.

Roles follow the Raft core: the leader registers as the master (brokerId 0) once everything
committed before its term is dispatched, the others as slaves (brokerId = the number in
``dLegerSelfId`` + 1). A leader that loses its leadership drops the records it had not
proposed; what it proposed and the group did not commit is replaced by the new leader's log,
or committed by it, as Raft decides.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import TYPE_CHECKING

import trio

from rmq.dledger.node import DLedgerNode, NodeConfig
from rmq.raft.core import NotLeader
from rmq.store.aio import Replication
from rmq.store.dledger_view import DLedgerView
from rmq.store.errors import StoreError
from rmq.store.formats import file_name_to_offset

if TYPE_CHECKING:
    from rmq.store.aio import AsyncMessageStore

log = logging.getLogger("rmq.broker.dledger")

CHECKPOINT_INTERVAL = 1.0  # seconds between writes of the committed index


def member_commitlog(config: NodeConfig, commitlog_dir: str) -> Callable[[], DLedgerView]:
    """The CommitLog factory for a member's store (called once the store's lock is held).

    Raises (from the factory):
        StoreError: the store holds a plain CommitLog (a former plain broker), or its
            DLedger files cannot be used.
    """

    def make() -> DLedgerView:
        if os.path.isdir(commitlog_dir) and any(file_name_to_offset(n) is not None for n in os.listdir(commitlog_dir)):
            raise StoreError(
                f"{commitlog_dir} holds a CommitLog: a DLedger member keeps its messages in its "
                "DLedger log and starts from an empty store or its own"
            )
        return DLedgerView(config.open_log())

    return make


class DLedgerCommitLog(Replication):
    """The DLedger member under a broker's store.

    Args:
        astore: the broker's store, opened with ``member_commitlog`` (its tasks run while this
            runs).
        config: the member's settings (its log lives in ``<store root>/dledger-<selfId>``).
        preferred_leader: preferredLeaderId, "" for none.
        on_role: told ``True`` when this member starts serving as the group's master and
            ``False`` when it stops (or starts as a follower).
        on_follow: told when this member, not the master, follows a leader it did not follow
            before (it starts as nobody's follower).
    """

    def __init__(
        self,
        astore: AsyncMessageStore,
        config: NodeConfig,
        on_role: Callable[[bool], None],
        *,
        preferred_leader: str = "",
        on_follow: Callable[[], None] | None = None,
    ) -> None:
        self.astore = astore
        self.store = astore.store
        view = self.store.commitlog
        if not isinstance(view, DLedgerView):
            raise StoreError("a DLedger member's store must be opened with member_commitlog")
        self.dlog = view.dlog
        self.node = DLedgerNode(
            config,
            on_commit=self._on_commit,
            on_role=self._on_role_change,
            on_rebuild=self._on_rebuild,
            dlog=self.dlog,
            serve_appends=False,
        )
        view.on_full = self.propose_pending  # an entry full before the proposer ran
        self._on_role = on_role
        self._on_follow = on_follow
        self._following: str | None = None  # the leader this member last followed
        self.preferred_leader = preferred_leader  # preferredLeaderId: leadership goes there
        self.master = False  # serving writes (leader, caught up)
        self.applied_index = min(self.dlog.committed_index, self.dlog.end_index)  # dispatchable up to here
        self.committed_end = self.dlog.entry_end(self.applied_index)  # CommitLog offset where it ends
        self._wake = trio.Event()
        self._propose_wanted = trio.Event()

    # -- Replication (the store calls these) ---------------------------------------------------

    def appended(self) -> None:
        """New records in the entry being filled: the proposer task proposes it once the
        appends at hand are done, so sends that arrive together share one entry."""
        self._propose_wanted.set()

    async def _proposer(self) -> None:
        while True:
            await self._propose_wanted.wait()
            self._propose_wanted = trio.Event()
            self.propose_pending()

    def propose_pending(self) -> bool:
        """Propose the entry being filled, if any; False when it cannot be now (not the
        master, or a leadership transfer holds proposals back: ``_leader_loop`` tries again,
        a step-down drops the records)."""
        if not self.master:
            return False
        try:
            self.node.propose_pending()
        except NotLeader:
            return False
        return True

    def unavailable(self, end_offset: int) -> str | None:
        if not self.master:
            return "this broker is not the leader of its DLedger group"
        return None

    # -- events from the member ----------------------------------------------------------------

    def _on_commit(self, index: int) -> None:
        if self.master:  # answer the sends now, in the task that heard the majority's ack
            self._committed()
        self._wake.set()

    def _on_role_change(self) -> None:
        if self.master and not self.node.core.is_leader:
            self.master = False
            self.dlog.abort_pending()
            overrides = self.store.dispatcher.tags_overrides
            for offset in [o for o in overrides if o >= self.committed_end]:
                del overrides[offset]
            self.astore.fail_replica_waits()
            self._on_role(False)
        core = self.node.core
        leader = None if core.is_leader else core.leader_id
        if leader and leader != self._following and self._on_follow is not None:
            self._on_follow()
        self._following = leader
        self._wake.set()

    def _on_rebuild(self) -> None:
        """The log started over at the leader's first entry (it no longer held what we
        lacked): the store goes on from there."""
        self.applied_index = self.dlog.begin_index - 1
        self.committed_end = self.dlog.entry_end(self.applied_index)
        self.store.commitlog_restarted(self.committed_end)
        self.store.dispatcher.limit = self.committed_end

    # -- the commit task -----------------------------------------------------------------------

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
        self._committed()
        core = self.node.core
        if core.is_leader and not self.master and self.applied_index == core.commit_index:
            if self.dlog.term_at(core.commit_index) != core.term:
                return  # the no-op of this term is not committed yet
            await self.astore.wait_dispatched(self.committed_end)
            if not core.is_leader or self.applied_index != core.commit_index:
                self._wake.set()
                return
            self.store.reset_queue_offsets()
            self.master = True
            log.info("%s serves as the master of its group in term %d", self.node.config.self_id, core.term)
            self._on_role(True)

    def _committed(self) -> None:
        """Let dispatch and the waiting sends through up to the last committed entry."""
        commit = self.node.core.commit_index
        if commit <= self.applied_index:
            return
        end = self.dlog.entry_end(commit)
        self.applied_index, self.committed_end = commit, end
        self.store.dispatcher.limit = end
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
            if self.dlog.filling:
                self.propose_pending()
            preferred = self.preferred_leader
            core = self.node.core
            if preferred and preferred != self.node.config.self_id and core.caught_up(preferred):
                log.info("handing leadership of %s to the preferred leader %s", self.node.config.group, preferred)
                self.node.transfer_leadership(preferred)

    async def _checkpointer(self) -> None:
        """Keep the committed index on disk (dispatch resumes up to it after a restart)."""
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
