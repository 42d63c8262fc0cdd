"""ClientInstance: what one producer or consumer shares with the cluster (MQClientInstance).

It owns the RemotingClient (one connection per address), the route table filled from
the name servers, the broker address table derived from it, and two loops in its
nursery:

* route refresh every `poll_name_server_interval` (30 s) for every topic a member uses;
* heartbeat every `heartbeat_broker_interval` (30 s) to every broker: producer groups go
  to masters only, consumer data (groups, subscriptions) to every broker.

Name servers are asked one at a time, starting at a random one; a name server that
fails is skipped and the next one becomes the preferred one (RocketMQ rotates the same
way). Members (a producer, a push or pull consumer) register themselves and are told
about route changes; consumers also receive the requests brokers send to clients
(NOTIFY_CONSUMER_IDS_CHANGED, RESET_CONSUMER_CLIENT_OFFSET, GET_CONSUMER_RUNNING_INFO).

Master/slave groups: sends and commits go to a group's master only; pulls and offset
reads go where the broker suggested (`read_addr`), else to the master, else to a slave.
An address that refuses a connection or does not answer is avoided for reads for
UNREACHABLE_FOR seconds (a dead master stays in the name server's route until its
connection closes or it expires), and a failed pull refreshes the topic's route at once
(`route_failed`, at most once a second per topic) instead of at the next 30 s poll.

Such a refresh runs in the instance's nursery (`refresh_route_soon`), not in the task that
asked for it: a send whose deadline has passed when its broker times out still gets the
route fetched for the next send, rather than a refresh cancelled at its first await that
used up the once-a-second slot all the same.
"""

from __future__ import annotations

import logging
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TypeVar

import trio

from rmq.protocol import ProtocolError, RemotingCommand, RequestCode, ResponseCode
from rmq.protocol import body as B
from rmq.protocol import headers as H
from rmq.protocol.bodies.heartbeat import HeartbeatData, ProducerData
from rmq.protocol.bodies.offsets import ResetOffsetBody
from rmq.protocol.constants import MASTER_ID
from rmq.protocol.message import decompress_body, iter_records
from rmq.remoting import ClientConfig as RemotingConfig
from rmq.remoting import Dispatcher, RemotingClient, RequestContext, busypoll

from .api import ClientAPI
from .config import ClientConfig, tls_context
from .errors import MQClientError, MQClientStateError, MQConnectError, MQNoRouteError, MQTimeoutError, is_retriable
from .ids import client_id, default_instance_name, local_ip
from .members import ConsumerMember, Member
from .route import BrokerData, TopicRoute, brokers_of

log = logging.getLogger("rmq.client.instance")

T = TypeVar("T")

UNREGISTER_TIMEOUT = 3.0
ROUTE_RETRY_INTERVAL = 1.0  # seconds between route refreshes a failing topic may cause
# seconds an address that refused a connection (or did not answer) is passed over for reads
# when its group has another broker: a dead master can stay in the route for up to the name
# server's 120 s broker expiry
UNREACHABLE_FOR = 5.0


class ClientInstance:
    """See the module docstring. Enter `running()` before use."""

    def __init__(self, config: ClientConfig) -> None:
        self.config = config
        self.ip = config.client_ip or local_ip()
        self.instance_name = config.instance_name or default_instance_name()
        self.client_id = client_id(self.ip, self.instance_name, config.unit_name)
        self.namesrv = config.namesrv
        self.ssl_context = tls_context(config.tls)  # None: plain TCP; MQClientError for a bad certificate
        self.routes: dict[str, TopicRoute] = {}
        self.brokers: dict[str, BrokerData] = {}
        self._route_retried: dict[str, float] = {}  # topic → when its last refresh after a failure began
        self.refreshes: dict[str, trio.Event] = {}  # topic → set when its refresh under way ends
        self._nursery: trio.Nursery | None = None
        self._unreachable: dict[str, float] = {}  # address → until when reads avoid it
        self.broker_versions: dict[str, int] = {}
        self._ns_index = random.randrange(len(self.namesrv)) if self.namesrv else 0
        self._members: list[Member] = []
        self._producer_groups: dict[str, int] = {}  # group → producers using it
        self._consumers: dict[str, ConsumerMember] = {}
        self._api: ClientAPI | None = None
        self._heartbeat_lock = trio.Lock()
        self._heartbeat_wanted = trio.Event()
        self.dispatcher = Dispatcher()
        self.dispatcher.register(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, self._notify_ids_changed)
        self.dispatcher.register(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, self._reset_offset)
        self.dispatcher.register(RequestCode.GET_CONSUMER_RUNNING_INFO, self._running_info)
        self.dispatcher.register(RequestCode.CONSUME_MESSAGE_DIRECTLY, self._consume_directly)

    def __repr__(self) -> str:
        return f"<ClientInstance {self.client_id}>"

    @property
    def api(self) -> ClientAPI:
        if self._api is None:
            raise MQClientStateError("the client is not running: use it in `async with`")
        return self._api

    @property
    def running_now(self) -> bool:
        return self._api is not None

    @asynccontextmanager
    async def running(self) -> AsyncIterator[trio.Nursery]:
        """Connections and the refresh and heartbeat loops; yields the instance's nursery.

        On exit the loops stop and every connection closes.
        """
        if self.config.busy_poll_micros:
            busypoll.install(self.config.busy_poll_micros)
        remoting_config = RemotingConfig(
            connect_timeout=min(3.0, self.config.request_timeout),
            tls=self.ssl_context is not None,
            ssl_context=self.ssl_context,
        )
        async with RemotingClient(remoting_config, self.dispatcher) as remoting:
            self._api = ClientAPI(remoting, timeout=self.config.request_timeout, credentials=self.config.credentials)
            try:
                async with trio.open_nursery() as nursery:
                    self._nursery = nursery
                    nursery.start_soon(self._route_loop)
                    nursery.start_soon(self._heartbeat_loop)
                    try:
                        yield nursery
                    finally:
                        self._nursery = None
                        nursery.cancel_scope.cancel()
            finally:
                self._api = None

    # -- members ------------------------------------------------------------------------

    def add_producer(self, group: str, member: Member) -> None:
        self._producer_groups[group] = self._producer_groups.get(group, 0) + 1
        self._members.append(member)

    def add_consumer(self, member: ConsumerMember) -> None:
        if member.group in self._consumers:
            raise MQClientError(f"consumer group {member.group!r} is already registered in {self.client_id}")
        self._consumers[member.group] = member
        self._members.append(member)

    def remove(self, member: Member, producer_group: str | None = None) -> bool:
        """Forget `member`; returns True when it was the last user of `producer_group`."""
        if member in self._members:
            self._members.remove(member)
        for group, consumer in list(self._consumers.items()):
            if consumer is member:
                del self._consumers[group]
        if producer_group is None or producer_group not in self._producer_groups:
            return False
        self._producer_groups[producer_group] -= 1
        if self._producer_groups[producer_group] > 0:
            return False
        del self._producer_groups[producer_group]
        return True

    # -- routes -------------------------------------------------------------------------

    async def fetch_route(self, topic: str, timeout: float | None = None) -> TopicRoute | None:  # noqa: ASYNC109  the request's deadline, see api.py
        """The route of `topic` from the name servers (None: it has none).

        Raises MQNoRouteError when no name server answered.
        """
        n = len(self.namesrv)
        errors = []
        for i in range(n):
            index = (self._ns_index + i) % n
            addr = self.namesrv[index]
            try:
                route = await self.api.get_route(addr, topic, timeout)
            except MQClientError as exc:
                errors.append(str(exc))
                continue
            self._ns_index = index
            return route
        raise MQNoRouteError(topic, self.namesrv, "; ".join(errors))

    async def update_route(self, topic: str, timeout: float | None = None) -> TopicRoute | None:  # noqa: ASYNC109  the request's deadline, see api.py
        """Fetch and store the route of `topic`; None (and nothing stored) when it has none."""
        route = await self.fetch_route(topic, timeout)
        if route is not None:
            self.store_route(topic, route)
        return route

    def store_route(self, topic: str, route: TopicRoute) -> None:
        """Remember `route` for `topic`, refresh broker addresses, tell the members.

        A group's addresses come from the route fetched last (as MQClientInstance's
        brokerAddrTable): a master that died or came back at another address is seen at
        the first refresh of any of its topics, not only of the one listed last.
        """
        self.routes.pop(topic, None)  # to the end: brokers_of lets later routes win
        self.routes[topic] = route
        brokers = brokers_of(self.routes.values())
        if brokers != self.brokers:
            self.brokers = brokers
            self._heartbeat_wanted.set()  # new brokers hear from us at once, not in 30 s
        for member in list(self._members):
            member.on_route(topic, route)

    def master_addr(self, broker_name: str) -> str | None:
        bd = self.brokers.get(broker_name)
        return bd.master_addr if bd is not None else None

    async def route_failed(self, topic: str) -> None:
        """A call to a broker of `topic` failed: fetch its route again now (see
        `refresh_route_soon`) and wait for that refresh. Cancelling the wait leaves the
        refresh running."""
        await self.refresh_route_soon(topic).wait()

    async def broker_call(self, topic: str, work: Awaitable[T]) -> T:
        """Await a call to a broker of `topic`; one that fails retriably (the master died or
        hangs: a failover) fetches the route again before it raises (`route_failed`), so that
        the caller's next call reaches the new master rather than the cached route's dead one."""
        try:
            return await work
        except MQClientError as exc:
            if is_retriable(exc):
                await self.route_failed(topic)
            raise

    def refresh_route_soon(self, topic: str) -> trio.Event:
        """Fetch the route of `topic` in the instance's nursery, at most once per
        ROUTE_RETRY_INTERVAL, so that a dead or hung master's queues move to its slave (or a
        new master) without waiting for the 30 s poll. Returns an event set when the refresh
        started now, or the one already under way, has ended (changed routes are stored and
        the members told by then); an event already set when none runs (one began less than
        ROUTE_RETRY_INTERVAL ago, or the instance is not running).

        The refresh is bounded by the request timeout per name server, not by the caller's
        deadline: the slot it takes is never spent on a refresh that was cancelled.
        """
        refresh = self.refreshes.get(topic)
        if refresh is not None:
            return refresh
        refresh = trio.Event()
        now = trio.current_time()
        if self._nursery is None or now - self._route_retried.get(topic, -ROUTE_RETRY_INTERVAL) < ROUTE_RETRY_INTERVAL:
            refresh.set()
            return refresh
        self._route_retried[topic] = now
        self.refreshes[topic] = refresh
        self._nursery.start_soon(self._refresh_route, topic, refresh)
        return refresh

    async def _refresh_route(self, topic: str, done: trio.Event) -> None:
        try:
            await self.update_route(topic)
        except MQClientError as exc:
            log.info("route refresh of %s after a failure failed: %s", topic, exc)
        finally:
            del self.refreshes[topic]
            done.set()

    def broker_addr(self, broker_name: str, broker_id: int = MASTER_ID) -> str | None:
        """Address of `broker_id` of `broker_name`, else its master, else any of its brokers."""
        bd = self.brokers.get(broker_name)
        if bd is None:
            return None
        return bd.addrs.get(broker_id) or bd.any_addr()

    def unreachable(self, addr: str) -> None:
        """`addr` refused a connection or did not answer: reads go to another broker of its
        group (`read_addr`) for the next UNREACHABLE_FOR seconds."""
        self._unreachable[addr] = trio.current_time() + UNREACHABLE_FOR

    def reachable(self, addr: str) -> bool:
        """False while `addr` is avoided after a failure (see `unreachable`)."""
        until = self._unreachable.get(addr)
        if until is None:
            return True
        if trio.current_time() < until:
            return False
        del self._unreachable[addr]
        return True

    def read_addr(self, broker_name: str, broker_id: int = MASTER_ID) -> str | None:
        """Where to pull or read offsets of `broker_name` (findBrokerAddressInSubscribe):
        `broker_id` (the broker's suggestion), else the master, else a slave, skipping
        addresses that just failed while the group has another; None: no such group."""
        bd = self.brokers.get(broker_name)
        if bd is None or not bd.addrs:
            return None
        order = [broker_id, MASTER_ID, *sorted(bd.addrs)]
        candidates = [bd.addrs[bid] for bid in dict.fromkeys(order) if bid in bd.addrs]
        for addr in candidates:
            if self.reachable(addr):
                return addr
        return candidates[0]

    async def read_call(
        self, topic: str, broker_name: str, call: Callable[[str], Awaitable[T]], broker_id: int = MASTER_ID
    ) -> T:
        """`call(addr)` on the broker of `broker_name` that `read_addr` picks, for requests a
        slave answers as well as its master (offsets, queue bounds). The route of `topic` is
        fetched if the group is unknown. An address that refuses the connection or does not
        answer is marked unreachable and the call is made once more on another broker of the
        group, if it has one. Raises MQClientError."""
        addr = self.read_addr(broker_name, broker_id)
        if addr is None:
            await self.update_route(topic)
            addr = self.read_addr(broker_name, broker_id)
        if addr is None:
            raise MQClientError(f"the broker {broker_name} does not exist")
        try:
            return await call(addr)
        except (MQConnectError, MQTimeoutError):
            self.unreachable(addr)
            other = self.read_addr(broker_name, broker_id)
            if other is None or other == addr:
                raise
        try:
            return await call(other)
        except (MQConnectError, MQTimeoutError):
            self.unreachable(other)
            raise

    async def _route_loop(self) -> None:
        while True:
            await trio.sleep(self.config.poll_name_server_interval)
            topics = {t for m in list(self._members) for t in m.route_topics()}
            for topic in sorted(topics):
                try:
                    await self.update_route(topic)
                except MQClientError as exc:
                    log.warning("route refresh of %s failed: %s", topic, exc)

    # -- heartbeats ---------------------------------------------------------------------

    def heartbeat_data(self) -> HeartbeatData:
        consumers = tuple(c.consumer_data() for c in self._consumers.values())
        producers = tuple(ProducerData(g) for g in sorted(self._producer_groups))
        return HeartbeatData(self.client_id, consumers, producers)

    async def send_heartbeat(self) -> None:
        """HEART_BEAT to every known broker (masters only when there is no consumer)."""
        if not self._producer_groups and not self._consumers:
            return
        async with self._heartbeat_lock:
            data = self.heartbeat_data()
            only_masters = not self._consumers
            targets = [
                addr
                for bd in self.brokers.values()
                for bid, addr in sorted(bd.addrs.items())
                if not (only_masters and bid != MASTER_ID)
            ]
            for addr in targets:
                try:
                    self.broker_versions[addr] = await self.api.heartbeat(addr, data)
                except MQClientError as exc:
                    log.info("heartbeat to %s failed: %s", addr, exc)

    def heartbeat_soon(self) -> None:
        """Ask the heartbeat loop to send now (members changed, brokers appeared)."""
        self._heartbeat_wanted.set()

    async def _heartbeat_loop(self) -> None:
        while True:
            with trio.move_on_after(self.config.heartbeat_broker_interval):
                await self._heartbeat_wanted.wait()
            self._heartbeat_wanted = trio.Event()
            await self.send_heartbeat()

    async def unregister(self, producer_group: str | None, consumer_group: str | None) -> None:
        """UNREGISTER_CLIENT to every known broker; failures are logged, not raised.

        Runs shielded from cancellation with its own time limit, so it also works while
        the caller is being cancelled.
        """
        if self._api is None:
            return
        addrs = sorted({a for bd in self.brokers.values() for a in bd.addrs.values()})
        with trio.CancelScope(shield=True), trio.move_on_after(UNREGISTER_TIMEOUT):
            for addr in addrs:
                try:
                    await self.api.unregister_client(
                        addr, self.client_id, producer_group, consumer_group, UNREGISTER_TIMEOUT
                    )
                except MQClientError as exc:
                    log.info("unregister from %s failed: %s", addr, exc)

    # -- requests from brokers ----------------------------------------------------------

    async def _notify_ids_changed(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        group = request.ext_fields.get("consumerGroup", "")
        consumer = self._consumers.get(group)
        if consumer is not None:
            log.info("consumer ids of group %s changed (notified by %s)", group, ctx.remote_address)
            consumer.on_ids_changed()
        return None

    async def _reset_offset(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        header = H.ResetOffsetRequestHeader.from_ext(request.ext_fields)
        consumer = self._consumers.get(header.group)
        if consumer is None or not request.body:
            return None
        offsets = ResetOffsetBody.from_json(B.loads(request.body)).offset_table
        consumer.reset_offsets(header.topic, dict(offsets))
        return None

    async def _running_info(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        header = H.GetConsumerRunningInfoRequestHeader.from_ext(request.ext_fields)
        consumer = self._consumers.get(header.consumer_group)
        if consumer is None:
            return request.make_response(
                ResponseCode.SYSTEM_ERROR, f"The Consumer Group <{header.consumer_group}> not exist in this consumer"
            )
        return request.make_response(body=B.dumps(consumer.running_info(self.namesrv)))

    async def _consume_directly(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        header = H.ConsumeMessageDirectlyRequestHeader.from_ext(request.ext_fields)
        consumer = self._consumers.get(header.consumer_group)
        missing = f"The Consumer Group <{header.consumer_group}> not exist in this consumer"
        if consumer is None:
            return request.make_response(ResponseCode.SYSTEM_ERROR, missing)
        try:
            msg = next(iter_records(request.body))
        except (ProtocolError, StopIteration) as exc:
            return request.make_response(ResponseCode.SYSTEM_ERROR, f"bad message in the request body: {exc!r}")
        msg.body = decompress_body(msg.body, msg.sys_flag)
        result = await consumer.consume_directly(msg)
        if result is None:  # a consumer with no handler (pull consumers, the proxy's groups), as Java
            return request.make_response(ResponseCode.SYSTEM_ERROR, missing)
        return request.make_response(body=B.dumps(result))
