"""The master's side of HA replication (RocketMQ 4.x HAService / HAConnection).

A master listens on the HA port (haListenPort, default listenPort + 1). Each slave that
connects gets one `SlaveConnection`, two tasks over one TCP stream:

* reader: the slave's 8-byte offset reports (rmq.protocol.ha). The first says where to start
  (0: the start of the master's last CommitLog file); every one is an ack, handed to the
  store, which wakes the SYNC_MASTER sends it covers. Silence for haHousekeepingInterval
  closes the connection.
* writer: CommitLog bytes from where the slave stands, in chunks of at most
  haTransferBatchSize that never cross a file (several chunks may share one socket write);
  a heartbeat chunk after haSendHeartbeatInterval without data. In controller mode, woken by
  an append, it lets a few scheduler passes go by first (GATHER_PASSES), so one write carries
  the appends of several reads: a replication round (write, slave append and ack, ack
  handling) is paid per write, not per message.

A slave that asks for an offset this log cannot continue from (past its end, before its first
file, or not at a record boundary: its log has diverged from ours) is refused with an error
and the connection closes; the master's store is only ever read here.

TLS: with tls.server.mode permissive or enforcing the HA port negotiates as the main port does
(the slave speaks first), so slaves with tls.enable connect over TLS.

Controller mode (``ControllerRole`` given): each slave first sends a handshake naming its
brokerId and epoch, and gets this master's epoch entries back (rmq.protocol.ha), so it can cut
its log to what the two share before it reports its offset. Acks then count per broker id: a
send is confirmed by the SyncStateSet's replicas (insync.py), and the set shrinks and expands
through the controller (``ControllerRole.propose``).
"""

from __future__ import annotations

import logging
import time
from collections import deque
from typing import TYPE_CHECKING, Any, Protocol

import trio

from rmq.lifetime import unwrapped
from rmq.protocol.errors import RemoteProtocolError
from rmq.protocol.ha import HANDSHAKE, ReportDecoder, decode_handshake, encode_chunk_header, encode_epochs
from rmq.remoting import RemotingConnectError
from rmq.remoting.stages.tls import negotiate
from rmq.store.aio import Replication

from .insync import InSync
from .rate import ByteRate

if TYPE_CHECKING:
    from rmq.store import MessageStore

    from ..parts import BrokerParts
    from ..tls import BrokerTls

log = logging.getLogger("rmq.broker.ha")

RECEIVE_SIZE = 64 * 1024
MAX_WRITE = 256 * 1024  # bytes of chunks gathered into one socket write
CLOSE_TIMEOUT = 1.0
TRANSFER_MARKS = 64  # (time, offset) of recent writes kept to tell when a slave caught up
# Controller mode: scheduler passes a woken writer lets go by before it gathers, so the
# appends of the reads the loop makes meanwhile join the same socket write and each
# replication round (write, slave append and ack, ack handling) covers more messages. A group
# of three on two cores is CPU-bound, and 4 passes took ~30 % off the slaves' CPU per message
# and ~10 % off the master's (bench/results/controller-cpu.md; more gained nothing). A 4.x
# SYNC_MASTER with one slave has CPU to spare and waits on latency instead: the passes made it
# ~5 % slower (bench/ha.py), so it writes at once.
GATHER_PASSES = 4


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class ControllerRole(Protocol):
    """What a controller-mode master's HA service needs from the broker (replicas.py)."""

    insync: InSync
    master_epoch: int

    def epoch_entries(self) -> list[tuple[int, int]]: ...

    def propose(self, members: frozenset[int]) -> None:
        """Ask the controller for this SyncStateSet (answered later, through ``adopt``)."""

    def newer_epoch_seen(self, epoch: int) -> None:
        """A slave knows a master epoch after ours: we may have been replaced."""


class Diverged(Exception):
    """The slave's log cannot continue from this master's."""


class SlaveConnection:
    """One connected slave."""

    def __init__(self, service: HAService, stream: trio.abc.Stream, addr: str) -> None:
        self.service = service
        self.stream = stream
        self.addr = addr
        self.request_offset = -1  # the slave's first report; -1 until it arrives
        self.ack_offset = -1  # the slave's newest report
        self.transfer_from = -1  # where the writer began
        self.next_offset = -1  # the next byte the writer sends
        self.rate = ByteRate()
        self.slave_id: int | None = None  # controller mode: the slave's brokerId, from its handshake
        self._marks: deque[tuple[int, int]] = deque(maxlen=TRANSFER_MARKS)  # (ms, offset) written
        self._requested = trio.Event()

    async def run(self) -> None:
        rest = b""
        if self.service.role is not None:
            rest = await self._handshake(self.service.role)
            if self.slave_id is None:
                return
        async with unwrapped(), trio.open_nursery() as nursery:
            nursery.start_soon(self._read, nursery.cancel_scope, rest)
            nursery.start_soon(self._write)

    async def _handshake(self, role: ControllerRole) -> bytes:
        """Controller mode: the slave's handshake in, this master's epochs out. Returns the
        bytes after the handshake (the slave's first report may follow in the same read)."""
        buf = b""
        wait = self.service.config.ha_housekeeping_interval / 1000
        with trio.move_on_after(wait):
            while (got := decode_handshake(buf)) is None:
                data = await self.stream.receive_some(RECEIVE_SIZE)
                if not data:
                    log.info("HA slave %s closed before its handshake", self.addr)
                    return b""
                buf += data
            broker_id, epoch, _offset = got
            mine = role.master_epoch
            if epoch > mine:
                log.warning(
                    "HA slave %s (brokerId %d) knows master epoch %d, after ours (%d): refused; "
                    "this broker asks the controller for its role",
                    self.addr, broker_id, epoch, mine,
                )  # fmt: skip
                role.newer_epoch_seen(epoch)
                return b""
            await self.stream.send_all(encode_epochs(mine, self.service.store.max_phy_offset, role.epoch_entries()))
            self.slave_id = broker_id
            log.info("HA slave %s is brokerId %d (epoch %d)", self.addr, broker_id, epoch)
            return buf[HANDSHAKE.size :]
        log.warning("HA slave %s sent no handshake in %.0f s: closing", self.addr, wait)
        return b""

    def caught_up_at(self, offset: int) -> int | None:
        """The newest time this master had written no more than ``offset`` (the slave's
        ack): the slave was caught up then. None when no write is covered."""
        at = None
        marks = self._marks
        while marks and marks[0][1] <= offset:
            at = marks.popleft()[0]
        return at

    async def _read(self, scope: trio.CancelScope, rest: bytes = b"") -> None:
        service = self.service
        decoder = ReportDecoder()
        idle = service.config.ha_housekeeping_interval / 1000
        if rest:  # the first report came with the handshake
            first = decoder.feed(rest)
            if first is not None:
                self._ack(first)
        while True:
            with trio.move_on_after(idle) as timer:
                data = await self.stream.receive_some(RECEIVE_SIZE)
            if timer.cancelled_caught:
                log.warning("HA slave %s silent for %.0f s: closing", self.addr, idle)
                break
            if not data:
                log.info("HA slave %s disconnected", self.addr)
                break
            offset = decoder.feed(data)
            if offset is not None:
                self._ack(offset)
        scope.cancel()

    def _ack(self, offset: int) -> None:
        service = self.service
        end = service.store.max_phy_offset
        if offset > end:
            raise Diverged(f"it reports offset {offset}, past this master's CommitLog end {end}")
        if self.request_offset < 0:
            self.request_offset = offset
            self._requested.set()
        self.ack_offset = offset
        service.acked(offset, self)

    def _start_offset(self) -> int:
        store = self.service.store
        end = store.max_phy_offset
        wanted = self.request_offset
        if wanted == 0:
            if self.service.role is not None:
                # Controller mode: a new replica copies the whole log (AutoSwitch HA's default,
                # syncFromLastFile=false): once in the SyncStateSet it may be elected, and a
                # master must hold every message acknowledged before it joined.
                return store.min_phy_offset
            # A new slave starts at the master's last file, as RocketMQ's does.
            return end - end % store.config.mapped_file_size_commitlog
        if wanted < store.min_phy_offset:
            raise Diverged(
                f"it asks for offset {wanted}, before this master's first CommitLog file at "
                f"{store.min_phy_offset}; start the slave with an empty store"
            )
        if not store.is_record_start(wanted):
            raise Diverged(f"its log ends at {wanted}, where no record of this master's log begins")
        return wanted

    async def _write(self) -> None:
        service = self.service
        await self._requested.wait()
        self.transfer_from = self.next_offset = self._start_offset()
        log.info("HA slave %s connected, transferring from %d", self.addr, self.next_offset)
        store = service.store
        batch = service.config.ha_transfer_batch_size
        heartbeat = service.config.ha_send_heartbeat_interval / 1000
        gather = GATHER_PASSES if service.role is not None else 0
        while True:
            out = bytearray()
            while len(out) < MAX_WRITE:
                data = store.transfer_data(self.next_offset, batch)
                if data is None:
                    raise Diverged(f"offset {self.next_offset} is no longer stored on this master")
                if not data:
                    break
                out += encode_chunk_header(self.next_offset, len(data))
                out += data
                self.next_offset += len(data)
            if out:
                await self.stream.send_all(out)
                self.rate.add(len(out))
                self._marks.append((_now_ms(), self.next_offset))
                continue
            signal = service.data_signal()
            if store.max_phy_offset != self.next_offset:
                continue
            self._marks.append((_now_ms(), self.next_offset))  # nothing more to send: caught up
            with trio.move_on_after(heartbeat) as timer:
                await signal.wait()
            if timer.cancelled_caught:
                await self.stream.send_all(encode_chunk_header(self.next_offset, 0))
                continue
            for _ in range(gather):
                await trio.lowlevel.checkpoint()


class HAService(Replication):
    """The HA listener of a master broker and its slave connections."""

    def __init__(self, broker: BrokerParts, tls: BrokerTls, role: ControllerRole | None = None) -> None:
        self.broker = broker
        self.tls = tls  # tls.server.mode of the broker's ports covers the HA port
        self.role = role  # controller mode: the epochs and the SyncStateSet
        self.config = broker.config
        self.connections: set[SlaveConnection] = set()
        self.port: int | None = None
        self.acked_offset = 0  # the highest offset any slave acked (push2SlaveMaxOffset)
        self._signal = trio.Event()
        self._signal_waited = False

    @property
    def store(self) -> MessageStore:
        return self.broker.message_store

    # -- Replication, as the store calls it --------------------------------------------

    def appended(self) -> None:
        if self.role is not None and self.role.insync.needs_no_slave():
            self.confirm()  # alone in the set, or acks that need no slave: confirmed at once
        if self._signal_waited:
            self._signal_waited = False
            self._signal.set()
            self._signal = trio.Event()

    def data_signal(self) -> trio.Event:
        """The Event the next append sets."""
        self._signal_waited = True
        return self._signal

    def unavailable(self, end_offset: int) -> str | None:
        if self.role is not None:
            return self.role.insync.not_enough()
        if not any(c.ack_offset >= 0 for c in self.connections):
            return "no slave is connected to this SYNC_MASTER"
        behind = self.store.max_phy_offset - self.acked_offset
        if behind >= self.config.ha_slave_fallbehind_max:
            return (
                f"the slave is {behind} bytes behind, beyond haSlaveFallbehindMax={self.config.ha_slave_fallbehind_max}"
            )
        return None

    def acked(self, offset: int, conn: SlaveConnection | None = None) -> None:
        if offset > self.acked_offset:
            self.acked_offset = offset
        role = self.role
        if role is None:
            self.broker.store.replica_acked(offset)
            return
        if conn is not None and conn.slave_id is not None:
            at = conn.caught_up_at(offset)
            if at is not None:
                role.insync.caught_up(conn.slave_id, at)
        confirmed = self.confirm()
        if conn is not None and conn.slave_id is not None and conn.slave_id not in role.insync.members:
            entries = role.epoch_entries()
            start = entries[-1][1] if entries else 0
            grown = role.insync.expand(conn.slave_id, offset, confirmed, start, _now_ms())
            if grown is not None:
                log.info(
                    "HA slave %s (brokerId %d) caught up: proposing it for the SyncStateSet", conn.addr, conn.slave_id
                )
                role.propose(grown)

    def slave_acks(self) -> dict[int, int]:
        """Controller mode: the connected slaves' newest acks by broker id."""
        acks: dict[int, int] = {}
        for c in self.connections:
            if c.slave_id is not None and c.ack_offset >= 0:
                acks[c.slave_id] = max(acks.get(c.slave_id, -1), c.ack_offset)
        return acks

    def confirm(self) -> int:
        """Controller mode: move the store's confirmed offset as the SyncStateSet's acks
        allow; returns it."""
        assert self.role is not None
        store = self.broker.store
        offset = self.role.insync.confirm_offset(self.slave_acks(), self.store.max_phy_offset)
        if offset is not None:
            store.replica_acked(offset)
        return store.replicated_offset

    async def check_sync_state_set(self) -> None:
        """Controller mode, every checkSyncStateSetPeriod: propose a smaller SyncStateSet
        without the slaves that fell behind or left (AutoSwitchHAService.maybeShrinkSyncStateSet)."""
        assert self.role is not None
        period = self.config.check_sync_state_set_period / 1000
        while True:
            await trio.sleep(period)
            smaller = self.role.insync.shrink(_now_ms())
            if smaller is not None:
                log.info(
                    "SyncStateSet %s -> %s: slaves fell behind or left",
                    sorted(self.role.insync.members),
                    sorted(smaller),
                )
                self.role.propose(smaller)

    # -- serving -----------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(self.config.ha_port, host=self.config.bind_address)
        self.port = listeners[0].socket.getsockname()[1]
        log.info("HA service listening on port %d", self.port)
        async with trio.open_nursery() as nursery:
            await nursery.start(trio.serve_listeners, self._serve, listeners)
            if self.role is not None:
                nursery.start_soon(self.check_sync_state_set)
            task_status.started()

    async def _serve(self, raw: trio.SocketStream) -> None:
        try:
            host, port = raw.socket.getpeername()[:2]
            addr = f"{host}:{port}"
        except OSError:
            addr = "?"
        try:
            stream = await self._negotiate(raw, addr)
        except RemotingConnectError as exc:
            log.log(logging.INFO if exc.probe else logging.WARNING, "HA slave %s refused: %s", addr, exc.reason)
            with trio.CancelScope(shield=True):
                await trio.aclose_forcefully(raw)
            return
        conn = SlaveConnection(self, stream, addr)
        self.connections.add(conn)
        try:
            await conn.run()
        except Diverged as exc:
            log.error("HA slave %s refused: %s", addr, exc)
        except RemoteProtocolError as exc:
            log.warning("HA slave %s sent bad data, closing: %s", addr, exc)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            log.info("HA slave %s connection lost: %s", addr, exc)
        finally:
            self.connections.discard(conn)
            # bounded: a TLS close_notify waits on the peer (the socket is closed regardless)
            with trio.CancelScope(shield=True), trio.move_on_after(CLOSE_TIMEOUT):
                await stream.aclose()
            if self.role is not None:
                self.confirm()  # a slave that left the set may have held the confirm offset back
            elif not self.connections:
                self.broker.store.fail_replica_waits()

    async def _negotiate(self, raw: trio.SocketStream, addr: str) -> trio.abc.Stream:
        """TLS as the broker's tls.server.mode says (stages/tls.py): a slave speaks first, with
        its offset report (first byte 0) or a TLS handshake (0x16), so a mode that refuses it
        says why. Raises RemotingConnectError."""
        tls = self.tls
        wait = self.config.ha_housekeeping_interval / 1000
        with trio.move_on_after(wait):
            stream = await negotiate(raw, tls.mode, tls.server_context, address=addr)
            if isinstance(stream, trio.SSLStream):
                log.info("HA slave %s connected with TLS", addr)
            return stream
        raise RemotingConnectError(addr, f"sent nothing for {wait:.0f} s")

    # -- status --------------------------------------------------------------------------

    def runtime_info(self) -> dict[str, Any]:
        """RocketMQ 5.x's HARuntimeInfo, for GET_BROKER_HA_STATUS and haStatus."""
        end = self.store.max_phy_offset
        fallbehind = self.config.ha_slave_fallbehind_max
        conns = []
        for c in sorted(self.connections, key=lambda c: c.addr):
            diff = end - max(c.ack_offset, 0)
            conns.append(
                {
                    "addr": c.addr,
                    "slaveAckOffset": c.ack_offset,
                    "diff": diff,
                    "inSync": (
                        c.slave_id in self.role.insync.members
                        if self.role is not None
                        else c.ack_offset >= 0 and diff < fallbehind
                    ),
                    "transferredByteInSecond": c.rate.per_second(),
                    "transferFromWhere": c.transfer_from,
                }
            )
        return {
            "master": True,
            "masterCommitLogMaxOffset": end,
            "inSyncSlaveNums": sum(1 for c in conns if c["inSync"]),
            "haConnectionInfo": conns,
            "haClientRuntimeInfo": {
                "masterAddr": "",
                "transferredByteInSecond": 0,
                "maxOffset": 0,
                "lastReadTimestamp": 0,
                "lastWriteTimestamp": 0,
                "masterFlushOffset": 0,
                "isActivated": False,
            },
        }

    async def status_fields(self) -> dict[str, str]:
        """Extra GET_BROKER_RUNTIME_INFO keys of a master."""
        info = self.runtime_info()
        return {
            "haListenPort": str(self.port or 0),
            "haConnectionNum": str(len(info["haConnectionInfo"])),
            "inSyncSlaveNums": str(info["inSyncSlaveNums"]),
            "slaveAckOffset": str(self.acked_offset),
            "slaveFallBehind": str(max(0, info["masterCommitLogMaxOffset"] - self.acked_offset)),
        }
