"""A small blocking RocketMQ client for Spark executors: routes, offsets and pulls.

Spark runs a data source's `read()` in plain Python worker processes, where starting a
Trio run per task would be heavy and fragile. This client is the sans-IO core
(RemotingCommand + FrameDecoder) over an ordinary blocking socket, one request at a
time per connection: enough for GET_ROUTEINFO_BY_TOPIC, GET_MIN/MAX_OFFSET,
SEARCH_OFFSET_BY_TIMESTAMP and PULL_MESSAGE without suspension (PROTOCOL.md 3.2, 3.3).

Every call has a deadline (`timeout` seconds for the whole exchange, not per recv), so
a silent peer raises `ClientError` instead of hanging a Spark task.
"""

from __future__ import annotations

import itertools
import socket
import time
from dataclasses import dataclass
from typing import Any, Self

from rmq.protocol import FrameDecoder, RemotingCommand, RequestCode, ResponseCode
from rmq.protocol import body as json_body
from rmq.protocol.headers import (
    GetRouteInfoRequestHeader,
    OffsetResponseHeader,
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    QueueRequestHeader,
    SearchOffsetRequestHeader,
)

# PullSysFlag (PROTOCOL.md 3.2): we send our own subscription and never ask to be parked.
PULL_FLAG_SUBSCRIPTION = 0x4
PERM_READ = 0x4
MASTER_ID = 0
# Reads are at most this many bytes per recv; a frame itself is bounded by FrameDecoder
# (16 MiB, RocketMQ's frame limit).
_RECV_SIZE = 256 * 1024


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


@dataclass(frozen=True, slots=True)
class PullResult:
    code: int
    next_begin_offset: int
    min_offset: int
    max_offset: int
    body: bytes


def split_addrs(text: str) -> list[str]:
    """Name-server lists are `;`-separated in RocketMQ (`-n "a:9876;b:9876"`); commas work too."""
    return [a.strip() for a in text.replace(",", ";").split(";") if a.strip()]


def _host_port(addr: str) -> tuple[str, int]:
    host, sep, port = addr.rpartition(":")
    if not sep or not port.isdigit():
        raise ClientError(f"bad address {addr!r}: want host:port")
    return host.strip("[]"), int(port)


class Connection:
    """One blocking connection; `invoke` sends a request and waits for its response."""

    _opaques = itertools.count(1)

    def __init__(self, addr: str, timeout: float = 10.0) -> None:
        self.addr = addr
        self.timeout = timeout
        try:
            self._sock = socket.create_connection(_host_port(addr), timeout=timeout)
        except OSError as exc:
            raise ClientError(f"cannot connect to {addr}: {exc}") from None
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._decoder = FrameDecoder()

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def invoke(self, code: int, ext: dict[str, Any] | None = None, body: bytes = b"") -> RemotingCommand:
        """Send one request and return its response.

        Requests the peer sends us on this connection (none are expected: we never
        heartbeat) and responses to other opaques are dropped. On any error the
        connection is closed, as its byte stream can no longer be trusted.
        """
        request = RemotingCommand.request(code, ext, body)
        request.opaque = next(self._opaques) & 0x7FFFFFFF
        deadline = time.monotonic() + self.timeout
        try:
            self._sock.sendall(request.encode())
            while True:
                for frame in self._decoder:
                    cmd = RemotingCommand.decode(frame)
                    if cmd.is_response and cmd.opaque == request.opaque:
                        return cmd
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError
                self._sock.settimeout(left)
                chunk = self._sock.recv(_RECV_SIZE)
                if not chunk:
                    raise ClientError(f"{self.addr} closed the connection")
                self._decoder.feed(chunk)
        except TimeoutError:
            self.close()
            raise ClientError(f"no answer from {self.addr} to request {code} within {self.timeout} s") from None
        except OSError as exc:
            self.close()
            raise ClientError(f"connection to {self.addr} failed: {exc}") from None
        except ClientError:
            self.close()
            raise


def fetch_route(namesrv: str, topic: str, timeout: float = 10.0) -> list[QueueRef]:
    """The readable queues of `topic` on master brokers, asking each name server in turn.

    Raises ClientError if no name server answers, or with code TOPIC_NOT_EXIST if the
    topic has no route.
    """
    errors: list[str] = []
    for addr in split_addrs(namesrv):
        try:
            with Connection(addr, timeout) as conn:
                ext = GetRouteInfoRequestHeader(topic=topic, accept_standard_json_only=True).to_ext()
                resp = conn.invoke(RequestCode.GET_ROUTEINFO_BY_TOPIC, ext)
        except ClientError as exc:
            errors.append(str(exc))
            continue
        if resp.code != ResponseCode.SUCCESS:
            raise ClientError(f"no route for topic {topic!r}: {resp.remark or resp.code}", resp.code)
        return queues_from_route(topic, json_body.loads(resp.body))
    raise ClientError(f"no name server answered for topic {topic!r}: {'; '.join(errors) or 'no address given'}")


def queues_from_route(topic: str, route: dict[str, Any]) -> list[QueueRef]:
    """Subscribe queues (PROTOCOL.md 7): readable QueueData whose broker has a master address."""
    masters: dict[str, str] = {}
    for bd in route.get("brokerDatas") or []:
        addrs = {int(k): v for k, v in (bd.get("brokerAddrs") or {}).items()}
        if MASTER_ID in addrs:
            masters[bd["brokerName"]] = addrs[MASTER_ID]
    out: list[QueueRef] = []
    for qd in route.get("queueDatas") or []:
        name = qd["brokerName"]
        if name in masters and int(qd.get("perm", 0)) & PERM_READ:
            out.extend(QueueRef(topic, name, q, masters[name]) for q in range(int(qd["readQueueNums"])))
    return sorted(out)


class BrokerClient:
    """Offsets and pulls against brokers, one cached connection per broker address."""

    def __init__(self, group: str = "rmq-spark", timeout: float = 10.0) -> None:
        self.group = group
        self.timeout = timeout
        self._conns: dict[str, Connection] = {}

    def close(self) -> None:
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _invoke(self, addr: str, code: int, ext: dict[str, str]) -> RemotingCommand:
        conn = self._conns.get(addr)
        if conn is None:
            conn = self._conns[addr] = Connection(addr, self.timeout)
        try:
            return conn.invoke(code, ext)
        except ClientError:
            self._conns.pop(addr, None)
            raise

    def _offset(self, q: QueueRef, code: int, ext: dict[str, str]) -> int:
        resp = self._invoke(q.addr, code, ext)
        if resp.code != ResponseCode.SUCCESS:
            raise ClientError(f"request {code} for {q.topic} {q.key} failed: {resp.remark or resp.code}", resp.code)
        return OffsetResponseHeader.from_ext(resp.ext_fields).offset

    def max_offset(self, q: QueueRef) -> int:
        """The next offset to be written in the queue (GET_MAX_OFFSET)."""
        return self._offset(q, RequestCode.GET_MAX_OFFSET, QueueRequestHeader(q.topic, q.queue_id).to_ext())

    def min_offset(self, q: QueueRef) -> int:
        return self._offset(q, RequestCode.GET_MIN_OFFSET, QueueRequestHeader(q.topic, q.queue_id).to_ext())

    def search_offset(self, q: QueueRef, timestamp_ms: int) -> int:
        """The queue offset nearest to a store time (SEARCH_OFFSET_BY_TIMESTAMP)."""
        ext = SearchOffsetRequestHeader(q.topic, q.queue_id, timestamp_ms).to_ext()
        return self._offset(q, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, ext)

    def pull(self, q: QueueRef, offset: int, max_nums: int = 32) -> PullResult:
        """One PULL_MESSAGE without suspension; the body holds stored records byte for byte."""
        header = PullMessageRequestHeader(
            consumer_group=self.group,
            topic=q.topic,
            queue_id=q.queue_id,
            queue_offset=offset,
            max_msg_nums=max_nums,
            sys_flag=PULL_FLAG_SUBSCRIPTION,
            commit_offset=0,
            suspend_timeout_millis=0,
            subscription="*",
            expression_type="TAG",
        )
        resp = self._invoke(q.addr, RequestCode.PULL_MESSAGE, header.to_ext())
        if resp.code not in (
            ResponseCode.SUCCESS,
            ResponseCode.PULL_NOT_FOUND,
            ResponseCode.PULL_RETRY_IMMEDIATELY,
            ResponseCode.PULL_OFFSET_MOVED,
        ):
            raise ClientError(f"pull of {q.topic} {q.key} at {offset} failed: {resp.remark or resp.code}", resp.code)
        h = PullMessageResponseHeader.from_ext(resp.ext_fields)
        return PullResult(resp.code, h.next_begin_offset, h.min_offset, h.max_offset, resp.body)
