"""The slave's side of HA replication (RocketMQ 4.x HAService.HAClient).

The slave connects to its master's HA address (haMasterAddress, else the haServerAddr the
name server returns when the slave registers), reports its CommitLog end, and appends the
chunks the master streams back verbatim at the same offsets; the store's normal dispatch
builds consume queues and the index from them. It reports again after every read that
advanced its log, and every haSendHeartbeatInterval. A connection silent for
haHousekeepingInterval is closed; a lost master is retried every RETRY_INTERVAL.

Divergence: a chunk that does not continue this slave's log (another offset than its end,
or bytes that are no record of it) means the two logs have parted. The slave then stops
replicating with an error saying so, keeps serving reads of what it has, and writes nothing
more: copying on would corrupt its store. Bytes that break the HA protocol only close the
connection.

TLS: with tls.enable the slave speaks TLS to its master's HA port (tls.client.* settings).

Controller mode (``SlaveRole`` given): the slave first sends a handshake (its brokerId, its
last epoch, its log end) and gets the master's epoch entries back. It refuses a master whose
epoch is older than the one the controller named, cuts its CommitLog to the last offset the
two logs share (RocketMQ's EpochFileCache.findConsistentPoint: a slave that was master in an
older epoch may hold records the new master never had), takes the master's later epochs into
its epoch file, and then copies as above.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import trio

from rmq.lifetime import unwrapped
from rmq.protocol.errors import ProtocolError
from rmq.protocol.ha import ChunkDecoder, decode_epochs, encode_handshake, encode_report
from rmq.remoting import RemotingConnectError
from rmq.remoting.stages.tls import wrap_client
from rmq.store import StoreError
from rmq.store.epochs import EpochEntry, consistent_point

from ..processors.common import host_port
from .rate import ByteRate

if TYPE_CHECKING:
    from rmq.store import MessageStore
    from rmq.store.epochs import EpochCache

    from ..parts import BrokerParts
    from ..tls import BrokerTls
    from .sync import SlaveSynchronize

log = logging.getLogger("rmq.broker.ha")

RETRY_INTERVAL = 5.0  # seconds between connection attempts (RocketMQ's HAClient waits 5 s)
CONNECT_TIMEOUT = 3.0
RECEIVE_SIZE = 256 * 1024


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class SlaveRole(Protocol):
    """What a controller-mode slave's HA client needs (replicas.py)."""

    broker_id: int | None
    master_epoch: int
    master_address: str
    epochs: EpochCache


class StaleMaster(Exception):
    """The HA peer's epoch is older than the master the controller named."""


class HAClient:
    """Keeps a slave's CommitLog a copy of its master's."""

    def __init__(
        self,
        broker: BrokerParts,
        tls: BrokerTls,
        sync: SlaveSynchronize,
        register_now: Callable[[], None],
        role: SlaveRole | None = None,
    ) -> None:
        self.broker = broker
        self.role = role  # controller mode: handshake, epochs and truncation first
        self.tls = tls  # tls.enable: the connection to the master's HA port is TLS
        self.sync = sync  # asks the master where its log ends (status_fields)
        self.register_now = register_now  # asks the name servers for the master again
        self.config = broker.config
        self.fixed_address = bool(self.config.ha_master_address)
        self.master_ha_addr = self.config.ha_master_address  # "" until known
        self.master_addr = ""  # the master's broker address, from the name server
        self.connected = False
        self.diverged: str | None = None
        self.last_read_ms = 0
        self.last_write_ms = 0
        self.last_master_offset = 0  # the end of the last chunk the master sent
        self.reconnects = 0
        self.rate = ByteRate()
        self._address_changed = trio.Event()
        self._advanced = trio.Event()  # the log grew: report at once
        self._session: trio.CancelScope | None = None

    @property
    def store(self) -> MessageStore:
        return self.broker.message_store

    def update_master(self, master_addr: str | None, ha_addr: str | None) -> None:
        """What the name server said about our master when we registered."""
        if self.role is not None and master_addr != self.role.master_address:
            return  # controller mode: only the master the controller named (the name server may lag)
        if master_addr:
            self.master_addr = master_addr
        if ha_addr and not self.fixed_address and ha_addr != self.master_ha_addr:
            log.info("HA master address is now %s", ha_addr)
            self.master_ha_addr = ha_addr
            if self._session is not None:
                self._session.cancel()  # reconnect to the new one
            self._address_changed.set()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while self.diverged is None:
            if not self.master_ha_addr:
                # No master registered yet when we last registered: ask again sooner than the
                # registration period, so a slave started before its master follows it quickly.
                self._address_changed = trio.Event()
                with trio.move_on_after(RETRY_INTERVAL):
                    await self._address_changed.wait()
                if not self.master_ha_addr:
                    self.register_now()
                continue
            try:
                await self._session_once(self.master_ha_addr)
            except StoreError as exc:
                self.diverged = str(exc)
                log.error(
                    "HA replication from %s STOPPED: this slave's CommitLog has diverged from its master's: %s. "
                    "It keeps serving what it holds; to copy the master again, move its store aside and "
                    "start it with an empty one.",
                    self.master_ha_addr, exc,
                )  # fmt: skip
                break
            except ProtocolError as exc:
                log.warning("HA master %s sent bad data, closing: %s", self.master_ha_addr, exc)
            except StaleMaster as exc:
                log.warning("HA master %s: %s; waiting for the new master's address", self.master_ha_addr, exc)
            except (OSError, trio.BrokenResourceError, trio.ClosedResourceError, RemotingConnectError) as exc:
                log.info("HA master %s unreachable or lost: %s", self.master_ha_addr, exc)
            finally:
                self.connected = False
            self.reconnects += 1
            await trio.sleep(RETRY_INTERVAL)
        await trio.sleep_forever()

    async def _session_once(self, address: str) -> None:
        host, port = host_port(address)
        context = self.tls.client_context
        with trio.fail_after(CONNECT_TIMEOUT):
            tcp = await trio.open_tcp_stream(host, port)
        stream: trio.abc.Stream = tcp
        if context is not None:  # tls.enable: the master's HA port negotiates TLS (master.py)
            try:
                stream = await wrap_client(
                    tcp, context, server_hostname=host, address=address, handshake_timeout=CONNECT_TIMEOUT
                )
            except BaseException:
                await trio.aclose_forcefully(tcp)
                raise
        async with stream, unwrapped(), trio.open_nursery() as nursery:
            self.connected = True
            self._session = nursery.cancel_scope
            log.info(
                "HA connected to master %s%s, reporting offset %d",
                address,
                " with TLS" if context is not None else "",
                self.store.max_phy_offset,
            )
            try:
                rest = b""
                if self.role is not None:
                    rest = await self._handshake(stream, self.role)
                nursery.start_soon(self._report_loop, stream, nursery.cancel_scope)
                await self._read_loop(stream, rest)
                nursery.cancel_scope.cancel()
            finally:
                self._session = None

    async def _handshake(self, stream: trio.abc.Stream, role: SlaveRole) -> bytes:
        """Controller mode: handshake, then cut this log to what it shares with the master's.
        Returns bytes that came after the master's answer (its first chunks)."""
        assert role.broker_id is not None
        epochs = role.epochs
        store = self.store
        await stream.send_all(encode_handshake(role.broker_id, epochs.last_epoch, store.max_phy_offset))
        buf = b""
        idle = self.config.ha_housekeeping_interval / 1000
        with trio.fail_after(idle):
            while (got := decode_epochs(buf)) is None:
                data = await stream.receive_some(RECEIVE_SIZE)
                if not data:
                    raise trio.BrokenResourceError("the master closed the connection at the handshake")
                buf += data
        (master_epoch, master_end, entries), used = got
        if master_epoch < role.master_epoch:
            self.master_ha_addr = "" if not self.fixed_address else self.master_ha_addr
            raise StaleMaster(f"its epoch {master_epoch} is older than the elected master's {role.master_epoch}")
        mine = epochs.entries
        end = store.max_phy_offset
        if mine:
            point = consistent_point(mine, end, [EpochEntry(e, s) for e, s in entries], master_end)
            if point < 0:
                ours = [(e.epoch, e.start_offset) for e in mine]
                raise StoreError(f"no epoch in common with the master's (ours {ours}, the master's {entries})")
            if point < end:
                log.warning(
                    "HA: this log ends at %d; the master's shares it up to %d only: truncating %d bytes "
                    "(records no master of a later epoch holds)",
                    end, point, end - point,
                )  # fmt: skip
                await self.broker.store.truncate_to(point)
                epochs.truncate_suffix_by_offset(point)
        for epoch, start in entries:
            if epoch > epochs.last_epoch:
                epochs.truncate_suffix_by_offset(start)  # an epoch that wrote nothing gives way
                epochs.append(epoch, start)
        log.info("HA handshake with master of epoch %d done: copying from %d", master_epoch, store.max_phy_offset)
        return buf[used:]

    async def _report_loop(self, stream: trio.abc.Stream, scope: trio.CancelScope) -> None:
        """Report now, then whenever the log advanced, and at least every heartbeat interval.
        A report that cannot be sent for haHousekeepingInterval closes the connection."""
        heartbeat = self.config.ha_send_heartbeat_interval / 1000
        housekeeping = self.config.ha_housekeeping_interval / 1000
        while True:
            self._advanced = trio.Event()
            with trio.move_on_after(housekeeping) as timer:
                await stream.send_all(encode_report(self.store.max_phy_offset))
            if timer.cancelled_caught:
                log.warning("HA master took no report for %.0f s: closing", housekeeping)
                scope.cancel()
                return
            self.last_write_ms = _now_ms()
            with trio.move_on_after(heartbeat):
                await self._advanced.wait()

    async def _read_loop(self, stream: trio.abc.Stream, rest: bytes = b"") -> None:
        decoder = ChunkDecoder()
        if rest:
            decoder.feed(rest)
            self._append(decoder)
        idle = self.config.ha_housekeeping_interval / 1000
        while True:
            with trio.move_on_after(idle) as timer:
                data = await stream.receive_some(RECEIVE_SIZE)
            if timer.cancelled_caught:
                log.warning("HA master silent for %.0f s: closing", idle)
                return
            if not data:
                log.info("HA master closed the connection")
                return
            self.last_read_ms = _now_ms()
            self.rate.add(len(data))
            decoder.feed(data)
            self._append(decoder)

    def _append(self, decoder: ChunkDecoder) -> None:
        store = self.broker.store
        moved = False
        for offset, chunk in decoder:
            mine = self.store.max_phy_offset
            if mine and offset != mine:
                raise StoreError(f"the master sent data at offset {offset}, this slave's CommitLog ends at {mine}")
            store.append_replica(offset, chunk)
            self.last_master_offset = offset + len(chunk)
            moved = moved or bool(chunk)
        if moved:
            self._advanced.set()

    # -- status --------------------------------------------------------------------------

    def runtime_info(self) -> dict[str, Any]:
        """RocketMQ 5.x's HARuntimeInfo of a slave."""
        return {
            "master": False,
            "masterCommitLogMaxOffset": 0,
            "inSyncSlaveNums": 0,
            "haConnectionInfo": [],
            "haClientRuntimeInfo": {
                "masterAddr": self.master_ha_addr,
                "transferredByteInSecond": self.rate.per_second(),
                "maxOffset": self.store.max_phy_offset,
                "lastReadTimestamp": self.last_read_ms,
                "lastWriteTimestamp": self.last_write_ms,
                "masterFlushOffset": self.last_master_offset,
                "isActivated": self.connected and self.diverged is None,
            },
        }

    async def status_fields(self) -> dict[str, str]:
        """Extra GET_BROKER_RUNTIME_INFO keys of a slave: where its master stands and how far
        behind it is (asked of the master now; empty when it cannot be reached)."""
        mine = self.store.max_phy_offset
        fields = {
            "masterAddr": self.master_addr,
            "haMasterAddress": self.master_ha_addr,
            "haConnected": "true" if self.connected else "false",
            "haLastReadTimestamp": str(self.last_read_ms),
            "haDiverged": self.diverged or "",
        }
        master_end = await self.sync.master_max_offset() if self.master_addr else None
        if master_end is not None:
            fields["masterPutWhere"] = str(master_end)
            fields["slaveFallBehind"] = str(max(0, master_end - mine))
        return fields
