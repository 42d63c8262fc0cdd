"""The master's side of HA replication (RocketMQ 4.x HAService / HAConnection).

A master listens on the HA port (haListenPort, default listenPort + 1). Each slave that
connects gets one `SlaveConnection`, two tasks over one TCP stream:

* reader: the slave's 8-byte offset reports (rmq.protocol.ha). The first says where to start
  (0: the start of the master's last CommitLog file); every one is an ack, handed to the
  store, which wakes the SYNC_MASTER sends it covers. Silence for haHousekeepingInterval
  closes the connection.
* writer: CommitLog bytes from where the slave stands, in chunks of at most
  haTransferBatchSize that never cross a file (several chunks may share one socket write);
  a heartbeat chunk after haSendHeartbeatInterval without data.

A slave that asks for an offset this log cannot continue from (past its end, before its first
file, or not at a record boundary: its log has diverged from ours) is refused with an error
and the connection closes; the master's store is only ever read here.

TLS: with tls.server.mode permissive or enforcing the HA port negotiates as the main port does
(the slave speaks first), so slaves with tls.enable connect over TLS.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import trio

from rmq.lifetime import unwrapped
from rmq.protocol.errors import RemoteProtocolError
from rmq.protocol.ha import ReportDecoder, encode_chunk_header
from rmq.remoting import RemotingConnectError
from rmq.remoting.stages.tls import negotiate
from rmq.store.aio import Replication

from .rate import ByteRate

if TYPE_CHECKING:
    from rmq.store import MessageStore

    from ..parts import BrokerParts
    from ..tls import BrokerTls

log = logging.getLogger("rmq.broker.ha")

RECEIVE_SIZE = 64 * 1024
MAX_WRITE = 256 * 1024  # bytes of chunks gathered into one socket write
CLOSE_TIMEOUT = 1.0


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
        self._requested = trio.Event()

    async def run(self) -> None:
        async with unwrapped(), trio.open_nursery() as nursery:
            nursery.start_soon(self._read, nursery.cancel_scope)
            nursery.start_soon(self._write)

    async def _read(self, scope: trio.CancelScope) -> None:
        service = self.service
        decoder = ReportDecoder()
        idle = service.config.ha_housekeeping_interval / 1000
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
            if offset is None:
                continue
            end = service.store.max_phy_offset
            if offset > end:
                raise Diverged(f"it reports offset {offset}, past this master's CommitLog end {end}")
            if self.request_offset < 0:
                self.request_offset = offset
                self._requested.set()
            self.ack_offset = offset
            service.acked(offset)
        scope.cancel()

    def _start_offset(self) -> int:
        store = self.service.store
        end = store.max_phy_offset
        wanted = self.request_offset
        if wanted == 0:
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
                continue
            signal = service.data_signal()
            if store.max_phy_offset != self.next_offset:
                continue
            with trio.move_on_after(heartbeat) as timer:
                await signal.wait()
            if timer.cancelled_caught:
                await self.stream.send_all(encode_chunk_header(self.next_offset, 0))


class HAService(Replication):
    """The HA listener of a master broker and its slave connections."""

    def __init__(self, broker: BrokerParts, tls: BrokerTls) -> None:
        self.broker = broker
        self.tls = tls  # tls.server.mode of the broker's ports covers the HA port
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
        if self._signal_waited:
            self._signal_waited = False
            self._signal.set()
            self._signal = trio.Event()

    def data_signal(self) -> trio.Event:
        """The Event the next append sets."""
        self._signal_waited = True
        return self._signal

    def unavailable(self, end_offset: int) -> str | None:
        if not any(c.ack_offset >= 0 for c in self.connections):
            return "no slave is connected to this SYNC_MASTER"
        behind = self.store.max_phy_offset - self.acked_offset
        if behind >= self.config.ha_slave_fallbehind_max:
            return (
                f"the slave is {behind} bytes behind, beyond haSlaveFallbehindMax={self.config.ha_slave_fallbehind_max}"
            )
        return None

    def acked(self, offset: int) -> None:
        if offset > self.acked_offset:
            self.acked_offset = offset
        self.broker.store.replica_acked(offset)

    # -- serving -----------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(self.config.ha_port, host=self.config.bind_address)
        self.port = listeners[0].socket.getsockname()[1]
        log.info("HA service listening on port %d", self.port)
        async with trio.open_nursery() as nursery:
            await nursery.start(trio.serve_listeners, self._serve, listeners)
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
            if not self.connections:
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
                    "inSync": c.ack_offset >= 0 and diff < fallbehind,
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
