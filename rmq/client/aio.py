"""The client for asyncio applications: the same producer and consumers, awaited from asyncio.

    import asyncio
    from rmq.client.aio import Producer, PushConsumer
    from rmq.client import Message

    async def main():
        async with Producer("my_group", namesrv="127.0.0.1:9876") as producer:
            print(await producer.send(Message("TopicTest", b"hello")))
        consumer = PushConsumer("my_consumers", namesrv="127.0.0.1:9876")
        consumer.subscribe("TopicTest")
        async with consumer:
            async for msg in consumer:        # asking for the next message acknowledges this one
                print(msg.body)

    asyncio.run(main())

Every object wraps the Trio implementation (rmq.client) and runs it in rmq's background Trio
thread (portal.py): the logic exists once, and the application starts no threads itself.
Arguments, results and errors are those of rmq.client. A handler (or a transaction's local
transaction and check) may be a plain function (it runs in the client's thread: keep it
short) or an ``async def`` coroutine function (it runs on the application's asyncio loop).
Cancelling an awaited call stops the wait, not the request: a send already on the wire may
still be stored.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any, Self, Unpack

import trio

from rmq.protocol.constants import DEFAULT_PRODUCER_GROUP

from . import consumer as _consumer
from . import producer as _producer
from . import pull_consumer as _pull
from . import transaction as _transaction
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

    async def start(self) -> Self:
        await self._portal.acall(self._obj.start)
        return self

    async def close(self) -> None:
        await self._portal.acall(self._obj.close)

    def _on_trio_side(self, fn: Callable[[], object]) -> None:
        """A change to a running object happens in its Trio thread (it starts tasks there);
        it takes effect there soon after this returns."""
        if self._obj.running:
            self._portal.run_sync_soon(fn)
        else:
            fn()

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()


class Producer(_Facade):
    """rmq.client.Producer for asyncio (same arguments)."""

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

    async def send(self, msg: Message, **kwargs: Any) -> SendResult:
        result: SendResult = await self._portal.acall(lambda: self._obj.send(msg, **kwargs))
        return result

    async def send_oneway(self, msg: Message, **kwargs: Any) -> None:
        await self._portal.acall(lambda: self._obj.send_oneway(msg, **kwargs))

    async def send_orderly(self, msg: Message, *args: Any, **kwargs: Any) -> SendResult:
        result: SendResult = await self._portal.acall(lambda: self._obj.send_orderly(msg, *args, **kwargs))
        return result

    async def send_batch(self, msgs: Sequence[Message], **kwargs: Any) -> list[SendResult]:
        return await self._portal.acall(lambda: self._obj.send_batch(msgs, **kwargs))

    async def request(self, msg: Message, **kwargs: Any) -> MessageExt:
        reply: MessageExt = await self._portal.acall(lambda: self._obj.request(msg, **kwargs))
        return reply

    async def reply(self, request: Message, body: bytes | str, **kwargs: Any) -> SendResult:
        result: SendResult = await self._portal.acall(lambda: self._obj.reply(request, body, **kwargs))
        return result


class TransactionProducer(Producer):
    """rmq.client.TransactionProducer for asyncio (same arguments). Build it inside the
    running asyncio loop when `check` is a coroutine function."""

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
        self._obj.check = _bridge_handler(check)

    async def send_message_in_transaction(
        self, msg: Message, local_transaction: _transaction.LocalTransaction, arg: Any = None
    ) -> _transaction.TransactionSendResult:
        """Half-send `msg`, run `local_transaction(msg, arg)` (a coroutine function runs on
        this loop), end the transaction; see rmq.client.TransactionProducer."""
        local = _bridge_handler(local_transaction)
        assert local is not None
        result: _transaction.TransactionSendResult = await self._portal.acall(
            lambda: self._obj.send_message_in_transaction(msg, local, arg)
        )
        return result


def _bridge_handler(handler: Callable[..., Any] | None) -> Callable[..., Any] | None:
    """The Trio-side callback calling the application's: coroutine functions run on the
    application's asyncio loop, captured now (the object is built on that loop)."""
    if handler is None or not inspect.iscoroutinefunction(handler):
        return handler
    loop = asyncio.get_running_loop()

    async def on_trio_side(*args: Any) -> Any:
        future = asyncio.run_coroutine_threadsafe(handler(*args), loop)
        token = trio.lowlevel.current_trio_token()
        finished = trio.Event()
        future.add_done_callback(lambda _: token.run_sync_soon(finished.set))
        await finished.wait()
        return future.result()

    return on_trio_side


class PushConsumer(_Facade):
    """rmq.client.PushConsumer for asyncio: a handler, or ``async for msg in consumer``.
    Build it inside the running asyncio loop when its handler is a coroutine function."""

    def __init__(
        self,
        group: str,
        namesrv: str | Sequence[str] | None = None,
        *,
        handler: Callable[[MessageExt], Any] | None = None,
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
            handler=_bridge_handler(handler),
            orderly=orderly,
            allocate=allocate,
            enable_trace=enable_trace,
            trace_topic=trace_topic,
            **options,
        )

    def subscribe(self, topic: str, expression: str = "*") -> None:
        self._on_trio_side(lambda: self._obj.subscribe(topic, expression))

    @property
    def assignment(self) -> frozenset[MessageQueue]:
        return frozenset(self._obj.assignment)

    async def wait_for_assignment(self, timeout: float | None = None) -> frozenset[MessageQueue]:  # noqa: ASYNC109  public API
        return await self._portal.acall(lambda: self._obj.wait_for_assignment(timeout))

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> MessageExt:
        return await self._portal.acall(self._obj.__anext__)


class PullConsumer(_Facade):
    """rmq.client.PullConsumer for asyncio: ``await consumer.poll()``."""

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

    async def wait_for_assignment(self, timeout: float | None = None) -> frozenset[MessageQueue]:  # noqa: ASYNC109  public API
        return await self._portal.acall(lambda: self._obj.wait_for_assignment(timeout))

    async def poll(self, timeout: float = 5.0) -> list[MessageExt]:  # noqa: ASYNC109  public API
        return await self._portal.acall(lambda: self._obj.poll(timeout))

    async def seek(self, mq: MessageQueue, offset: int) -> None:
        await self._portal.acall(lambda: self._obj.seek(mq, offset))

    async def commit(self, offsets: Mapping[MessageQueue, int] | None = None) -> None:
        await self._portal.acall(lambda: self._obj.commit(offsets))


__all__ = ["Producer", "PullConsumer", "PushConsumer", "TransactionProducer"]
