"""DLedgerNode: a DLedger group member on Trio: the Raft core (rmq.raft) driven over our
remoting layer, with DLedger's mmap file store (rmq.store.dledger_log) underneath.

What it does with the core's actions, in order:

* Send: the message goes to the peer as a oneway RemotingCommand with DLedger's request code
  (VOTE, HEART_BEAT, PUSH, LEADERSHIP_TRANSFER) and its JSON body; answers travel the same
  way. A peer that cannot be reached loses the message (the protocol resends).
* PersistTerm: written and synced before the next action runs.
* PersistEntries: applied to the log files at once; a flusher task syncs them, many appends
  per sync, through the kernel (``rmq.store.aio.sync_files``: io_uring, else AIO) or else a
  worker thread, and
  tells the core what is durable. Without ``sync_flush`` (a broker's ASYNC_FLUSH) the page
  cache counts: the core hears at once, the flusher syncs every ASYNC_FLUSH_INTERVAL.
* Commit: recorded in the log; `append` callers waiting on that index are answered.

Clients append with APPEND (50001): the leader answers once the entry is committed (on a
majority's disks), with its index; anyone else answers NOT_LEADER naming the leader it knows.
GET (50002) reads one entry from the leader, as DLedgerServer.handleGet does (a JSON
GetEntriesResponse whose ``entries`` hold the DLedgerEntry, body in Base64). METADATA (50000)
tells a member's role, term, leader and indexes. PULL (51003) is answered as not supported:
DLedger 0.2 replicates by PUSH only (its handlePull returns nothing).
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import trio
from pybase64 import b64encode

from rmq.protocol import RemotingCommand, ResponseCode
from rmq.protocol.dledger import BODY_OFFSET, MAGIC
from rmq.raft import messages as M
from rmq.raft.core import (
    BecomeCandidate,
    BecomeFollower,
    BecomeLeader,
    Commit,
    NotLeader,
    PersistEntries,
    PersistentState,
    PersistTerm,
    RaftConfig,
    RaftNode,
    Send,
)
from rmq.remoting import Connection, RemotingClient, RemotingError, RemotingServer, ServerConfig
from rmq.remoting.dispatcher import Dispatcher
from rmq.store.aio import sync_files
from rmq.store.dledger_log import DLedgerLog
from rmq.store.kernel_sync import KernelSync

log = logging.getLogger("rmq.dledger")

TICK = 0.02  # seconds between ticks of the core while it has work in hand (a leader's pushes)
NOT_LEADER = 404  # DLedgerResponseCode.NOT_LEADER
UNKNOWN_GROUP = 400  # DLedgerResponseCode.UNKNOWN_GROUP
UNKNOWN_MEMBER = 401  # DLedgerResponseCode.UNKNOWN_MEMBER
UNEXPECTED_ARGUMENT = 411  # DLedgerResponseCode.UNEXPECTED_ARGUMENT
APPEND_TIMEOUT = 10.0
ASYNC_FLUSH_INTERVAL = 0.5  # seconds between syncs without sync_flush (flushIntervalCommitLog)
OUTBOX = 1024  # messages queued per peer; beyond, they are dropped (the protocol resends)
RECENT_ENTRIES = 8192  # newest entries kept in memory (pushes, apply)

_REQUEST_CODE: dict[type, int] = {
    M.VoteRequest: M.VOTE,
    M.VoteResponse: M.VOTE,
    M.HeartBeatRequest: M.HEART_BEAT,
    M.HeartBeatResponse: M.HEART_BEAT,
    M.PushEntryRequest: M.PUSH,
    M.PushEntryResponse: M.PUSH,
    M.LeadershipTransferRequest: M.LEADERSHIP_TRANSFER,
}


class _LogView:
    """The core's view of the DLedgerLog."""

    def __init__(self, dlog: DLedgerLog, recent: dict[int, M.Entry]) -> None:
        self.dlog = dlog
        self.recent = recent

    @property
    def end_index(self) -> int:
        return self.dlog.end_index

    @property
    def begin_index(self) -> int:
        return self.dlog.begin_index

    def term_at(self, index: int) -> int | None:
        return self.dlog.term_at(index)

    def entry_at(self, index: int) -> M.Entry | None:
        dlog = self.dlog
        if not dlog.begin_index <= index <= dlog.end_index:
            return None
        cached = self.recent.get(index)
        if cached is not None and index != dlog.begin_index:
            return cached
        e = dlog.entry(index)  # the first entry carries its position: a rebuild needs it
        return M.Entry(e.index, e.term, e.body, e.pos)


@dataclass
@dataclass
class NodeConfig:
    self_id: str
    peers: dict[str, str]  # id -> "host:port"
    store: str
    group: str = "default"
    bind_host: str = "127.0.0.1"
    raft: RaftConfig = RaftConfig()
    data_file_size: int = 1024 * 1024 * 1024
    # True: an entry counts as held once synced to disk; False (a broker's ASYNC_FLUSH, as
    # DLedger itself does): once in the page cache, with a sync every ASYNC_FLUSH_INTERVAL
    sync_flush: bool = True

    def open_log(self) -> DLedgerLog:
        """This member's log, as its settings say (with sync_flush, mapped for syncs every
        append: see MappedFileQueue)."""
        return DLedgerLog(self.store, self.self_id, data_file_size=self.data_file_size, pwrite_appends=self.sync_flush)


class DLedgerNode:
    def __init__(
        self,
        config: NodeConfig,
        *,
        on_commit: Callable[[int], None] | None = None,
        on_role: Callable[[], None] | None = None,
        on_rebuild: Callable[[], None] | None = None,
        dlog: DLedgerLog | None = None,
        serve_appends: bool = True,
        dispatcher: Dispatcher | None = None,
        on_close: Callable[[Connection], None] | None = None,
    ) -> None:
        if config.self_id not in config.peers:
            raise ValueError(f"dLegerSelfId {config.self_id} is not in dLegerPeers")
        self.config = config
        self.on_commit = on_commit
        self.on_role = on_role  # told after every change of role or term (read self.core)
        self.on_rebuild = on_rebuild  # told when the log started over at the leader's first entry
        # APPEND from clients. A broker's member says no: its entries are the broker's message
        # records, and a body appended from outside would be one its dispatch cannot read.
        self.serve_appends = serve_appends
        # Requests of others served on the member's port too (the controller's, as RocketMQ's
        # controller serves on its DLedger server's port); the member adds its own codes.
        self.dispatcher = dispatcher or Dispatcher()
        # told of each connection to the member's port that closes (the controller's brokers)
        self.on_close = on_close
        self._owns_dlog = dlog is None  # a log passed in is closed by whoever opened it
        self.dlog = dlog or config.open_log()
        self._sealing: int | None = None  # index of the entry propose_pending is sealing
        # The newest entries as appended, by index: pushes and the broker's apply read these
        # instead of the files (insertion order is index order; truncation drops the tail).
        self.recent: dict[int, M.Entry] = {}
        state = PersistentState(self.dlog.term, self.dlog.voted_for, self.dlog.committed_index)
        self.core = RaftNode(
            config.self_id, tuple(config.peers), _LogView(self.dlog, self.recent), group=config.group,
            config=config.raft, state=state, rng=random.Random(), now_ms=self._now(),
        )  # fmt: skip
        self.port: int | None = None
        self._outboxes: dict[str, trio.MemorySendChannel[M.Message]] = {}
        self._flush_wanted = trio.Event()
        self._lowest_truncate: int | None = None
        self._committed = trio.Event()
        self._tick_wanted = trio.Event()  # set: the ticker ticks now (see _ticker)
        self._tick_at: int | None = None  # when a resting ticker ticks next (ms); None: every TICK
        self._nursery: trio.Nursery | None = None
        self._client: RemotingClient | None = None
        self._kernel_sync: KernelSync | None = None  # with sync_flush, where the kernel takes syncs
        self._sync_tag = 0

    @staticmethod
    def _now() -> int:
        return int(trio.current_time() * 1000) if _in_trio() else int(time.monotonic() * 1000)

    # -- the driver ------------------------------------------------------------------------------

    def _apply(self, actions: list[Any]) -> None:
        for a in actions:
            if isinstance(a, Send):
                if self._send_now(a.to, a.message):
                    continue
                box = self._outboxes.get(a.to)
                if box is not None:
                    try:
                        box.send_nowait(a.message)
                    except trio.WouldBlock:
                        pass
            elif isinstance(a, PersistTerm):
                self.dlog.save_term(a.term, a.voted_for)
            elif isinstance(a, PersistEntries):
                recent = self.recent
                entries = a.entries
                if a.rebuild:
                    first, entries = entries[0], entries[1:]
                    self.dlog.rebuild(first.index, first.term, first.body, first.pos)
                    recent.clear()
                    self._cut_below_durable(first.index - 1)
                    log.info("%s rebuilt its log at index %d (data offset %d): the leader no longer holds "
                             "the entries before it", self.config.self_id, first.index, first.pos)  # fmt: skip
                    if self.on_rebuild is not None:
                        self.on_rebuild()
                elif a.truncate_after is not None:
                    self.dlog.truncate_after(a.truncate_after)
                    for index in [i for i in recent if i > a.truncate_after]:
                        del recent[index]
                    self._cut_below_durable(a.truncate_after)
                for e in entries:
                    if e.index == self._sealing:  # the leader's entry, written in place
                        self.dlog.seal_pending(e.index, e.term, len(e.body))
                    else:
                        self.dlog.append(e.index, e.term, e.body)
                    recent[e.index] = e
                while len(recent) > RECENT_ENTRIES:
                    del recent[next(iter(recent))]
                if a.entries:
                    self._apply(self.core.appended(self._now()))
                if self.config.sync_flush:
                    self._flush_wanted.set()
                else:  # ASYNC_FLUSH: in the page cache counts; the flusher syncs every interval
                    self._apply(self.core.persisted(self.dlog.end_index, self._now()))
            elif isinstance(a, Commit):
                self.dlog.commit(a.index)
                committed, self._committed = self._committed, trio.Event()
                committed.set()
                if self.on_commit is not None:
                    self.on_commit(a.index)
            elif isinstance(a, BecomeLeader):
                log.info("%s is the leader of %s in term %d", self.config.self_id, self.config.group, a.term)
                if self.on_role is not None:
                    self.on_role()
            elif isinstance(a, BecomeFollower):
                log.info("%s follows %s in term %d", self.config.self_id, a.leader_id, a.term)
                if self.on_role is not None:
                    self.on_role()
            elif isinstance(a, BecomeCandidate):
                log.info("%s stands for term %d", self.config.self_id, a.term)
                if self.on_role is not None:
                    self.on_role()
        self._tick_sooner()

    def _send_now(self, peer: str, msg: M.Message) -> bool:
        """Write ``msg`` to ``peer`` from this task when its connection is up: a push or an
        ack that waited for the sender task and the writer task would wait for two rounds
        of a busy event loop (milliseconds on a loaded leader) before leaving."""
        client = self._client
        conn = client.connected(self.config.peers[peer]) if client is not None else None
        if conn is None:
            return False
        body = M.encode_message(msg)
        return conn.send_oneway_nowait(RemotingCommand.request(_REQUEST_CODE[type(msg)], body=body))

    def _cut_below_durable(self, after: int) -> None:
        """The log was cut after ``after``: a sync in flight vouches for nothing beyond it."""
        low = self._lowest_truncate
        self._lowest_truncate = after if low is None else min(low, after)

    async def _ticker(self) -> None:
        """Tick the core every TICK while it has work in hand, else not before it has anything
        to do (RaftNode.next_tick_ms): an idle group's members wake a few times a second
        instead of fifty, and a follower's only timer is its election's. ``_apply`` wakes it
        when the core wants a tick sooner than planned (a change of role, a vote asked, a
        proposal)."""
        while True:
            self._apply(self.core.tick(self._now()))
            due = self.core.next_tick_ms()
            wait = TICK if due is None else (due - self._now()) / 1000
            self._tick_at = due if wait > TICK else None
            with trio.move_on_after(max(wait, TICK)):
                await self._tick_wanted.wait()
            self._tick_at = None
            self._tick_wanted = trio.Event()

    def _tick_sooner(self) -> None:
        """Wake a resting ticker when the core now wants a tick before the one planned."""
        at = self._tick_at
        if at is not None:
            due = self.core.next_tick_ms()
            if due is None or due < at:
                self._tick_at = None
                self._tick_wanted.set()

    async def _flusher(self) -> None:
        if not self.config.sync_flush:
            while True:
                await trio.sleep(ASYNC_FLUSH_INTERVAL)
                await trio.to_thread.run_sync(self.dlog.sync)
        while True:
            await self._flush_wanted.wait()
            self._flush_wanted = trio.Event()
            self._lowest_truncate = None
            end = self.dlog.end_index
            await self._sync_log()
            upto = end if self._lowest_truncate is None else min(end, self._lowest_truncate)
            self._apply(self.core.persisted(upto, self._now()))

    async def _sync_log(self) -> None:
        """Sync the log: through the kernel where it serves (no thread, so no GIL handoffs),
        else in a worker thread."""
        ks = self._kernel_sync
        if ks is not None:
            plan = self.dlog.sync_plan()
            self._sync_tag += 1
            if await sync_files(ks, plan.files, self._sync_tag, f"the log of {self.config.self_id}"):
                self.dlog.synced(plan)
                return
            self._kernel_sync = None
        await trio.to_thread.run_sync(self.dlog.sync)

    async def _sender(self, peer: str, box: trio.MemoryReceiveChannel[M.Message], client: RemotingClient) -> None:
        addr = self.config.peers[peer]
        async for msg in box:
            body = M.encode_message(msg)
            try:
                await client.invoke_oneway(addr, RemotingCommand.request(_REQUEST_CODE[type(msg)], body=body), 1.0)
            except RemotingError as exc:  # lost: the core resends what matters
                log.debug("%s to %s lost: %s", type(msg).__name__, peer, exc)

    # -- requests ----------------------------------------------------------------------------

    async def _on_peer(self, ctx: Any, request: RemotingCommand) -> RemotingCommand | None:
        """A peer's message. Members send them oneway (an answer is a message of its own); a
        request that wants an answer gets one, so that nobody waits for what never comes."""
        try:
            msg = M.decode_message(request.body)
        except M.MalformedMessage as exc:
            log.warning("bad DLedger message (code %d) from %s: %s", request.code, ctx.connection.remote_address, exc)
            if request.is_oneway:
                return None
            return request.make_response(ResponseCode.SYSTEM_ERROR, f"bad DLedger message: {exc}")
        self._apply(self.core.receive(msg, self._now()))
        if request.is_oneway:
            return None
        return request.make_response(ResponseCode.SUCCESS, "taken; its answer, if any, comes as a message of its own")

    def propose(self, body: bytes) -> int:
        """Append ``body`` as the leader; returns its index (committed later: see on_commit).

        Raises:
            NotLeader: this member does not lead the group.
        """
        index, actions = self.core.propose(body, self._now())
        self._apply(actions)
        return index

    def propose_pending(self) -> int | None:
        """Propose the entry the leader's records fill in place (``DLedgerLog.reserve_record``);
        returns its index, None when there was none.

        Raises:
            NotLeader: this member does not lead the group (the entry stays unproposed).
        """
        body = self.dlog.pending_body()
        if not body:
            self.dlog.abort_pending()
            return None
        self._sealing = self.dlog.end_index + 1
        try:
            index, actions = self.core.propose(body, self._now())
            self._apply(actions)
        finally:
            self._sealing = None
        return index

    def transfer_leadership(self, to: str) -> None:
        """Hand leadership to ``to`` (LEADERSHIP_TRANSFER); NotLeader when not the leader."""
        if not self.core.is_leader:
            raise NotLeader(self.core.leader_id)
        self._apply(self.core.transfer_leadership(to, self._now()))

    async def _on_append(self, ctx: Any, request: RemotingCommand) -> RemotingCommand:
        if not self.serve_appends:
            return request.make_response(
                ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                "this DLedger member is a broker's: its log holds the broker's messages; send them to the broker",
            )
        try:
            index, actions = self.core.propose(request.body, self._now())
        except NotLeader as exc:
            return request.make_response(NOT_LEADER, f"not the leader; leader: {exc.leader_id or ''}")
        term = self.core.term
        self._apply(actions)
        with trio.move_on_after(APPEND_TIMEOUT):
            while self.core.commit_index < index:
                if self.core.term != term or not self.core.is_leader:
                    return request.make_response(ResponseCode.SYSTEM_ERROR, "leadership lost before commit")
                await self._committed.wait()
            if self.dlog.term_at(index) != term:
                return request.make_response(ResponseCode.SYSTEM_ERROR, "the entry was replaced")
            return request.make_response(ResponseCode.SUCCESS, None, {"index": str(index), "term": str(term)})
        return request.make_response(ResponseCode.SYSTEM_ERROR, f"not committed within {APPEND_TIMEOUT} s")

    async def _on_transfer(self, ctx: Any, request: RemotingCommand) -> RemotingCommand | None:
        """LEADERSHIP_TRANSFER: between members (``kind`` in the body) the core's message; from
        a client, DLedger's LeadershipTransferRequest naming ``transfereeId``, answered once
        that member leads (or with why not)."""
        try:
            obj = json.loads(request.body or b"{}")
        except (ValueError, RecursionError):
            obj = None
        if not isinstance(obj, dict):
            return None if request.is_oneway else request.make_response(ResponseCode.SYSTEM_ERROR, "bad JSON body")
        if "kind" in obj:
            return await self._on_peer(ctx, request)
        to = obj.get("transfereeId")
        if not isinstance(to, str) or to not in self.config.peers:
            return request.make_response(ResponseCode.SYSTEM_ERROR, f"transfereeId {to!r} is not a member")
        core = self.core
        if to == self.config.self_id and core.is_leader:
            return request.make_response(ResponseCode.SUCCESS, f"{to} leads already")
        try:
            self.transfer_leadership(to)
        except NotLeader as exc:
            return request.make_response(NOT_LEADER, f"not the leader; leader: {exc.leader_id or ''}")
        with trio.move_on_after(2 * self.config.raft.election_timeout_ms / 1000):
            # Polled: the core has no hook for a leader it learns of; an admin request, 2 elections at most.
            while core.leader_id != to:  # noqa: ASYNC110
                await trio.sleep(0.02)
            return request.make_response(ResponseCode.SUCCESS, None, {"leaderId": to, "term": str(core.term)})
        return request.make_response(ResponseCode.SYSTEM_ERROR, f"{to} did not take leadership in time")

    async def _on_get(self, ctx: Any, request: RemotingCommand) -> RemotingCommand:
        """GET: the entry at ``beginIndex``, from the leader (DLedgerServer.handleGet)."""
        core, config = self.core, self.config
        answer: dict[str, Any] = {"group": config.group, "localId": config.self_id, "term": core.term}
        if core.leader_id is not None:
            answer["leaderId"] = core.leader_id
        try:
            obj = json.loads(request.body or b"{}")
            index = int(obj["beginIndex"])
            group, remote = str(obj.get("group", config.group)), str(obj.get("remoteId", config.self_id))
        except (ValueError, KeyError, TypeError, OverflowError, RecursionError) as exc:
            return self._get_answer(request, answer, UNEXPECTED_ARGUMENT, f"bad GetEntriesRequest: {exc}")
        if group != config.group:
            return self._get_answer(request, answer, UNKNOWN_GROUP, f"group {group!r} is not {config.group!r}")
        if remote != config.self_id:
            return self._get_answer(request, answer, UNKNOWN_MEMBER, f"{remote!r} is not {config.self_id!r}")
        if not core.is_leader:
            return self._get_answer(request, answer, NOT_LEADER, f"not the leader; leader: {core.leader_id or ''}")
        dlog = self.dlog
        if dlog.begin_index <= index <= dlog.end_index:
            e = dlog.entry(index)
            size = BODY_OFFSET + len(e.body)
            answer["entries"] = [
                {"magic": MAGIC, "size": size, "index": e.index, "term": e.term, "pos": e.pos, "channel": 0,
                 "chainCrc": 0, "bodyCrc": 0, "body": b64encode(e.body).decode("ascii")}
            ]  # fmt: skip
        return self._get_answer(request, answer, int(M.Code.SUCCESS), None)

    @staticmethod
    def _get_answer(request: RemotingCommand, answer: dict[str, Any], code: int, remark: str | None) -> RemotingCommand:
        answer["code"] = code
        remoting = ResponseCode.SUCCESS if code == M.Code.SUCCESS else code
        return request.make_response(remoting, remark, body=json.dumps(answer).encode())

    async def _on_pull(self, ctx: Any, request: RemotingCommand) -> RemotingCommand:
        return request.make_response(
            ResponseCode.REQUEST_CODE_NOT_SUPPORTED, "PULL is not supported: DLedger groups replicate by PUSH"
        )

    async def _on_metadata(self, ctx: Any, request: RemotingCommand) -> RemotingCommand:
        return request.make_response(ResponseCode.SUCCESS, None, body=json.dumps(self.metadata()).encode())

    def metadata(self) -> dict[str, Any]:
        c = self.core
        return {
            "group": self.config.group,
            "selfId": self.config.self_id,
            "role": c.role.value,
            "term": c.term,
            "leaderId": c.leader_id,
            "commitIndex": c.commit_index,
            "endIndex": self.dlog.end_index,
            "peers": self.config.peers,
        }

    # -- lifetime ----------------------------------------------------------------------------

    async def serve(self, *, task_status: trio.TaskStatus[DLedgerNode] = trio.TASK_STATUS_IGNORED) -> None:
        dispatcher = self.dispatcher
        dispatcher.register((M.VOTE, M.HEART_BEAT, M.PUSH), self._on_peer, inline=True)
        dispatcher.register(M.LEADERSHIP_TRANSFER, self._on_transfer, concurrency=16)
        dispatcher.register(M.APPEND, self._on_append, concurrency=4096)
        dispatcher.register(M.METADATA, self._on_metadata, inline=True)
        dispatcher.register(M.GET, self._on_get, inline=True)
        dispatcher.register(M.PULL, self._on_pull, inline=True)
        host, _, port = self.config.peers[self.config.self_id].rpartition(":")
        server = RemotingServer(
            dispatcher, ServerConfig(host=self.config.bind_host, port=int(port)), on_close=self.on_close
        )
        if self.config.sync_flush:
            self._kernel_sync = KernelSync.open()
        try:
            async with RemotingClient() as client, trio.open_nursery() as nursery:
                self._nursery = nursery
                self._client = client
                await nursery.start(server.serve)
                self.port = server.port
                for peer in self.config.peers:
                    if peer != self.config.self_id:
                        send, recv = trio.open_memory_channel[M.Message](OUTBOX)
                        self._outboxes[peer] = send
                        nursery.start_soon(self._sender, peer, recv, client)
                nursery.start_soon(self._ticker)
                nursery.start_soon(self._flusher)
                task_status.started(self)
        finally:
            self._client = None
            # Synchronous, so cancellation cannot cut it short (no shield needed).
            if self._kernel_sync is not None:
                self._kernel_sync.close()  # waits for syncs still running
                self._kernel_sync = None
            self.dlog.sync()
            if self._owns_dlog:
                self.dlog.close()


def _in_trio() -> bool:
    try:
        trio.lowlevel.current_task()
    except RuntimeError:
        return False
    return True
