"""QueueReader: read exact ranges of queues, for tools and data pipelines (Spark's live source).

Unlike the consumers it has no group membership, no rebalancing and no committed offsets: the
caller names a queue and an offset and gets what the master stores there, the records as
stored (``RawPull.body``; decode them with rmq.protocol.message.iter_records). Reading the
same range twice returns the same messages, which is what exactly-once pipelines replay on.

    async with QueueReader(namesrv="127.0.0.1:9876") as reader:
        for mq in await reader.queues("TopicTest"):
            end = await reader.max_offset(mq)
            result = await reader.pull(mq, 0, 32)
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

from rmq.protocol import headers as H
from rmq.protocol.constants import PULL_SUBSCRIPTION

from .api import RawPull
from .config import ClientConfig
from .errors import MQClientError, MQNoRouteError
from .instance import ClientInstance
from .message import MessageQueue
from .service import AsyncService


class QueueReader(AsyncService):
    """Args:
    namesrv: name server addresses; None reads $NAMESRV_ADDR.
    group: the group named in pull requests (nothing is committed for it).
    timeout: seconds per request.
    """

    def __init__(
        self, namesrv: str | Sequence[str] | None = None, *, group: str = "rmq-reader", timeout: float = 10.0
    ) -> None:
        self.group = group
        self.timeout = timeout
        self.instance = ClientInstance(ClientConfig.build(namesrv, {"request_timeout": timeout}))

    @asynccontextmanager
    async def _lifecycle(self) -> AsyncIterator[None]:
        async with self.instance.running():
            yield

    async def queues(self, topic: str) -> list[MessageQueue]:
        """The readable queues of `topic` on brokers that have a master, sorted.

        Raises MQNoRouteError when the topic has no route (or no name server answers).
        """
        route = await self.instance.update_route(topic, self.timeout)
        if route is None:
            raise MQNoRouteError(topic, self.instance.namesrv)
        return sorted(mq for mq in route.subscribe_queues(topic) if self.instance.master_addr(mq.broker_name))

    def master_addr(self, mq: MessageQueue) -> str:
        """The address of the queue's master, as the last route said.

        Raises MQClientError when its broker has no master (or its route was never fetched).
        """
        addr = self.instance.master_addr(mq.broker_name)
        if addr is None:
            raise MQClientError(f"the broker {mq.broker_name} has no master now")
        return addr

    # Each call below goes to `addr` when given (a caller that planned its reads elsewhere,
    # e.g. on a Spark driver), else to the queue's master by the last route fetched.

    async def max_offset(self, mq: MessageQueue, addr: str | None = None) -> int:
        """The offset the queue's next message will get."""
        return await self.instance.api.get_max_offset(addr or self.master_addr(mq), mq, self.timeout)

    async def min_offset(self, mq: MessageQueue, addr: str | None = None) -> int:
        return await self.instance.api.get_min_offset(addr or self.master_addr(mq), mq, self.timeout)

    async def search_offset(self, mq: MessageQueue, timestamp_ms: int, addr: str | None = None) -> int:
        """The queue offset nearest to a store time."""
        return await self.instance.api.search_offset(addr or self.master_addr(mq), mq, timestamp_ms, self.timeout)

    async def pull(self, mq: MessageQueue, offset: int, max_nums: int = 32, addr: str | None = None) -> RawPull:
        """One PULL_MESSAGE at `offset` without waiting for new messages."""
        header = H.PullMessageRequestHeader(
            consumer_group=self.group,
            topic=mq.topic,
            queue_id=mq.queue_id,
            queue_offset=offset,
            max_msg_nums=max_nums,
            sys_flag=PULL_SUBSCRIPTION,
            commit_offset=0,
            suspend_timeout_millis=0,
            subscription="*",
            expression_type="TAG",
        )
        return await self.instance.api.pull_raw(addr or self.master_addr(mq), header, self.timeout)

    def __repr__(self) -> str:
        return f"<QueueReader {self.instance.client_id}>"
