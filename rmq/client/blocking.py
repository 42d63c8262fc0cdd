"""The client for blocking code (scripts, WSGI apps, Spark workers): the same producers and
consumers, called without any event loop.

    from rmq.client import Message
    from rmq.client.blocking import Producer, PullConsumer

    with Producer("my_group", namesrv="127.0.0.1:9876") as producer:
        result = producer.send(Message("TopicTest", b"hello"))     # a SendResult

    with PullConsumer("my_consumers", namesrv="127.0.0.1:9876") as consumer:
        consumer.subscribe("TopicTest")
        for msg in consumer.poll(timeout=5):
            print(msg.body)

Each call runs the Trio implementation (rmq.client) in rmq's background Trio thread
(portal.py) and waits for it; objects may be shared between threads. Arguments, results and
errors are those of rmq.client. Do not call these from inside a Trio or asyncio loop (use
rmq.client or rmq.client.aio there): they block.
"""

from __future__ import annotations

import queue
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any, Self, Unpack

import trio

from rmq.protocol.constants import DEFAULT_PRODUCER_GROUP

from . import consumer as _consumer
from . import producer as _producer
from . import pull_consumer as _pull
from . import reader as _reader
from . import transaction as _transaction
from .api import RawPull
from .config import ConsumerOptions, ProducerOptions
from .message import Message, MessageExt, MessageQueue, SendResult
from .portal import Portal, default_portal
from .rebalance import AllocateStrategy, allocate_averagely


class _Facade:
    _obj: Any

    def __init__(self, portal: Portal | None) -> None:
        self._portal = portal or default_portal()

    @property
    def running(self) -> bool:
        return bool(self._obj.running)

    def start(self) -> Self:
        self._portal.call(self._obj.start)
        return self

    def close(self) -> None:
        self._portal.call(self._obj.close)

    def _on_trio_side(self, fn: Callable[[], object]) -> None:
        """A change to a running object happens in its Trio thread (it starts tasks there)."""
        if self._obj.running:
            self._portal.call_sync(fn)
        else:
            fn()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class Producer(_Facade):
    """rmq.client.Producer for blocking code (same arguments)."""

    _wraps: type[_producer.Producer] = _producer.Producer  # the Trio object this facade runs

    def __init__(
        self,
        group: str = DEFAULT_PRODUCER_GROUP,
        namesrv: str | Sequence[str] | None = None,
        *,
        enable_trace: bool = False,
        trace_topic: str | None = None,
        portal: Portal | None = None,
        **options: Unpack[ProducerOptions],
    ) -> None:
        super().__init__(portal)
        self._obj = self._wraps(group, namesrv, enable_trace=enable_trace, trace_topic=trace_topic, **options)

    def send(self, msg: Message, **kwargs: Any) -> SendResult:
        result: SendResult = self._portal.call(lambda: self._obj.send(msg, **kwargs))
        return result

    def send_oneway(self, msg: Message, **kwargs: Any) -> None:
        self._portal.call(lambda: self._obj.send_oneway(msg, **kwargs))

    def send_orderly(self, msg: Message, *args: Any, **kwargs: Any) -> SendResult:
        result: SendResult = self._portal.call(lambda: self._obj.send_orderly(msg, *args, **kwargs))
        return result

    def send_batch(self, msgs: Sequence[Message], **kwargs: Any) -> list[SendResult]:
        return self._portal.call(lambda: self._obj.send_batch(msgs, **kwargs))

    def request(self, msg: Message, **kwargs: Any) -> MessageExt:
        reply: MessageExt = self._portal.call(lambda: self._obj.request(msg, **kwargs))
        return reply

    def reply(self, request: Message, body: bytes | str, **kwargs: Any) -> SendResult:
        result: SendResult = self._portal.call(lambda: self._obj.reply(request, body, **kwargs))
        return result


class TransactionProducer(Producer):
    """rmq.client.TransactionProducer for blocking code (same arguments). The local
    transaction runs in the calling thread, as Java's does (its database session is there);
    `check` runs in the client's thread when the broker asks (keep it short)."""

    _wraps = _transaction.TransactionProducer

    def __init__(
        self,
        group: str = DEFAULT_PRODUCER_GROUP,
        namesrv: str | Sequence[str] | None = None,
        *,
        check: _transaction.CheckListener | None = None,
        enable_trace: bool = False,
        trace_topic: str | None = None,
        portal: Portal | None = None,
        **options: Unpack[ProducerOptions],
    ) -> None:
        super().__init__(group, namesrv, enable_trace=enable_trace, trace_topic=trace_topic, portal=portal, **options)
        self._obj.check = check

    def send_message_in_transaction(
        self, msg: Message, local_transaction: Callable[[Message, Any], _transaction.TransactionState], arg: Any = None
    ) -> _transaction.TransactionSendResult:
        """Half-send `msg`, run `local_transaction(msg, arg)` here, end the transaction."""
        # The Trio side asks this thread to run the local transaction and waits for its
        # answer; this thread serves that one request, then the call's own result.
        inbox: queue.Queue[tuple[str, Any]] = queue.Queue()

        async def local_here(m: Message, a: Any) -> Any:
            token = trio.lowlevel.current_trio_token()
            answered = trio.Event()
            outcome: list[tuple[bool, Any]] = []

            def reply(ok: bool, value: Any) -> None:  # in this (the calling) thread
                outcome.append((ok, value))
                token.run_sync_soon(answered.set)

            inbox.put(("local", (m, a, reply)))
            await answered.wait()
            ok, value = outcome[0]
            if not ok:
                raise value  # the Trio side takes it as UNKNOWN
            return value

        def done(ok: bool, value: Any) -> None:  # in the Trio thread
            inbox.put(("done", (ok, value)))

        self._portal.submit(lambda: self._obj.send_message_in_transaction(msg, local_here, arg), done)
        while True:
            kind, payload = inbox.get()
            if kind == "done":
                ok, value = payload
                if not ok:
                    raise value
                result: _transaction.TransactionSendResult = value
                return result
            m, a, reply = payload
            try:
                state = local_transaction(m, a)
            except Exception as exc:  # noqa: BLE001 - handed to the Trio side
                reply(False, exc)
            else:
                reply(True, state)


class PullConsumer(_Facade):
    """rmq.client.PullConsumer for blocking code: ``consumer.poll()``."""

    def __init__(
        self,
        group: str,
        namesrv: str | Sequence[str] | None = None,
        *,
        auto_commit: bool = True,
        allocate: AllocateStrategy = allocate_averagely,
        portal: Portal | None = None,
        **options: Unpack[ConsumerOptions],
    ) -> None:
        super().__init__(portal)
        self._obj = _pull.PullConsumer(group, namesrv, auto_commit=auto_commit, allocate=allocate, **options)

    def subscribe(self, topic: str, expression: str = "*") -> None:
        self._on_trio_side(lambda: self._obj.subscribe(topic, expression))

    def assign(self, queues: Iterable[MessageQueue]) -> None:
        chosen = list(queues)
        self._on_trio_side(lambda: self._obj.assign(chosen))

    @property
    def assignment(self) -> frozenset[MessageQueue]:
        return frozenset(self._obj.assignment)

    def wait_for_assignment(self, timeout: float | None = None) -> frozenset[MessageQueue]:
        return self._portal.call(lambda: self._obj.wait_for_assignment(timeout))

    def poll(self, timeout: float = 5.0) -> list[MessageExt]:
        return self._portal.call(lambda: self._obj.poll(timeout))

    def seek(self, mq: MessageQueue, offset: int) -> None:
        self._portal.call(lambda: self._obj.seek(mq, offset))

    def commit(self, offsets: Mapping[MessageQueue, int] | None = None) -> None:
        self._portal.call(lambda: self._obj.commit(offsets))


class PushConsumer(_Facade):
    """rmq.client.PushConsumer for blocking code: ``handler(msg)`` runs in the client's
    thread for each message (return None or ConsumeStatus; raising asks for a redelivery)."""

    def __init__(
        self,
        group: str,
        namesrv: str | Sequence[str] | None = None,
        *,
        handler: Callable[[MessageExt], Any],
        orderly: bool = False,
        allocate: AllocateStrategy = allocate_averagely,
        enable_trace: bool = False,
        trace_topic: str | None = None,
        portal: Portal | None = None,
        **options: Unpack[ConsumerOptions],
    ) -> None:
        super().__init__(portal)
        self._obj = _consumer.PushConsumer(
            group,
            namesrv,
            handler=handler,
            orderly=orderly,
            allocate=allocate,
            enable_trace=enable_trace,
            trace_topic=trace_topic,
            **options,
        )

    def subscribe(self, topic: str, expression: str = "*") -> None:
        self._on_trio_side(lambda: self._obj.subscribe(topic, expression))

    def wait_for_assignment(self, timeout: float | None = None) -> frozenset[MessageQueue]:
        return self._portal.call(lambda: self._obj.wait_for_assignment(timeout))


class QueueReader(_Facade):
    """rmq.client.reader.QueueReader for blocking code: exact ranges of queues, raw records."""

    def __init__(
        self,
        namesrv: str | Sequence[str] | None = None,
        *,
        group: str = "rmq-reader",
        timeout: float = 10.0,
        portal: Portal | None = None,
    ) -> None:
        super().__init__(portal)
        self._obj = _reader.QueueReader(namesrv, group=group, timeout=timeout)

    def queues(self, topic: str) -> list[MessageQueue]:
        result: list[MessageQueue] = self._portal.call(lambda: self._obj.queues(topic))
        return result

    def master_addr(self, mq: MessageQueue) -> str:
        return str(self._obj.master_addr(mq))

    def max_offset(self, mq: MessageQueue, addr: str | None = None) -> int:
        return int(self._portal.call(lambda: self._obj.max_offset(mq, addr)))

    def min_offset(self, mq: MessageQueue, addr: str | None = None) -> int:
        return int(self._portal.call(lambda: self._obj.min_offset(mq, addr)))

    def search_offset(self, mq: MessageQueue, timestamp_ms: int, addr: str | None = None) -> int:
        return int(self._portal.call(lambda: self._obj.search_offset(mq, timestamp_ms, addr)))

    def pull(self, mq: MessageQueue, offset: int, max_nums: int = 32, addr: str | None = None) -> RawPull:
        result: RawPull = self._portal.call(lambda: self._obj.pull(mq, offset, max_nums, addr))
        return result


__all__ = ["Producer", "PullConsumer", "PushConsumer", "QueueReader", "TransactionProducer"]
