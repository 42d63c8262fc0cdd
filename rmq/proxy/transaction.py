"""Transactions through the proxy, as Java's TransactionService in cluster mode.

A 5.x client's EndTransaction names only the topic, message id and transaction id, so the
proxy remembers where each half message went (broker, tranStateTableOffset, CommitLog
offset) from the send answer, and from each check the broker sends, for
`transactionDataExpireMillis`. The producer group of a message sent through the proxy is
its topic (Java's choice, so that a check finds the producers of the topic).

The broker asks a transaction's producer group (CHECK_TRANSACTION_STATE to a connection
that heartbeated as a producer of it): the proxy heartbeats as a producer of every group a
connected client publishes to, and passes each check down the Telemetry stream of one of
the group's clients as a RecoverOrphanedTransactionCommand. The client's checker answers
with EndTransaction (source SERVER_CHECK), which goes to the broker like any other.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Iterable
from dataclasses import dataclass

from rmq.client.instance import ClientInstance
from rmq.client.route import TopicRoute
from rmq.protocol import RemotingCommand, RequestCode
from rmq.protocol import properties as P
from rmq.protocol.errors import ProtocolError
from rmq.protocol.headers import CheckTransactionStateRequestHeader, EndTransactionRequestHeader
from rmq.protocol.message import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    decode_record,
    parse_offset_msg_id,
)
from rmq.remoting import RequestContext

from .channels import Channels
from .convert import Code, ProxyError, received
from .v2 import definition_pb2 as d
from .v2 import service_pb2 as s

log = logging.getLogger("rmq.proxy.transaction")

END_TIMEOUT = 3.0  # seconds to queue an END_TRANSACTION (oneway, as Java)


@dataclass(frozen=True, slots=True)
class TransactionData:
    broker_name: str
    tran_state_table_offset: int
    commit_log_offset: int
    expires: float  # time.monotonic()


class _GroupMember:
    """The proxy's ClientInstance member for one producer group: it keeps the topic's
    route fresh and makes the instance heartbeat the group to the brokers."""

    def __init__(self, topic: str) -> None:
        self.topic = topic

    def route_topics(self) -> Iterable[str]:
        return (self.topic,)

    def on_route(self, topic: str, route: TopicRoute) -> None:
        pass


class Transactions:
    """Transaction data by (group, transaction id) and the clients of each producer group."""

    def __init__(self, instance: ClientInstance, expire_ms: int, channels: Channels) -> None:
        self.instance = instance
        self.expire = expire_ms / 1000
        self.channels = channels  # where each client's Telemetry commands go
        self.data: dict[tuple[str, str], TransactionData] = {}
        self.clients: dict[str, set[str]] = {}  # group → the ids of its producers
        self._members: dict[str, _GroupMember] = {}
        instance.dispatcher.register(RequestCode.CHECK_TRANSACTION_STATE, self._check)

    # -- producer groups --------------------------------------------------------------------

    def add_client(self, client_id: str, topics: Iterable[str]) -> None:
        """A producer's Telemetry named its topics: serve their groups' checks to it."""
        for group in topics:
            self.clients.setdefault(group, set()).add(client_id)
            if group not in self._members:
                member = self._members[group] = _GroupMember(group)
                self.instance.add_producer(group, member)
                self.instance.heartbeat_soon()

    def remove_client(self, client_id: str) -> None:
        for group in list(self.clients):
            self.clients[group].discard(client_id)
            if not self.clients[group]:
                del self.clients[group]
                self.instance.remove(self._members.pop(group), group)

    # -- transaction data -------------------------------------------------------------------

    def add(self, group: str, transaction_id: str, broker_name: str, queue_offset: int, commit_log_offset: int) -> None:
        now = time.monotonic()
        # entries are in the order they expire (each lives `expire` seconds): drop from the front
        while self.data:
            key, first = next(iter(self.data.items()))
            if first.expires > now:
                break
            del self.data[key]
        self.data.pop((group, transaction_id), None)  # a check's entry goes to the end
        self.data[group, transaction_id] = TransactionData(
            broker_name, queue_offset, commit_log_offset, now + self.expire
        )

    def add_sent(
        self, group: str, transaction_id: str, broker_name: str, queue_offset: int, offset_msg_id: str
    ) -> None:
        try:
            _, _, commit_log_offset = parse_offset_msg_id(offset_msg_id)
        except (ProtocolError, ValueError):
            log.warning("half message %s: bad offset message id %r", transaction_id, offset_msg_id)
            return
        self.add(group, transaction_id, broker_name, queue_offset, commit_log_offset)

    async def end(self, request: s.EndTransactionRequest) -> None:
        """END_TRANSACTION to the broker holding the half message (EndTransactionActivity)."""
        group = request.topic.name
        if not request.transaction_id:
            raise ProxyError(Code.INVALID_TRANSACTION_ID, "transaction id cannot be empty")
        data = self.data.pop((group, request.transaction_id), None)
        if data is None or data.expires <= time.monotonic():
            raise ProxyError(Code.INVALID_TRANSACTION_ID, "cannot found transaction data")
        addr = self.instance.master_addr(data.broker_name)
        if addr is None:
            raise ProxyError(Code.INTERNAL_SERVER_ERROR, f"no master of {data.broker_name}")
        resolution = {d.COMMIT: TRANSACTION_COMMIT_TYPE, d.ROLLBACK: TRANSACTION_ROLLBACK_TYPE}.get(
            request.resolution, TRANSACTION_NOT_TYPE
        )
        header = EndTransactionRequestHeader(
            producer_group=group,
            tran_state_table_offset=data.tran_state_table_offset,
            commit_log_offset=data.commit_log_offset,
            commit_or_rollback=resolution,
            msg_id=request.message_id,
            from_transaction_check=request.source == d.SOURCE_SERVER_CHECK,
            transaction_id=request.transaction_id,
        )
        command = RemotingCommand.request(RequestCode.END_TRANSACTION, header.to_ext())
        await self.instance.api.invoke_oneway(addr, command, END_TIMEOUT)

    # -- checks from brokers ----------------------------------------------------------------

    def _broker_name(self, addr: str) -> str | None:
        for bd in self.instance.brokers.values():
            if addr in bd.addrs.values():
                return bd.broker_name
        return None

    async def _check(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        """CHECK_TRANSACTION_STATE (ProxyClientRemotingProcessor, GrpcClientChannel)."""
        try:
            header = CheckTransactionStateRequestHeader.from_ext(request.ext_fields)
            msg, _ = decode_record(request.body)
        except ProtocolError as exc:
            log.warning("bad CHECK_TRANSACTION_STATE from %s: %s", ctx.remote_address, exc)
            return None
        group = msg.properties.get(P.PGROUP, "")
        transaction_id = header.transaction_id or msg.properties.get(P.UNIQ_KEY, "")
        clients = sorted(self.clients.get(group, ()))
        broker_name = header.bname or self._broker_name(ctx.remote_address)
        if not clients or not transaction_id or broker_name is None:
            log.info(
                "check of transaction %s of group %r from %s: no client to ask",
                transaction_id,
                group,
                ctx.remote_address,
            )
            return None
        self.add(group, transaction_id, broker_name, header.tran_state_table_offset, header.commit_log_offset)
        command = s.TelemetryCommand(
            recover_orphaned_transaction_command=s.RecoverOrphanedTransactionCommand(
                message=received(msg), transaction_id=transaction_id
            )
        )
        if not self.channels.push(random.choice(clients), command):
            log.info("check of transaction %s: the client's Telemetry stream is full or gone", transaction_id)
        return None
