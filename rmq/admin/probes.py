"""Send probes: round trips of small messages to a broker's topic, a topic, or every master
(mqadmin's sendMsgStatus, checkMsgSendRT and clusterRT). The caller opens the producer
(messages.admin_producer) and reports each probe as it ends."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from rmq.client import Message, MQClientError, Producer, SendResult


def random_body(size: int) -> bytes:
    """`size` bytes of random hex text, as sendMsgStatus sends."""
    return os.urandom(size // 2 + 1).hex()[:size].encode()


async def timed_send(producer: Producer, msg: Message) -> tuple[float, SendResult]:
    """(seconds it took, result) of one send; a failure is raised."""
    begin = time.monotonic()
    result = await producer.send(msg)
    return time.monotonic() - begin, result


async def try_send(producer: Producer, msg: Message) -> tuple[float, SendResult | None]:
    """(seconds it took, result, None when it failed) of one send."""
    begin = time.monotonic()
    try:
        result: SendResult | None = await producer.send(msg)
    except MQClientError:
        result = None
    return time.monotonic() - begin, result


@dataclass
class BrokerRT:
    """`amount` sends to one master's topic: how many succeeded and failed, and their time."""

    ok: int = 0
    failed: int = 0
    seconds: float = 0.0  # spent on the sends that succeeded

    @property
    def rt_ms(self) -> float:
        return self.seconds * 1000 / self.ok if self.ok else 0.0


async def broker_rt(producer: Producer, broker_name: str, body: bytes, amount: int) -> BrokerRT:
    """Send `amount` messages to the topic named after a broker (each master serves one)."""
    rt = BrokerRT()
    for _ in range(amount):
        begin = time.monotonic()
        try:
            await producer.send(Message(broker_name, body))
            rt.ok += 1
            rt.seconds += time.monotonic() - begin
        except MQClientError:
            rt.failed += 1
    return rt
