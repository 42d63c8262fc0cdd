"""Request-reply: RPC over messages, as RocketMQ 4.x's `DefaultMQProducer.request`.

A requester's `Producer.request(msg)` marks the message with a fresh CORRELATION_ID, its
client id (REPLY_TO_CLIENT) and its timeout (TTL, ms), sends it as any message, and waits
for the reply. A replier (typically a consumer of the request topic) answers with
`Producer.reply(request, body)`: a message to `<cluster>_REPLY_TOPIC`, the cluster being
the CLUSTER property the broker stamped on the request, with MSG_TYPE "reply" and the
request's correlation id, client id and TTL (MessageUtil.createReplyMessage). A reply goes
with SEND_REPLY_MESSAGE_V2; its broker pushes it to the requester's connection with
PUSH_REPLY_MESSAGE_TO_CLIENT, which `ReplyRouter` serves, handing it to the waiting request.

The broker finds the requester among its producers by client id, so before the first
request to a topic the requester makes sure the brokers know it: it looks up the topic's
route and the reply topic's route of each cluster in it (a reply may come through any
broker of the cluster; Java looks up only the request topic's) and sends its heartbeat.
"""

from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING, Protocol

import trio

from rmq.protocol import ProtocolError, RemotingCommand, RequestCode, ResponseCode
from rmq.protocol import properties as P
from rmq.protocol.constants import REPLY_MESSAGE_FLAG, reply_topic
from rmq.protocol.headers import ReplyMessageRequestHeader
from rmq.protocol.message import Message, MessageExt, decompress_body, host_port

from .errors import MQClientError, MQTimeoutError
from .ids import wall_clock_ms

if TYPE_CHECKING:
    from rmq.protocol.body import MessageQueue
    from rmq.remoting import Dispatcher, RequestContext

    from .members import Instance
    from .message import SendResult

log = logging.getLogger("rmq.client.reply")


class Requester(Protocol):
    """What a request needs of its producer (Producer), so this module does not import it."""

    @property
    def instance(self) -> Instance: ...

    async def fetch_publish_queues(self, topic: str) -> list[MessageQueue]: ...

    async def send(self, msg: Message, *, timeout: float | None = None) -> SendResult: ...  # noqa: ASYNC109  Producer.send


def prepare_request(msg: Message, client_id: str, timeout: float) -> str:
    """Mark `msg` as a request from `client_id` (DefaultMQProducerImpl.prepareSendRequest);
    returns its correlation id."""
    correlation_id = str(uuid.uuid4())  # CorrelationIdUtil: a random UUID
    msg.properties[P.CORRELATION_ID] = correlation_id
    msg.properties[P.REPLY_TO_CLIENT] = client_id
    msg.properties[P.TTL] = str(int(timeout * 1000))
    return correlation_id


def reply_message(request: Message, body: bytes | str) -> Message:
    """The reply to `request` (a received request message) carrying `body`.

    Raises MQClientError when `request` has no CLUSTER property (it was not received from
    a broker), as MessageUtil.createReplyMessage does."""
    props = request.properties
    cluster = props.get(P.CLUSTER)
    if not cluster:
        raise MQClientError(f"create reply message fail, requestMessage error, property[{P.CLUSTER}] is null.")
    out = {P.MSG_TYPE: REPLY_MESSAGE_FLAG}
    for key in (P.CORRELATION_ID, P.REPLY_TO_CLIENT, P.TTL):
        if key in props:
            out[key] = props[key]
    return Message(reply_topic(cluster), body.encode() if isinstance(body, str) else body, properties=out)


def is_reply(properties: dict[str, str]) -> bool:
    """Whether a message is a reply (sent with SEND_REPLY_MESSAGE_V2, never batched)."""
    return properties.get(P.MSG_TYPE) == REPLY_MESSAGE_FLAG


def pushed_reply(header: ReplyMessageRequestHeader, body: bytes, arrived_ms: int) -> MessageExt:
    """The reply message a PUSH_REPLY_MESSAGE_TO_CLIENT carries (ClientRemotingProcessor.receiveReplyMessage)."""
    props = P.decode_properties(header.properties or "")
    props[P.ARRIVE_TIME] = str(arrived_ms)
    return MessageExt(
        header.topic,
        decompress_body(body, header.sys_flag),
        header.flag,
        props,
        queue_id=header.queue_id,
        sys_flag=header.sys_flag,
        born_timestamp=header.born_timestamp,
        born_host=host_port(header.born_host),
        store_timestamp=header.store_timestamp,
        store_host=host_port(header.store_host),
        reconsume_times=header.reconsume_times or 0,
    )


class _Pending:
    __slots__ = ("arrived", "reply")

    def __init__(self) -> None:
        self.arrived = trio.Event()
        self.reply: MessageExt | None = None


class ReplyRouter:
    """A client instance's PUSH_REPLY_MESSAGE_TO_CLIENT processor and its waiting requests
    (RequestFutureHolder), one per instance: `ReplyRouter.of(instance)`."""

    def __init__(self) -> None:
        self.pending: dict[str, _Pending] = {}  # correlation id → the request waiting for it
        self.introduced: set[str] = set()  # topics whose brokers have had our heartbeat

    @classmethod
    def of(cls, dispatcher: Dispatcher) -> ReplyRouter:
        # in the reader: a dictionary lookup and an event, no I/O
        return dispatcher.processor_of(RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, cls, inline=True)

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        arrived = wall_clock_ms()
        try:
            header = ReplyMessageRequestHeader.from_ext(request.ext_fields)
            reply = pushed_reply(header, request.body, arrived)
        except ProtocolError as exc:
            log.warning("bad reply message from %s: %s", ctx.remote_address, exc)
            return request.make_response(ResponseCode.SYSTEM_ERROR, "process reply message fail")
        correlation_id = reply.properties.get(P.CORRELATION_ID, "")
        pending = self.pending.pop(correlation_id, None)
        if pending is None:
            log.warning(
                "receive reply message, but not matched any request, CorrelationId: %s , reply from host: %s",
                correlation_id,
                header.born_host,
            )
        else:
            pending.reply = reply
            pending.arrived.set()
        return request.make_response(ResponseCode.SUCCESS)


async def introduce(producer: Requester, router: ReplyRouter, topic: str) -> None:
    """Before the first request to `topic`: the brokers its replies may come through learn
    this client's connection from a heartbeat (see the module docstring)."""
    if topic in router.introduced:
        return
    instance: Instance = producer.instance
    await producer.fetch_publish_queues(topic)
    route = instance.routes.get(topic)
    clusters = sorted({bd.cluster for bd in route.broker_datas}) if route is not None else []
    for cluster in clusters:
        try:
            await instance.update_route(reply_topic(cluster))
        except MQClientError as exc:
            log.info("no route of %s's reply topic: %s", cluster, exc)
    await instance.send_heartbeat()
    router.introduced.add(topic)


async def request(producer: Requester, msg: Message, timeout: float) -> MessageExt:  # noqa: ASYNC109  also the request's TTL property
    """`Producer.request`: send `msg` as a request and wait up to `timeout` seconds in all
    for its reply."""
    start = trio.current_time()
    deadline = start + timeout
    router = ReplyRouter.of(producer.instance.dispatcher)
    correlation_id = prepare_request(msg, producer.instance.client_id, timeout)
    pending = router.pending[correlation_id] = _Pending()
    address = ",".join(producer.instance.namesrv)
    try:
        with trio.move_on_at(deadline):
            await introduce(producer, router, msg.topic)
            result = await producer.send(msg, timeout=max(deadline - trio.current_time(), 0.0))
            address = producer.instance.master_addr(result.message_queue.broker_name) or address
            await pending.arrived.wait()
    finally:
        router.pending.pop(correlation_id, None)
    if pending.reply is None:
        raise MQTimeoutError(address, trio.current_time() - start, f"request {correlation_id} (no reply)")
    return pending.reply
