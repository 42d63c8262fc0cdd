"""What a client instance and its members (producers, consumers) know of each other.

A ClientInstance (instance.py) holds the connections, routes and broker addresses its members
share. Members call it (`Instance`; the offset store only `BrokerAccess`), and it calls them
back with routes and the requests brokers send to clients (`Member`, `ConsumerMember`). Both
sides are Protocols: instance.py never imports a producer or consumer module, and those type
the instance by what they use of it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol, TypeVar

import trio

from rmq.protocol.bodies.heartbeat import ConsumerData
from rmq.protocol.constants import MASTER_ID
from rmq.protocol.message import MessageExt
from rmq.remoting import Dispatcher

from .api import ClientAPI
from .message import MessageQueue
from .route import BrokerData, TopicRoute

T = TypeVar("T")


class Member(Protocol):
    """A producer or consumer using the instance."""

    def route_topics(self) -> Iterable[str]:
        """Topics whose routes the refresh loop should keep current."""
        ...

    def on_route(self, topic: str, route: TopicRoute) -> None:
        """A route was fetched (changed or not)."""
        ...


class ConsumerMember(Member, Protocol):
    group: str

    def consumer_data(self) -> ConsumerData:
        """ConsumerData for heartbeats (PROTOCOL.md 4.2)."""
        ...

    def on_ids_changed(self) -> None:
        """The broker says the group's members changed: rebalance soon."""
        ...

    def reset_offsets(self, topic: str, offsets: dict[MessageQueue, int]) -> None:
        """An admin reset the group's offsets of `topic`."""
        ...

    def running_info(self, namesrv: Sequence[str]) -> dict[str, Any]:
        """ConsumerRunningInfo, the answer to GET_CONSUMER_RUNNING_INFO."""
        ...

    async def consume_directly(self, msg: MessageExt) -> dict[str, Any] | None:
        """Run the handler on `msg`: a ConsumeMessageDirectlyResult; None when this consumer has
        no handler to run (only push consumers have one)."""
        ...


class BrokerAccess(Protocol):
    """The instance as a caller of brokers sees it: the API, and which address to call."""

    @property
    def api(self) -> ClientAPI: ...

    def master_addr(self, broker_name: str) -> str | None: ...

    def read_addr(self, broker_name: str, broker_id: int = MASTER_ID) -> str | None: ...

    def reachable(self, addr: str) -> bool: ...

    def unreachable(self, addr: str) -> None: ...

    async def route_failed(self, topic: str) -> None: ...

    async def read_call(
        self, topic: str, broker_name: str, call: Callable[[str], Awaitable[T]], broker_id: int = MASTER_ID
    ) -> T: ...


class Instance(BrokerAccess, Protocol):
    """The instance as producers and consumers use it (ClientInstance)."""

    ip: str
    client_id: str
    namesrv: tuple[str, ...]
    routes: dict[str, TopicRoute]
    brokers: dict[str, BrokerData]  # broker name → its addresses, over all routes
    refreshes: dict[str, trio.Event]
    dispatcher: Dispatcher

    @property
    def running_now(self) -> bool: ...

    def running(self) -> AbstractAsyncContextManager[trio.Nursery]: ...

    def add_producer(self, group: str, member: Member) -> None: ...

    def add_consumer(self, member: ConsumerMember) -> None: ...

    def remove(self, member: Member, producer_group: str | None = None) -> bool: ...

    async def fetch_route(self, topic: str, timeout: float | None = None) -> TopicRoute | None: ...  # noqa: ASYNC109  as ClientInstance

    async def update_route(self, topic: str, timeout: float | None = None) -> TopicRoute | None: ...  # noqa: ASYNC109  as ClientInstance

    def store_route(self, topic: str, route: TopicRoute) -> None: ...

    def refresh_route_soon(self, topic: str) -> trio.Event: ...

    def heartbeat_soon(self) -> None: ...

    async def send_heartbeat(self) -> None: ...

    async def unregister(self, producer_group: str | None, consumer_group: str | None) -> None: ...
