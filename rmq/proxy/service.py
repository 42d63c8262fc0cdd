"""apache.rocketmq.v2.MessagingService over brokers, as RocketMQ's proxy in cluster mode.

The proxy is a client of the brokers (rmq.client's ClientInstance: routes from the name
servers, one connection per broker): sends go out as SEND_MESSAGE_V2, receives as
POP_MESSAGE from every queue of the broker the client names (orderly for a group whose config
says consumeMessageOrderly: FIFO), acks and invisible-time changes as ACK_MESSAGE and
CHANGE_MESSAGE_INVISIBLETIME with the receipt handle, the message's POP extraInfo. Failures
answer inside the response's Status, as Java's proxy does (the gRPC call itself ends OK); see
rmq.proxy.convert for the codes.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import trio
from google.protobuf.duration_pb2 import Duration
from google.protobuf.message import Message as Proto

from rmq.client.errors import MQBrokerError, MQClientError
from rmq.client.instance import ClientInstance
from rmq.client.route import TopicRoute
from rmq.protocol import RemotingCommand, RequestCode, ResponseCode
from rmq.protocol import headers as H
from rmq.protocol import properties as P
from rmq.protocol.bodies.configs import SubscriptionGroupConfig
from rmq.protocol.constants import MASTER_ID, PERM_READ, PERM_WRITE
from rmq.protocol.errors import ProtocolError
from rmq.protocol.message import TRANSACTION_PREPARED_TYPE, MessageExt
from rmq.protocol.pop import (
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    ExtraInfo,
    PopMessageRequestHeader,
    order_counts,
    real_topic,
    receipt_handles,
)

from .channels import Channels
from .config import ProxyConfig
from .consumers import Consumers, subscriptions_of
from .convert import (
    OK_STATUS,
    Code,
    ProxyError,
    checked_name,
    millis,
    received,
    send_properties,
    status,
    status_of,
    timestamp,
)
from .groups import GroupConfigs
from .grpc import Call, Method, Send
from .pull import Pulling
from .transaction import Transactions
from .v2 import definition_pb2 as d
from .v2 import service_pb2 as s

log = logging.getLogger("rmq.proxy")

SERVICE = "/apache.rocketmq.v2.MessagingService/"
# RocketMQ's default retry policy of a group (CustomizedRetryPolicy): the delay levels 1s..2h
_CUSTOMIZED_BACKOFF = (1, 5, 10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200)
_DEFAULT_RETRY_MAX_TIMES = 16


class MessagingService:
    """The handlers; `methods()` maps them to their gRPC paths."""

    def __init__(self, config: ProxyConfig, instance: ClientInstance) -> None:
        self.config = config
        self.instance = instance
        self.settings: dict[str, d.Settings] = {}  # by client id, from each client's Telemetry
        self._round_robin = itertools.count()
        self.channels = Channels()  # each client's Telemetry stream
        self.transactions = Transactions(instance, config.transaction_data_expire_millis, self.channels)
        self.pulling = Pulling(self.instance, self.route, self.poll_ms)
        self.consumers = Consumers(instance)
        self.groups = GroupConfigs(instance, config.subscription_group_config_cache_refresh_seconds)

    def methods(self) -> dict[str, Method]:
        unary: dict[str, tuple[type[Proto], Callable[..., Awaitable[Any]]]] = {
            "QueryRoute": (s.QueryRouteRequest, self.query_route),
            "Heartbeat": (s.HeartbeatRequest, self.heartbeat),
            "SendMessage": (s.SendMessageRequest, self.send_message),
            "QueryAssignment": (s.QueryAssignmentRequest, self.query_assignment),
            "AckMessage": (s.AckMessageRequest, self.ack_message),
            "ChangeInvisibleDuration": (s.ChangeInvisibleDurationRequest, self.change_invisible_duration),
            "NotifyClientTermination": (s.NotifyClientTerminationRequest, self.notify_client_termination),
            "EndTransaction": (s.EndTransactionRequest, self.end_transaction),
            "ForwardMessageToDeadLetterQueue": (
                s.ForwardMessageToDeadLetterQueueRequest,
                self.forward_message_to_dead_letter_queue,
            ),
            "UpdateOffset": (s.UpdateOffsetRequest, self.pulling.update_offset),
            "GetOffset": (s.GetOffsetRequest, self.pulling.get_offset),
            "QueryOffset": (s.QueryOffsetRequest, self.pulling.query_offset),
        }
        not_done = {
            "RecallMessage": (s.RecallMessageRequest, s.RecallMessageResponse),
            "SyncLiteSubscription": (s.SyncLiteSubscriptionRequest, s.SyncLiteSubscriptionResponse),
        }
        out = {SERVICE + name: Method(req, "unary", _answering(fn, req)) for name, (req, fn) in unary.items()}
        for name, (req, resp) in not_done.items():
            out[SERVICE + name] = Method(req, "unary", _not_implemented(resp, name))
        out[SERVICE + "ReceiveMessage"] = Method(s.ReceiveMessageRequest, "server_stream", self.receive_message)
        out[SERVICE + "PullMessage"] = Method(s.PullMessageRequest, "server_stream", self.pulling.pull_message)
        out[SERVICE + "Telemetry"] = Method(s.TelemetryCommand, "bidi", self.telemetry)
        return out

    # -- routes -----------------------------------------------------------------------------

    async def route(self, topic: str) -> TopicRoute:
        """The topic's route, cached by the client instance (refreshed every 30 s)."""
        route = self.instance.routes.get(topic)
        if route is None:
            route = await self.instance.update_route(topic)
        if route is None:
            raise ProxyError(Code.TOPIC_NOT_FOUND, f"No topic route info in name server for the topic: {topic}")
        return route

    def endpoints(self, call: Call, asked: d.Endpoints | None) -> d.Endpoints:
        """The proxy's own address as the client should dial it (Java answers the proxy's)."""
        addr = self.config.local_serve_addr or call.metadata(":authority")
        if not addr and asked is not None and asked.addresses:
            return asked
        host, port = host_port(addr)
        if not host or port is None:  # what the client dialed: the connection's own end
            host, port = host or call.local[0], port if port is not None else call.local[1]
        scheme = d.IPv6 if ":" in host else d.IPv4
        if not host.replace(".", "").isdigit() and scheme == d.IPv4:
            scheme = d.DOMAIN_NAME
        return d.Endpoints(scheme=scheme, addresses=[d.Address(host=host, port=port)])

    def queues(self, call: Call, topic: d.Resource, route: TopicRoute, endpoints: d.Endpoints) -> list[d.MessageQueue]:
        """As RouteActivity.queryRoute: for each queue data, the queues of every broker of
        its group (master and slaves, by broker id, each naming the proxy's endpoints), as
        genMessageQueueFromQueueData numbers them: read-only, write-only, then read-write
        ids, or NONE queues for a group neither readable nor writable. rmq's topics have no
        message type, so every type is accepted (Java's MIXED)."""
        out: list[d.MessageQueue] = []
        ids = {b.broker_name: sorted(b.addrs) for b in route.broker_datas}
        for qd in route.queue_datas:
            if qd.broker_name not in ids:
                break  # as Java: a queue data without its broker data ends the listing
            readable, writable = bool(qd.perm & PERM_READ), bool(qd.perm & PERM_WRITE)
            r = w = rw = n = 0
            if readable and writable:
                rw = min(qd.read_queue_nums, qd.write_queue_nums)
                r, w = qd.read_queue_nums - rw, qd.write_queue_nums - rw
            elif writable:
                w = qd.write_queue_nums
            elif readable:
                r = qd.read_queue_nums
            else:
                n = max(1, qd.read_queue_nums, qd.write_queue_nums)
            perms = [d.READ] * r + [d.WRITE] * w + [d.READ_WRITE] * rw + [d.NONE] * n
            for broker_id in ids[qd.broker_name]:
                broker = d.Broker(name=qd.broker_name, id=broker_id, endpoints=endpoints)
                out.extend(
                    d.MessageQueue(topic=topic, id=qid, permission=perm, broker=broker, accept_message_types=_ALL_TYPES)
                    for qid, perm in enumerate(perms)
                )
        return out

    async def query_route(self, call: Call, request: s.QueryRouteRequest) -> s.QueryRouteResponse:
        topic = checked_name(request.topic, Code.ILLEGAL_TOPIC, "topic")
        route = await self.route(topic)
        endpoints = self.endpoints(call, request.endpoints if request.HasField("endpoints") else None)
        return s.QueryRouteResponse(status=OK_STATUS, message_queues=self.queues(call, request.topic, route, endpoints))

    async def query_assignment(self, call: Call, request: s.QueryAssignmentRequest) -> s.QueryAssignmentResponse:
        """One assignment per master broker, queue id -1: the broker's POP shares its queues."""
        topic = checked_name(request.topic, Code.ILLEGAL_TOPIC, "topic")
        checked_name(request.group, Code.ILLEGAL_CONSUMER_GROUP, "consumer group")
        route = await self.route(topic)
        endpoints = self.endpoints(call, request.endpoints if request.HasField("endpoints") else None)
        masters = {b.broker_name for b in route.broker_datas if MASTER_ID in b.addrs}
        assignments = []
        for qd in route.queue_datas:
            if qd.broker_name in masters and qd.perm & PERM_READ and qd.read_queue_nums > 0:
                queue = d.MessageQueue(
                    topic=request.topic,
                    id=-1,
                    permission=d.READ_WRITE if qd.perm & PERM_WRITE else d.READ,
                    broker=d.Broker(name=qd.broker_name, id=MASTER_ID, endpoints=endpoints),
                    accept_message_types=_ALL_TYPES,
                )
                assignments.append(d.Assignment(message_queue=queue))
        if not assignments:
            return s.QueryAssignmentResponse(status=status(Code.FORBIDDEN, "no readable queue"))
        return s.QueryAssignmentResponse(status=OK_STATUS, assignments=assignments)

    # -- clients ----------------------------------------------------------------------------

    async def heartbeat(self, call: Call, request: s.HeartbeatRequest) -> s.HeartbeatResponse:
        client_id = _client_id(call)
        # a consumer's heartbeat names its group; a client with settings has a Telemetry stream,
        # whose end drops the group again (a client without one is not registered)
        group = request.group.name if request.HasField("group") else ""
        settings = self.settings.get(client_id)
        if (
            group
            and settings is not None
            and request.client_type in _CONSUMER_TYPES
            and not self.consumers.knows(client_id, group)
        ):
            self.consumers.add_client(client_id, group, subscriptions_of(settings))
        return s.HeartbeatResponse(status=OK_STATUS)

    async def notify_client_termination(
        self, call: Call, request: s.NotifyClientTerminationRequest
    ) -> s.NotifyClientTerminationResponse:
        client_id = _client_id(call)
        self.settings.pop(client_id, None)
        await self.consumers.remove_client(client_id, request.group.name if request.HasField("group") else None)
        return s.NotifyClientTerminationResponse(status=OK_STATUS)

    def merged_settings(self, settings: d.Settings, group: SubscriptionGroupConfig | None = None) -> d.Settings:
        """The client's settings with the proxy's and, for a consumer, its group's config
        (GrpcClientSettingsManager): fifo for an orderly group, retryMaxTimes + 1 attempts."""
        out = d.Settings()
        out.CopyFrom(settings)
        c = self.config
        if settings.HasField("publishing"):
            out.backoff_policy.max_attempts = c.grpc_client_producer_max_attempts
            backoff = out.backoff_policy.exponential_backoff
            backoff.initial.FromMilliseconds(c.grpc_client_producer_backoff_initial_millis)
            backoff.max.FromMilliseconds(c.grpc_client_producer_backoff_max_millis)
            backoff.multiplier = c.grpc_client_producer_backoff_multiplier
            out.publishing.validate_message_type = c.enable_topic_message_type_check
            out.publishing.max_body_size = c.max_message_size
        elif settings.HasField("subscription"):
            out.subscription.receive_batch_size = c.grpc_client_consumer_long_polling_batch_size
            out.subscription.long_polling_timeout.FromMilliseconds(
                c.grpc_client_consumer_max_long_polling_timeout_millis
            )
            out.subscription.fifo = group is not None and group.consume_message_orderly
            out.backoff_policy.max_attempts = _max_attempts(group)
            out.backoff_policy.customized_backoff.next.extend(Duration(seconds=sec) for sec in _CUSTOMIZED_BACKOFF)
        out.metric.on = False
        return out

    async def telemetry(self, call: Call, requests: trio.MemoryReceiveChannel[Proto], send: Send) -> None:
        """Answers each Settings with the merged settings; the stream stays open until the
        client ends it. It is the client's channel (rmq.proxy.channels): a producer's carries
        the transaction checks of its topics' groups (RecoverOrphanedTransactionCommand,
        rmq.proxy.transaction), a consumer's the thread stack and message verification
        requests of admins (rmq.proxy.relay), whose answers come back on it."""
        client_id = call.metadata("x-mq-client-id")
        pushed, to_push = trio.open_memory_channel[s.TelemetryCommand](64)
        channel = None
        if client_id:
            language, version = call.metadata("x-mq-language"), call.metadata("x-mq-client-version")
            channel = self.channels.open(client_id, language, version, pushed)

        async def push() -> None:
            async for command in to_push:
                await send(command)

        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(push)
                async for command in requests:
                    assert isinstance(command, s.TelemetryCommand)
                    kind = command.WhichOneof("command")
                    if kind == "settings":
                        if channel is None:
                            answer = status(Code.CLIENT_ID_REQUIRED, "client id is required")
                            await send(s.TelemetryCommand(status=answer))
                            continue
                        channel.settings = command.settings
                        self.settings[client_id] = command.settings
                        if command.settings.HasField("publishing"):
                            topics = [t.name for t in command.settings.publishing.topics]
                            self.transactions.add_client(client_id, topics)
                        elif command.settings.subscription.group.name:
                            sub = command.settings.subscription
                            self.consumers.add_client(client_id, sub.group.name, subscriptions_of(command.settings))
                        group = await self._subscriber_group(command.settings)
                        merged = self.merged_settings(command.settings, group)
                        await send(s.TelemetryCommand(status=OK_STATUS, settings=merged))
                    elif kind == "thread_stack_trace":
                        self.channels.reply(client_id, command.thread_stack_trace.nonce, command)
                    elif kind == "verify_message_result":
                        self.channels.reply(client_id, command.verify_message_result.nonce, command)
                    elif kind is None:
                        await send(s.TelemetryCommand(status=status(Code.UNRECOGNIZED_CLIENT_TYPE, "empty command")))
                nursery.cancel_scope.cancel()
        finally:
            pushed.close()
            # a newer stream of the same client keeps what the client registered
            if channel is not None and self.channels.close(channel):
                self.settings.pop(client_id, None)
                self.transactions.remove_client(client_id)
                with trio.CancelScope(shield=True):  # unregistering has its own time limit
                    await self.consumers.remove_client(client_id)

    async def _subscriber_group(self, settings: d.Settings) -> SubscriptionGroupConfig | None:
        """A consumer's group config, from a master of a topic it subscribes to."""
        if not settings.HasField("subscription") or not settings.subscription.group.name:
            return None
        for entry in settings.subscription.subscriptions:
            try:
                route = await self.route(entry.topic.name)
            except (ProxyError, MQClientError):
                continue
            for qd in route.queue_datas:
                addr = self.instance.master_addr(qd.broker_name)
                if addr is not None:
                    return await self.groups.get(settings.subscription.group.name, addr)
        return None

    # -- sending ----------------------------------------------------------------------------

    async def send_message(self, call: Call, request: s.SendMessageRequest) -> s.SendMessageResponse:
        if not request.messages:
            raise ProxyError(Code.BAD_REQUEST, "no message to send")
        topic = checked_name(request.messages[0].topic, Code.ILLEGAL_TOPIC, "topic")
        if any(m.topic.name != topic for m in request.messages):
            raise ProxyError(Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, "topics of the batch differ")
        route = await self.route(topic)
        targets = [
            (qd.broker_name, qid)
            for qd in route.queue_datas
            if qd.perm & PERM_WRITE and self.instance.master_addr(qd.broker_name)
            for qid in range(qd.write_queue_nums)
        ]
        if not targets:  # no master now: the client's next attempt may find one back
            self.instance.refresh_route_soon(topic)
            raise ProxyError(Code.FORBIDDEN, f"topic {topic} has no writable queue")
        peer = f"{call.peer[0]}:{call.peer[1]}"
        entries = []
        for msg in request.messages:
            try:
                # a master killed or hung: the route is cached (30 s), so a retriable failure
                # fetches it now (at most once a second), before the answer, so that the
                # client's next attempt goes to the new master (a DLedger group's new leader)
                entries.append(await self.instance.broker_call(topic, self._send_one(topic, msg, targets, peer)))
            except (ProxyError, MQClientError) as exc:
                entries.append(s.SendResultEntry(status=status_of(exc)))
        codes = {e.status.code for e in entries}
        overall = entries[0].status if len(codes) == 1 else status(Code.MULTIPLE_RESULTS)
        return s.SendMessageResponse(status=overall, entries=entries)

    async def _send_one(
        self, topic: str, msg: d.Message, targets: list[tuple[str, int]], peer: str
    ) -> s.SendResultEntry:
        if len(msg.body) > self.config.max_message_size:
            raise ProxyError(Code.MESSAGE_BODY_TOO_LARGE, f"message body cannot exceed {self.config.max_message_size}")
        # the topic is the producer group, so that a transaction check finds the topic's producers
        props = send_properties(msg, topic, peer, self.config.max_delay_time_mills)
        group = props.get(P.SHARDING_KEY)
        if group is not None:  # a message group keeps to one queue (SendMessageQueueSelector)
            index = abs(P.java_string_hash(group)) % len(targets)
        else:
            index = next(self._round_robin) % len(targets)
        broker_name, queue_id = targets[index]
        addr = self.instance.master_addr(broker_name)
        if addr is None:
            raise ProxyError(Code.INTERNAL_SERVER_ERROR, f"no master of {broker_name}")
        born = props.get("BORN_TIMESTAMP")
        header = H.SendMessageRequestHeader(
            producer_group=topic,
            topic=topic,
            queue_id=queue_id,
            sys_flag=TRANSACTION_PREPARED_TYPE if props.get(P.TRAN_MSG) == "true" else 0,
            born_timestamp=int(born) if born else int(time.time() * 1000),
            flag=0,
            properties=P.encode_properties(props),
            reconsume_times=msg.system_properties.delivery_attempt,
            unit_mode=False,
        )
        result = await self.instance.api.send_message(
            addr,
            broker_name,
            RequestCode.SEND_MESSAGE_V2,
            header,
            msg.body,
            props[P.UNIQ_KEY],
            self.instance.config.request_timeout,
        )
        assert result is not None
        if result.status.name != "SEND_OK":
            code = {
                "FLUSH_DISK_TIMEOUT": Code.MASTER_PERSISTENCE_TIMEOUT,
                "FLUSH_SLAVE_TIMEOUT": Code.SLAVE_PERSISTENCE_TIMEOUT,
            }
            return s.SendResultEntry(
                status=status(
                    code.get(result.status.name, Code.HA_NOT_AVAILABLE),
                    f"send message failed, sendStatus={result.status.name}",
                )
            )
        transaction_id = result.transaction_id or ""
        if header.sys_flag == TRANSACTION_PREPARED_TYPE:
            # the broker's checks name a transaction by its UNIQ_KEY when it has no other id
            transaction_id = transaction_id or result.msg_id
            self.transactions.add_sent(topic, transaction_id, broker_name, result.queue_offset, result.offset_msg_id)
        return s.SendResultEntry(
            status=OK_STATUS,
            message_id=result.msg_id,
            transaction_id=transaction_id,
            offset=result.queue_offset,
        )

    async def end_transaction(self, call: Call, request: s.EndTransactionRequest) -> s.EndTransactionResponse:
        checked_name(request.topic, Code.ILLEGAL_TOPIC, "topic")
        await self.transactions.end(request)
        return s.EndTransactionResponse(status=OK_STATUS)

    # -- receiving --------------------------------------------------------------------------

    def poll_ms(self, call: Call, request: s.ReceiveMessageRequest | s.PullMessageRequest) -> int:
        """ReceiveMessageActivity's polling time (a pull's too): the asked one within the configured bounds,
        and within what is left of the call's deadline; then, rmq's own, less the reserve the
        answer needs to reach the client before that deadline."""
        c = self.config
        remaining = (call.deadline - trio.current_time()) * 1000 if call.deadline != float("inf") else 1e12
        if request.HasField("long_polling_timeout"):
            poll = float(millis(request.long_polling_timeout))
        else:
            poll = remaining
        poll = max(poll, c.grpc_client_consumer_min_long_polling_timeout_millis)
        poll = min(poll, c.grpc_client_consumer_max_long_polling_timeout_millis)
        if poll > remaining:
            if remaining < c.grpc_client_consumer_min_long_polling_timeout_millis:
                raise ProxyError(
                    Code.ILLEGAL_POLLING_TIME,
                    "The deadline time remaining is not enough for polling, please check network condition",
                )
            poll = remaining
        return max(0, int(min(poll, remaining - c.grpc_client_consumer_long_polling_reserve_time_millis)))

    async def receive_message(self, call: Call, request: s.ReceiveMessageRequest, send: Send) -> None:
        try:
            await self._receive(call, request, send)
        except (ProxyError, MQClientError) as exc:
            await send(s.ReceiveMessageResponse(status=status_of(exc)))
        # the stream ends with the proxy's time, as Java's ReceiveMessageResponseStreamWriter.onComplete:
        # the Python client's PushConsumer takes it as the messages' transport delivery time (and
        # fails on every batch without it)
        await send(s.ReceiveMessageResponse(delivery_timestamp=timestamp(int(time.time() * 1000))))

    async def _receive(self, call: Call, request: s.ReceiveMessageRequest, send: Send) -> None:
        c = self.config
        poll_ms = self.poll_ms(call, request)
        topic = checked_name(request.message_queue.topic, Code.ILLEGAL_TOPIC, "topic")
        group = checked_name(request.group, Code.ILLEGAL_CONSUMER_GROUP, "consumer group")
        invisible = millis(request.invisible_duration)
        if request.auto_renew and not request.HasField("invisible_duration"):
            invisible = c.default_invisible_time_mills
        low, high = c.min_invisible_time_mills_for_recv, c.max_invisible_time_mills
        if not low <= invisible <= high:
            raise ProxyError(Code.ILLEGAL_INVISIBLE_TIME, f"the invisibleTime is out of range [{low}, {high}]")
        batch = request.batch_size
        if batch <= 0 or batch > 32:
            raise ProxyError(Code.BAD_REQUEST, "batch size must be within [1, 32]")
        f = request.filter_expression
        exp_type = "SQL92" if f.type == d.SQL else "TAG"
        exp = f.expression or "*"
        route = await self.route(topic)
        names = [
            qd.broker_name
            for qd in route.queue_datas
            if qd.perm & PERM_READ and self.instance.master_addr(qd.broker_name)
        ]
        wanted = request.message_queue.broker.name
        if wanted and wanted in names:
            broker_name = wanted
        elif names:
            broker_name = names[next(self._round_robin) % len(names)]
        else:
            raise ProxyError(Code.FORBIDDEN, f"topic {topic} has no readable queue")
        addr = self.instance.master_addr(broker_name)
        assert addr is not None
        # an orderly (FIFO) group pops in order; a message popped as often as the group
        # delivers one goes to its DLQ instead (ReceiveMessageActivity, PopMessageResultFilterImpl)
        config = await self.groups.get(group, addr)
        fifo = config is not None and config.consume_message_orderly
        header = PopMessageRequestHeader(
            consumer_group=group,
            topic=topic,
            queue_id=-1,
            max_msg_nums=batch,
            invisible_time=invisible,
            poll_time=poll_ms,
            born_time=int(time.time() * 1000),
            init_mode=1,  # ConsumeInitMode.MAX: a new group starts at the queues' ends
            exp_type=exp_type,
            exp=exp,
            order=fifo,
            attempt_id=request.attempt_id if request.HasField("attempt_id") else None,
        )
        timeout = poll_ms / 1000 + self.instance.config.request_timeout
        # a master gone in a failover: the client's next receive pops from the new one
        result = await self.instance.broker_call(topic, self.instance.api.pop(addr, header, timeout))
        if result.code in (ResponseCode.POLLING_TIMEOUT, ResponseCode.NO_MESSAGE):
            await send(s.ReceiveMessageResponse(status=status(Code.MESSAGE_NOT_FOUND, "no new message")))
            return
        if result.code == ResponseCode.POLLING_FULL:
            await send(s.ReceiveMessageResponse(status=status(Code.TOO_MANY_REQUESTS, "polling full")))
            return
        if not result.messages or result.header is None:
            await send(s.ReceiveMessageResponse(status=status(Code.MESSAGE_NOT_FOUND, "no match message")))
            return
        try:
            if fifo:
                order_counts(result.header, result.messages)  # reconsumeTimes: pops of the message before
            handles = receipt_handles(result.header, result.messages, broker_name, group)
        except ProtocolError as exc:
            raise ProxyError(Code.INTERNAL_SERVER_ERROR, str(exc)) from None
        deliver: list[tuple[MessageExt, ExtraInfo]] = []
        for msg, handle in zip(result.messages, handles, strict=True):
            # the CommitLog offset as a 9th field, as Java's ReceiptHandle: a dead-letter forward needs it
            handle = dataclasses.replace(
                handle,
                queue_offset=msg.queue_offset if handle.queue_offset < 0 else handle.queue_offset,
                commit_log_offset=msg.commitlog_offset,
            )
            if msg.reconsume_times >= _max_attempts(config):
                await self._forward_used_up(addr, group, topic, msg, handle)
            else:
                deliver.append((msg, handle))
        if not deliver:
            await send(s.ReceiveMessageResponse(status=status(Code.MESSAGE_NOT_FOUND, "no match message")))
            return
        await send(s.ReceiveMessageResponse(status=OK_STATUS))
        for msg, handle in deliver:
            await send(s.ReceiveMessageResponse(message=received(msg, handle.encode(), handle.invisible_time)))

    async def _forward_used_up(self, addr: str, group: str, topic: str, msg: MessageExt, handle: ExtraInfo) -> None:
        """A message delivered as often as its group allows, not delivered again: to the DLQ
        (TO_DLQ of PopMessageResultFilterImpl). If that fails it comes back after its invisible
        time and is tried again."""
        message_id = msg.properties.get(P.UNIQ_KEY) or msg.offset_msg_id
        try:
            await self._to_dead_letters(addr, group, real_topic(topic, group, handle.retry), handle, message_id)
        except (ProtocolError, MQClientError) as exc:
            log.warning("cannot forward %s of %s to the DLQ of %s: %s", message_id, topic, group, exc)

    # -- acks -------------------------------------------------------------------------------

    async def _handle_target(self, topic: str, group: str, handle_text: str) -> tuple[str, ExtraInfo, str]:
        """(broker address, parsed handle, the topic it was read from)."""
        try:
            handle = ExtraInfo.parse(handle_text)
        except ProtocolError:
            raise ProxyError(Code.INVALID_RECEIPT_HANDLE, "receipt handle is not valid") from None
        if handle.queue_offset < 0:
            raise ProxyError(Code.INVALID_RECEIPT_HANDLE, "receipt handle names no queue offset")
        try:
            read_topic = real_topic(topic, group, handle.retry)
        except ProtocolError:
            raise ProxyError(Code.INVALID_RECEIPT_HANDLE, "receipt handle is not valid") from None
        addr = self.instance.master_addr(handle.broker_name)
        if addr is None:
            await self.route(topic)
            addr = self.instance.master_addr(handle.broker_name)
        if addr is None:
            raise ProxyError(Code.INVALID_RECEIPT_HANDLE, f"broker {handle.broker_name} of the receipt handle is gone")
        return addr, handle, read_topic

    async def ack_message(self, call: Call, request: s.AckMessageRequest) -> s.AckMessageResponse:
        topic = checked_name(request.topic, Code.ILLEGAL_TOPIC, "topic")
        group = checked_name(request.group, Code.ILLEGAL_CONSUMER_GROUP, "consumer group")
        entries = []
        for entry in request.entries:
            try:
                addr, handle, read_topic = await self._handle_target(topic, group, entry.receipt_handle)
                header = AckMessageRequestHeader(
                    group, read_topic, handle.queue_id, entry.receipt_handle, handle.queue_offset
                )
                await self.instance.broker_call(topic, self.instance.api.ack(addr, header))
                result = OK_STATUS
            except (ProxyError, MQClientError) as exc:
                result = status_of(exc)
            entries.append(
                s.AckMessageResultEntry(message_id=entry.message_id, receipt_handle=entry.receipt_handle, status=result)
            )
        codes = {e.status.code for e in entries}
        overall = status(Code.MULTIPLE_RESULTS) if len(codes) > 1 else (entries[0].status if entries else OK_STATUS)
        return s.AckMessageResponse(status=overall, entries=entries)

    async def forward_message_to_dead_letter_queue(
        self, call: Call, request: s.ForwardMessageToDeadLetterQueueRequest
    ) -> s.ForwardMessageToDeadLetterQueueResponse:
        """As Java's ProducerProcessor: CONSUMER_SEND_MSG_BACK with delay level -1 (the broker
        stores a copy in %DLQ%<group>), then, when it succeeded, an ack of the receipt handle."""
        topic = checked_name(request.topic, Code.ILLEGAL_TOPIC, "topic")
        group = checked_name(request.group, Code.ILLEGAL_CONSUMER_GROUP, "consumer group")
        addr, handle, read_topic = await self._handle_target(topic, group, request.receipt_handle)
        if handle.commit_log_offset < 0:
            raise ProxyError(Code.INVALID_RECEIPT_HANDLE, "commit log offset is empty")
        await self._to_dead_letters(addr, group, read_topic, handle, request.message_id)
        return s.ForwardMessageToDeadLetterQueueResponse(status=OK_STATUS)

    async def _to_dead_letters(
        self, addr: str, group: str, read_topic: str, handle: ExtraInfo, message_id: str
    ) -> None:
        """CONSUMER_SEND_MSG_BACK with delay level -1 (the broker stores a copy in
        %DLQ%<group>), then, when it succeeded, an ack of the handle."""
        header = H.ConsumerSendMsgBackRequestHeader(
            offset=handle.commit_log_offset,
            group=group,
            delay_level=-1,
            origin_msg_id=message_id,
            origin_topic=read_topic,
            unit_mode=False,
            max_reconsume_times=0,
        )
        command = RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK, header.to_ext())
        response = await self.instance.api.invoke(addr, command)
        if response.code != ResponseCode.SUCCESS:
            raise MQBrokerError(response.code, response.remark, address=addr)
        ack = AckMessageRequestHeader(group, read_topic, handle.queue_id, handle.encode(), handle.queue_offset)
        try:
            await self.instance.api.ack(addr, ack)
        except MQClientError as exc:  # the copy is in the DLQ; the original comes back, as in Java
            log.info("ack after the dead-letter forward of %s failed: %s", message_id, exc)

    async def change_invisible_duration(
        self, call: Call, request: s.ChangeInvisibleDurationRequest
    ) -> s.ChangeInvisibleDurationResponse:
        topic = checked_name(request.topic, Code.ILLEGAL_TOPIC, "topic")
        group = checked_name(request.group, Code.ILLEGAL_CONSUMER_GROUP, "consumer group")
        invisible = millis(request.invisible_duration)
        if invisible < 0 or invisible > self.config.max_invisible_time_mills:
            raise ProxyError(
                Code.ILLEGAL_INVISIBLE_TIME,
                f"the invisibleTime is out of range [0, {self.config.max_invisible_time_mills}]",
            )
        addr, handle, read_topic = await self._handle_target(topic, group, request.receipt_handle)
        header = ChangeInvisibleTimeRequestHeader(
            group, read_topic, handle.queue_id, request.receipt_handle, handle.queue_offset, invisible
        )
        answer = await self.instance.broker_call(topic, self.instance.api.change_invisible_time(addr, header))
        new = dataclasses.replace(
            handle,
            ck_queue_offset=handle.queue_offset,
            pop_time=answer.pop_time,
            invisible_time=answer.invisible_time,
            revive_qid=answer.revive_qid,
        )
        return s.ChangeInvisibleDurationResponse(status=OK_STATUS, receipt_handle=new.encode())


_ALL_TYPES = [d.NORMAL, d.FIFO, d.DELAY, d.TRANSACTION]
_CONSUMER_TYPES = (d.PUSH_CONSUMER, d.SIMPLE_CONSUMER, d.PULL_CONSUMER)


def _max_attempts(group: SubscriptionGroupConfig | None) -> int:
    """How often a message of the group is delivered: retryMaxTimes + 1 (16 + 1 by default)."""
    return (group.retry_max_times if group is not None else _DEFAULT_RETRY_MAX_TIMES) + 1


def host_port(addr: str) -> tuple[str, int | None]:
    """The host and port of an authority ("host:port", "[v6]:port", "host"); a port that is
    missing or not a port is None."""
    if addr.startswith("["):
        host, _, rest = addr[1:].partition("]")
        text = rest[1:] if rest.startswith(":") else ""
    elif addr.count(":") == 1:
        host, _, text = addr.partition(":")
    else:  # a name, an IPv4 address, or a bare IPv6 one
        host, text = addr, ""
    port = int(text) if text.isdigit() and len(text) <= 5 and 0 < int(text) < 65536 else None
    return host, port


def _client_id(call: Call) -> str:
    client_id = call.metadata("x-mq-client-id")
    if not client_id:
        raise ProxyError(Code.CLIENT_ID_REQUIRED, "client id is required")
    return client_id


def _answering(
    fn: Callable[[Call, Any], Awaitable[Proto]], request_type: type[Proto]
) -> Callable[[Call, Any], Awaitable[Proto]]:
    """A unary handler whose ProxyError or broker failure becomes the response's Status."""
    response_type = getattr(s, request_type.__name__.removesuffix("Request") + "Response")

    async def handler(call: Call, request: Any) -> Proto:
        try:
            return await fn(call, request)
        except (ProxyError, MQClientError) as exc:
            return response_type(status=status_of(exc))

    return handler


def _not_implemented(response_type: type[Proto], name: str) -> Callable[[Call, Any], Awaitable[Proto]]:
    async def handler(call: Call, request: Any) -> Proto:
        return response_type(status=status(Code.NOT_IMPLEMENTED, f"{name} is not served by rmq yet"))

    return handler
