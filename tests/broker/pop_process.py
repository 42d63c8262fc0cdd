"""POP against a broker process that tests kill with SIGKILL (tests/broker/test_pop_process.py).

    async with pop_broker(tmp_path, flush="SYNC_FLUSH") as pb:
        await pb.send_many(40)                # numbered bodies, spread over the queues
        got = await pb.pop_all(40, invisible_ms=3000)
        await pb.kill_and_restart()           # SIGKILL, then the same store again
        back = await pb.pop_until(...)

Requests are raw remoting commands (as tests/broker/test_pop.py sends them) over one
RemotingClient; the broker is `python -m rmq broker` (tests/broker/ha/procs.py), the name
server runs in the test's process. Every wait is bounded."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import trio

from rmq.client import MQAdmin
from rmq.protocol import RemotingCommand, RequestCode, ResponseCode
from rmq.protocol.bodies.configs import TopicConfig
from rmq.protocol.message import MessageExt, iter_records
from rmq.protocol.pop import (
    AckMessageRequestHeader,
    ExtraInfo,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
    real_topic,
    receipt_handles,
)
from rmq.remoting import RemotingClient, RemotingError

from .cluster import loopback_namesrv
from .ha.procs import BrokerProcess
from .test_send_pull import send_ext

TOPIC = "PopKill"
GROUP = "PopKillGroup"
BROKER = "broker-pop"
QUEUES = 4
CALL_TIMEOUT = 10.0


def number(msg: MessageExt) -> int:
    """The number a message was sent with (its body is b"m<n>")."""
    return int(msg.body[1:])


@dataclass
class Delivery:
    """One popped message and its receipt handle."""

    msg: MessageExt
    handle: ExtraInfo

    @property
    def n(self) -> int:
        return number(self.msg)


@dataclass
class PopBroker:
    proc: BrokerProcess
    client: RemotingClient
    kills: int = 0
    sent: list[int] = field(default_factory=list)

    @property
    def address(self) -> str:
        return self.proc.address

    async def call(self, code: int, ext: dict[str, str] | None = None, body: bytes = b"") -> RemotingCommand:
        request = RemotingCommand.request(code, ext, body)
        return await self.client.invoke(self.address, request, CALL_TIMEOUT)

    async def create_topic(self, topic: str = TOPIC, queues: int = QUEUES) -> None:
        async with MQAdmin(timeout=CALL_TIMEOUT, remoting=self.client) as admin:  # on disk when answered
            await admin.create_topic(self.address, TopicConfig(topic, queues, queues))

    async def send(self, n: int, queue_id: int) -> None:
        ext = send_ext(topic=TOPIC, queue_id=queue_id, props={"TAGS": "TagA", "WAIT": "true"})
        r = await self.call(RequestCode.SEND_MESSAGE, ext, b"m%d" % n)
        assert r.code == ResponseCode.SUCCESS, r.remark
        self.sent.append(n)

    async def send_many(self, count: int) -> list[int]:
        start = len(self.sent)
        for n in range(start, start + count):
            await self.send(n, n % QUEUES)
        return list(range(start, start + count))

    async def pop(self, *, n: int = 32, invisible_ms: int, poll_ms: int = 0) -> list[Delivery]:
        born = int(time.time() * 1000)
        header = PopMessageRequestHeader(GROUP, TOPIC, -1, n, invisible_ms, poll_ms, born, 0)
        request = RemotingCommand.request(RequestCode.POP_MESSAGE, header.to_ext())
        r = await self.client.invoke(self.address, request, poll_ms / 1000 + CALL_TIMEOUT)
        if r.code != ResponseCode.SUCCESS:
            assert r.code == ResponseCode.POLLING_TIMEOUT, (r.code, r.remark)
            return []
        answer = PopMessageResponseHeader.from_ext(r.ext_fields)
        messages = list(iter_records(r.body))
        handles = receipt_handles(answer, messages, BROKER, GROUP)
        return [Delivery(m, h) for m, h in zip(messages, handles, strict=True)]

    async def pop_all(self, count: int, *, invisible_ms: int, seconds: float = 20) -> list[Delivery]:
        """Pops until `count` messages came (fails after `seconds`)."""
        got: list[Delivery] = []
        with trio.fail_after(seconds):
            while len(got) < count:
                got += await self.pop(invisible_ms=invisible_ms, poll_ms=500)
        return got

    async def pop_for(self, seconds: float, *, invisible_ms: int, until: set[int] | None = None) -> list[Delivery]:
        """Everything popped within `seconds` (or until every number in `until` came)."""
        got: list[Delivery] = []
        with trio.move_on_after(seconds):
            while until is None or not until <= {d.n for d in got}:
                got += await self.pop(invisible_ms=invisible_ms, poll_ms=500)
        return got

    async def ack(self, d: Delivery) -> RemotingCommand:
        topic = real_topic(d.msg.topic, GROUP, d.handle.retry)  # a retry message is acked on its retry topic
        header = AckMessageRequestHeader(GROUP, topic, d.handle.queue_id, d.handle.encode(), d.handle.queue_offset)
        return await self.call(RequestCode.ACK_MESSAGE, header.to_ext())

    async def ack_all(self, deliveries: list[Delivery]) -> None:
        for d in deliveries:
            r = await self.ack(d)
            assert r.code == ResponseCode.SUCCESS, r.remark

    async def max_offset(self, topic: str, queue_id: int = 0) -> int | None:
        """GET_MAX_OFFSET; None when the broker does not answer or knows no such queue."""
        request = RemotingCommand.request(RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": str(queue_id)})
        try:
            r = await self.client.invoke(self.address, request, 1.0)
        except (RemotingError, trio.TooSlowError):
            return None
        if r.code != ResponseCode.SUCCESS:
            return None
        return int(r.ext_fields["offset"])

    async def kill(self) -> None:
        await trio.to_thread.run_sync(self.proc.kill)
        self.kills += 1

    async def restart(self) -> None:
        await trio.to_thread.run_sync(self.proc.start)

    async def kill_and_restart(self) -> None:
        await self.kill()
        await self.restart()

    def log(self) -> str:
        return self.proc.log()


@contextlib.asynccontextmanager
async def pop_broker(root: Path, *, flush: str, **conf: str) -> AsyncIterator[PopBroker]:
    """A name server here, a broker process with `TOPIC` created; stopped (SIGTERM) at the end."""
    async with loopback_namesrv() as ns, RemotingClient() as client:
        proc = BrokerProcess(root / "store", ns.address, BROKER, flush=flush, **conf)
        await trio.to_thread.run_sync(proc.start)
        try:
            pb = PopBroker(proc, client)
            await pb.create_topic()
            yield pb
        finally:
            await trio.to_thread.run_sync(proc.stop)
