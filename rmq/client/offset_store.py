"""Consumer offsets: where each queue's consumption stands.

Offsets are consume-queue indexes: the next message to consume. Two stores, as RocketMQ:

* `RemoteOffsetStore` (clustering): the broker keeps the group's offsets. The consumer
  updates a local table as messages complete and commits it every 5 s and on stop
  (UPDATE_CONSUMER_OFFSET); a queue it starts on is read from the broker
  (QUERY_CONSUMER_OFFSET, 22 = none yet). Commits go to the group's master only; while it
  is gone (or refuses connections) they stay in the table and later rounds commit them,
  and offsets are read from a slave (which copies its master's every 10 s).
* `LocalOffsetStore` (broadcasting): every consumer has its own offsets, kept in
  `<dir>/<clientId>/<group>/offsets.json` (`{"offsetTable":{<MessageQueue>:offset}}`,
  fastjson's object-key dialect), written atomically with a `.bak` of the previous version.

`read` returns -1 when there is no offset yet and -2 when it could not be read.
"""

from __future__ import annotations

import enum
import logging
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

import trio

from rmq.protocol import ProtocolError
from rmq.protocol import body as B
from rmq.protocol.bodies.offsets import OffsetSerializeWrapper

from .errors import MQBrokerError, MQClientError, MQConnectError, MQTimeoutError
from .members import BrokerAccess
from .message import MessageQueue

log = logging.getLogger("rmq.client.offset_store")

NO_OFFSET = -1
READ_ERROR = -2


class ReadType(enum.Enum):
    MEMORY = "memory"
    STORE = "store"
    MEMORY_FIRST_THEN_STORE = "memory_first_then_store"


class OffsetStore(Protocol):
    async def load(self) -> None: ...

    def update(self, mq: MessageQueue, offset: int, *, increase_only: bool = False) -> None: ...

    async def read(self, mq: MessageQueue, how: ReadType) -> int: ...

    async def persist(self, mq: MessageQueue) -> None: ...

    async def persist_all(self, mqs: Iterable[MessageQueue]) -> None: ...

    def remove(self, mq: MessageQueue) -> None: ...

    def snapshot(self) -> dict[MessageQueue, int]: ...


class _Table:
    def __init__(self) -> None:
        self.table: dict[MessageQueue, int] = {}

    def update(self, mq: MessageQueue, offset: int, *, increase_only: bool = False) -> None:
        """Set the offset of `mq`; with `increase_only` never move it back."""
        if offset < 0:
            return
        current = self.table.get(mq)
        if current is None or not increase_only or offset > current:
            self.table[mq] = offset

    def remove(self, mq: MessageQueue) -> None:
        self.table.pop(mq, None)

    def snapshot(self) -> dict[MessageQueue, int]:
        return dict(self.table)


class RemoteOffsetStore(_Table):
    """Offsets kept by the broker (clustering)."""

    def __init__(self, instance: BrokerAccess, group: str) -> None:
        super().__init__()
        self.instance = instance
        self.group = group

    async def load(self) -> None:
        return None

    async def _master(self, mq: MessageQueue) -> str | None:
        """The master of `mq`'s group, the only broker commits go to (RocketMQ's slaves take
        their offsets from the master). While the route has none, or its master refuses
        connections, the route is fetched again (at most once a second per topic): the
        master may be back, at another address. None: no master now."""
        addr = self.instance.master_addr(mq.broker_name)
        if addr is None or not self.instance.reachable(addr):
            await self.instance.route_failed(mq.topic)
            addr = self.instance.master_addr(mq.broker_name)
        return addr

    async def read(self, mq: MessageQueue, how: ReadType) -> int:
        if how is not ReadType.STORE:
            offset = self.table.get(mq)
            if offset is not None or how is ReadType.MEMORY:
                return NO_OFFSET if offset is None else offset
        api = self.instance.api
        try:
            # from the master, or from a slave while the master is gone or refuses
            # connections: a slave copies its master's offsets every 10 s
            offset = await self.instance.read_call(
                mq.topic, mq.broker_name, lambda addr: api.query_consumer_offset(addr, self.group, mq)
            )
        except MQBrokerError as exc:
            log.info("query offset of %s failed: %s", mq, exc)
            return NO_OFFSET
        except MQClientError as exc:
            log.warning("query offset of %s failed: %s", mq, exc)
            return READ_ERROR
        if offset >= 0:
            self.update(mq, offset)
        return offset

    async def persist(self, mq: MessageQueue) -> None:
        """Commit the offset of `mq` to its master. Without a reachable master it stays in the
        table, and the next round (every 5 s, and at stop) commits it."""
        offset = self.table.get(mq)
        if offset is None:
            return
        addr = await self._master(mq)
        if addr is None or not self.instance.reachable(addr):
            log.info("commit of offset %d of %s deferred: no reachable master", offset, mq)
            return
        try:
            await self.instance.api.update_consumer_offset(addr, self.group, mq, offset)
        except MQClientError as exc:
            if isinstance(exc, (MQConnectError, MQTimeoutError)):
                self.instance.unreachable(addr)
            log.warning("commit of offset %d of %s failed (kept for the next round): %s", offset, mq, exc)

    async def persist_all(self, mqs: Iterable[MessageQueue]) -> None:
        for mq in sorted(set(mqs) & self.table.keys()):
            await self.persist(mq)


def default_offset_dir() -> Path:
    env = os.environ.get("RMQ_OFFSET_STORE_DIR")
    return Path(env) if env else Path.home() / ".rocketmq_offsets"


class LocalOffsetStore(_Table):
    """Offsets in a local file (broadcasting)."""

    def __init__(self, directory: Path | None, client_id: str, group: str) -> None:
        super().__init__()
        base = directory if directory is not None else default_offset_dir()
        self.path = base / client_id.replace(":", "_") / group / "offsets.json"
        self._lock = trio.Lock()

    async def load(self) -> None:
        self.table.update(await trio.to_thread.run_sync(self._read_file))

    def _read_file(self) -> dict[MessageQueue, int]:
        for path in (self.path, self.path.with_name(self.path.name + ".bak")):
            try:
                data = path.read_bytes()
            except FileNotFoundError:
                continue
            try:
                return dict(OffsetSerializeWrapper.from_json(B.loads(data)).offset_table)
            except (ProtocolError, AttributeError, TypeError, ValueError) as exc:
                log.warning("ignoring unreadable offset file %s: %s", path, exc)
        return {}

    async def read(self, mq: MessageQueue, how: ReadType) -> int:
        if how is not ReadType.STORE:
            offset = self.table.get(mq)
            if offset is not None or how is ReadType.MEMORY:
                return NO_OFFSET if offset is None else offset
        stored = await trio.to_thread.run_sync(self._read_file)
        offset = stored.get(mq)
        if offset is None:
            return NO_OFFSET
        self.update(mq, offset)
        return offset

    def remove(self, mq: MessageQueue) -> None:
        """Kept: the file is this consumer's own, and a queue that comes back resumes."""

    async def persist(self, mq: MessageQueue) -> None:
        await self.persist_all([mq])

    async def persist_all(self, mqs: Iterable[MessageQueue]) -> None:
        """Write the whole table (the file holds every queue this consumer has seen)."""
        table = dict(sorted(self.table.items()))
        if not table:
            return
        data = B.dumps(OffsetSerializeWrapper(table).to_json())
        async with self._lock:
            try:
                await trio.to_thread.run_sync(self._write_file, data)
            except OSError as exc:
                log.warning("cannot write offsets to %s: %s", self.path, exc)

    def _write_file(self, data: bytes) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_bytes(data)
        if self.path.exists():
            os.replace(self.path, self.path.with_name(self.path.name + ".bak"))
        os.replace(tmp, self.path)
