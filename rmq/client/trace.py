"""Message traces: Pub, SubBefore and SubAfter records sent to the trace topic.

A producer or push consumer made with `enable_trace=True` owns a TraceDispatcher
(AsyncTraceDispatcher's role). Recording a context is a `send_nowait` into a bounded
channel: when the channel is full the record is dropped and counted, so tracing never
slows or fails the user's send or handler. A background task gathers up to
MAX_BATCH contexts (or what arrived within FLUSH_INTERVAL), encodes them
(rmq.protocol.trace) and sends one message to the trace topic with a dedicated inner
producer (`_INNER_TRACE_PRODUCER-<group>`) on the owner's connections; send failures
are logged and dropped. Leaving the owner flushes what is queued, within STOP_TIMEOUT.
"""

from __future__ import annotations

import logging
from types import TracebackType
from typing import TYPE_CHECKING, Protocol

import trio

from rmq.protocol import properties as P
from rmq.protocol import trace as T
from rmq.protocol.constants import TRACE_TOPIC
from rmq.protocol.message import MessageExt

from .errors import MQClientError
from .ids import UniqueIdGenerator, wall_clock_ms
from .message import Message

if TYPE_CHECKING:
    from .message import SendResult

log = logging.getLogger("rmq.client.trace")

QUEUE_SIZE = 2048  # contexts waiting to be sent
MAX_BATCH = 100  # contexts per trace message
MAX_BODY = 128 * 1024  # bytes of records per trace message
FLUSH_INTERVAL = 0.5  # seconds a partial batch waits
STOP_TIMEOUT = 3.0
INNER_PRODUCER_PREFIX = "_INNER_TRACE_PRODUCER-"


def inner_producer_group(group: str) -> str:
    """The group of the producer that sends `group`'s traces."""
    return INNER_PRODUCER_PREFIX + group


class Sender(Protocol):
    """The dispatcher's inner producer: a Producer of `inner_producer_group(owner's group)`
    on its owner's instance, not yet started (the dispatcher runs it)."""

    async def __aenter__(self) -> object: ...

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None: ...

    async def send(self, msg: Message) -> object: ...


class TraceDispatcher:
    """Queue trace contexts and send them in batches; see the module docstring."""

    def __init__(self, client_ip: str, group: str, producer: Sender, trace_topic: str | None = None) -> None:
        self.client_ip = client_ip
        self.group = group
        self._producer = producer
        self.topic = trace_topic or TRACE_TOPIC
        self.dropped = 0
        self.sent = 0  # trace messages sent
        self._send, self._recv = trio.open_memory_channel[T.TraceContext](QUEUE_SIZE)
        self._scope = trio.CancelScope()
        self._ids = UniqueIdGenerator(client_ip)

    def stop(self) -> None:
        """End `run` (it flushes what is queued first)."""
        self._scope.cancel()

    # -- recording (the user's path: never blocks, never raises) ---------------------------

    def record(self, ctx: T.TraceContext) -> None:
        try:
            self._send.send_nowait(ctx)
        except (trio.WouldBlock, trio.ClosedResourceError):
            self.dropped += 1

    def published(self, msg: Message, result: SendResult | None, seconds: float, store_host: str = "") -> None:
        props = msg.properties
        if props.get(P.TRAN_MSG) == "true":
            kind = T.MessageType.TRANS_HALF
        elif props.get(P.DELAY):
            kind = T.MessageType.DELAY
        else:
            kind = T.MessageType.NORMAL
        bean = T.TraceBean(
            msg_id=result.msg_id if result else props.get(P.UNIQ_KEY, ""),
            topic=msg.topic,
            tags=props.get(P.TAGS, ""),
            keys=props.get(P.KEYS, ""),
            store_host=store_host,
            client_host=self.client_ip,
            body_length=len(msg.body),
            msg_type=kind,
            offset_msg_id=result.offset_msg_id if result else "",
        )
        ctx = T.TraceContext(T.PUB, wall_clock_ms(), group_name=self.group, cost_time=int(seconds * 1000))
        ctx.success = result is not None
        ctx.beans.append(bean)
        self.record(ctx)

    def _bean(self, msg: MessageExt) -> T.TraceBean:
        return T.TraceBean(
            msg_id=msg.msg_id,
            topic=msg.topic,
            tags=msg.tags or "",
            keys=msg.keys or "",
            store_host=f"{msg.store_host[0]}:{msg.store_host[1]}",
            client_host=self.client_ip,
            body_length=len(msg.body),
            retry_times=msg.reconsume_times,
        )

    def before_consume(self, msg: MessageExt) -> str:
        """Record SubBefore; returns the request id that ties it to its SubAfter."""
        request_id = self._ids.next_id()
        ctx = T.TraceContext(T.SUB_BEFORE, wall_clock_ms(), group_name=self.group, request_id=request_id)
        ctx.beans.append(self._bean(msg))
        self.record(ctx)
        return request_id

    def after_consume(self, msg: MessageExt, request_id: str, seconds: float, ok: bool) -> None:
        """Record SubAfter (a handler that raised counts as FAILED, as one returning RECONSUME_LATER)."""
        code = T.ContextCode.SUCCESS if ok else T.ContextCode.FAILED
        ctx = T.TraceContext(T.SUB_AFTER, wall_clock_ms(), group_name=self.group, request_id=request_id)
        ctx.cost_time, ctx.success, ctx.context_code = int(seconds * 1000), ok, int(code)
        ctx.beans.append(self._bean(msg))
        self.record(ctx)

    # -- sending (background) ------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Send batches until stopped or cancelled, then flush what is queued."""
        producer = self._producer
        async with producer:
            task_status.started()
            batch: list[T.TraceContext] = []
            try:
                with self._scope:
                    while True:
                        batch = [await self._recv.receive()]
                        with trio.move_on_after(FLUSH_INTERVAL):
                            while len(batch) < MAX_BATCH:
                                batch.append(await self._recv.receive())
                        await self._send_batch(producer, batch)
                        batch = []
            finally:
                with trio.CancelScope(shield=True), trio.move_on_after(STOP_TIMEOUT):
                    while True:
                        try:
                            batch.append(self._recv.receive_nowait())
                        except (trio.WouldBlock, trio.EndOfChannel):
                            break
                    for i in range(0, len(batch), MAX_BATCH):
                        await self._send_batch(producer, batch[i : i + MAX_BATCH])

    async def _send_batch(self, producer: Sender, batch: list[T.TraceContext]) -> None:
        data: list[str] = []
        keys: list[str] = []
        size = 0
        for ctx in batch:
            text = T.encode_context(ctx)
            if data and size + len(text) > MAX_BODY:
                await self._send_one(producer, data, keys)
                data, keys, size = [], [], 0
            data.append(text)
            keys += T.trace_keys(ctx)
            size += len(text)
        if data:
            await self._send_one(producer, data, keys)

    async def _send_one(self, producer: Sender, data: list[str], keys: list[str]) -> None:
        unique = list(dict.fromkeys(k for k in keys if k))
        msg = Message(self.topic, "".join(data).encode("utf-8"), keys=T.KEY_SEPARATOR.join(unique))
        try:
            await producer.send(msg)
            self.sent += 1
        except MQClientError as exc:
            log.info("trace message to %s not sent: %s", self.topic, exc)
