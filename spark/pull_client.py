"""Routes, offsets and pulls for Spark executors, through rmq's blocking client.

Spark runs a data source's `read()` in plain Python worker processes. They use
rmq.client.blocking.QueueReader (the one client implementation, run in a background Trio
thread of the worker) for GET_ROUTEINFO_BY_TOPIC, GET_MIN/MAX_OFFSET,
SEARCH_OFFSET_BY_TIMESTAMP and PULL_MESSAGE without suspension (PROTOCOL.md 3.2, 3.3). This
module keeps the live source's vocabulary on top of it: queues as `QueueRef` with their
offset-JSON key, answers as `PullResult` with the stored records undecoded, and one error
type, `ClientError`, carrying the broker's code when there is one.

Every call has a deadline (`timeout` seconds), so a silent peer raises `ClientError` instead
of hanging a Spark task.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Self

from rmq.client import MessageQueue, MQClientError
from rmq.client.blocking import QueueReader
from rmq.client.errors import MQBrokerError
from rmq.client.route import TopicRoute


class ClientError(Exception):
    """A request failed: connection trouble, timeout, or an unexpected response code."""

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True, slots=True, order=True)
class QueueRef:
    """One readable message queue of a topic on one broker (ordered as RocketMQ sorts queues)."""

    topic: str
    broker_name: str
    queue_id: int
    addr: str  # master address "host:port"

    @property
    def key(self) -> str:
        """The queue's key in offset JSON: "brokerName:queueId"."""
        return f"{self.broker_name}:{self.queue_id}"

    @property
    def mq(self) -> MessageQueue:
        return MessageQueue(self.topic, self.broker_name, self.queue_id)


@dataclass(frozen=True, slots=True)
class PullResult:
    code: int
    next_begin_offset: int
    min_offset: int
    max_offset: int
    body: bytes


def split_addrs(text: str) -> list[str]:
    return [a.strip() for part in text.split(";") for a in part.split(",") if a.strip()]


# One reader per (name servers, group, timeout) per worker process: its connections are reused
# by every task the worker runs.
_readers: dict[tuple[str, str, float], QueueReader] = {}
_readers_lock = threading.Lock()


def _reader(namesrv: str, group: str = "rmq-spark", timeout: float = 10.0) -> QueueReader:
    key = (";".join(split_addrs(namesrv)), group, timeout)
    with _readers_lock:
        reader = _readers.get(key)
        if reader is None:
            reader = _readers[key] = QueueReader(key[0], group=group, timeout=timeout).start()
        return reader


def _error(exc: MQClientError) -> ClientError:
    return ClientError(str(exc), exc.code if isinstance(exc, MQBrokerError) else None)


def fetch_route(namesrv: str, topic: str, timeout: float = 10.0) -> list[QueueRef]:
    """The readable queues of `topic` on master brokers.

    Raises ClientError if no name server answers or the topic has no route.
    """
    reader = _reader(namesrv, timeout=timeout)
    try:
        queues = reader.queues(topic)
    except MQClientError as exc:
        raise _error(exc) from None
    return sorted(QueueRef(mq.topic, mq.broker_name, mq.queue_id, reader.master_addr(mq)) for mq in queues)


def queues_from_route(topic: str, route: dict[str, Any]) -> list[QueueRef]:
    """Subscribe queues (PROTOCOL.md 7) of a TopicRouteData body: readable queues of brokers
    that have a master."""
    parsed = TopicRoute.from_json(route)
    masters = {bd.broker_name: bd.master_addr for bd in parsed.broker_datas if bd.master_addr}
    return sorted(
        QueueRef(topic, mq.broker_name, mq.queue_id, masters[mq.broker_name])
        for mq in parsed.subscribe_queues(topic)
        if mq.broker_name in masters
    )


class BrokerClient:
    """Offsets and pulls at the brokers the queues name (the worker's shared QueueReader
    underneath); `namesrv` identifies the cluster."""

    def __init__(self, namesrv: str, group: str = "rmq-spark", timeout: float = 10.0) -> None:
        self.group = group
        self.timeout = timeout
        self.namesrv = namesrv

    def close(self) -> None:
        """Nothing to release: the reader is shared by the worker's tasks."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, q: QueueRef, what: str, fn: Any) -> Any:
        try:
            return fn(_reader(self.namesrv, self.group, self.timeout))
        except MQClientError as exc:
            raise ClientError(f"{what} for {q.topic} {q.key} failed: {exc}", _error(exc).code) from None

    def max_offset(self, q: QueueRef) -> int:
        """The next offset to be written in the queue (GET_MAX_OFFSET)."""
        return int(self._call(q, "GET_MAX_OFFSET", lambda r: r.max_offset(q.mq, q.addr)))

    def min_offset(self, q: QueueRef) -> int:
        return int(self._call(q, "GET_MIN_OFFSET", lambda r: r.min_offset(q.mq, q.addr)))

    def search_offset(self, q: QueueRef, timestamp_ms: int) -> int:
        """The queue offset nearest to a store time (SEARCH_OFFSET_BY_TIMESTAMP)."""
        return int(self._call(q, "SEARCH_OFFSET_BY_TIMESTAMP", lambda r: r.search_offset(q.mq, timestamp_ms, q.addr)))

    def pull(self, q: QueueRef, offset: int, max_nums: int = 32) -> PullResult:
        """One PULL_MESSAGE without suspension; the body holds stored records byte for byte."""
        r = self._call(q, f"pull at {offset}", lambda reader: reader.pull(q.mq, offset, max_nums, q.addr))
        return PullResult(r.code, r.next_begin_offset, r.min_offset, r.max_offset, r.body)
