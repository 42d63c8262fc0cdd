"""Between apache.rocketmq.v2 and the 4.x remoting model: messages, statuses, receipt handles.

As RocketMQ's proxy does it (GrpcConverter, SendMessageActivity.buildMessageProperty,
ResponseBuilder): the client's message id is the message's UNIQ_KEY, the message group its
sharding key, a delivery timestamp TIMER_DELIVER_MS; a received message's receipt handle is
the POP extraInfo (rmq.protocol.pop.ExtraInfo), which names broker, queue and offset.
"""

from __future__ import annotations

import hashlib
import time

from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp

from rmq.client.errors import MQBrokerError, MQClientError, MQTimeoutError
from rmq.protocol import ResponseCode
from rmq.protocol import properties as P
from rmq.protocol.message import MessageExt

from .v2 import definition_pb2 as d

Code = d.Code

# MessageConst names the 4.x properties file lacks
PROPERTY_BORN_HOST = "__BORNHOST"
PROPERTY_BORN_TIMESTAMP = "BORN_TIMESTAMP"
PROPERTY_TRACE_CONTEXT = "TRACE_CONTEXT"
PROPERTY_POP_CK = "POP_CK"
# properties kept out of a received message's user properties: the system's own
SYSTEM_PROPERTIES = frozenset(
    {
        P.KEYS,
        P.TAGS,
        P.WAIT,
        P.DELAY,
        P.RETRY_TOPIC,
        P.REAL_TOPIC,
        P.REAL_QID,
        P.TRAN_MSG,
        P.PGROUP,
        P.MIN_OFFSET,
        P.MAX_OFFSET,
        P.UNIQ_KEY,
        P.RECONSUME_TIME,
        P.MAX_RECONSUME_TIMES,
        P.CONSUME_START_TIME,
        P.TRAN_PREPARED_QUEUE_OFFSET,
        P.TRANSACTION_CHECK_TIMES,
        P.CHECK_IMMUNITY_TIME_IN_SECONDS,
        P.MSG_REGION,
        P.TRACE_ON,
        P.CLUSTER,
        P.SHARDING_KEY,
        P.TIMER_DELIVER_MS,
        P.TIMER_DELAY_SEC,
        P.TIMER_DELAY_MS,
        P.INNER_MULTI_DISPATCH,
        P.INNER_MULTI_QUEUE_OFFSET,
        PROPERTY_BORN_HOST,
        PROPERTY_BORN_TIMESTAMP,
        PROPERTY_TRACE_CONTEXT,
        PROPERTY_POP_CK,
        "POP_CK_OFFSET",
        "1ST_POP_TIME",
        "TIMER_OUT_MS",
        "TIMER_ENQUEUE_MS",
        "TIMER_DEQUEUE_MS",
        "TIMER_ROLL_TIMES",
        "TIMER_DEL_UNIQKEY",
        "__transactionId__",
        "DLQ_ORIGIN_TOPIC",
        "DLQ_ORIGIN_MESSAGE_ID",
    }
)

# ResponseBuilder.RESPONSE_CODE_MAPPING, and TOPIC_NOT_EXIST as TopicRouteHelper sees it
_REMOTING_TO_CODE: dict[int, int] = {
    ResponseCode.SUCCESS: Code.OK,
    ResponseCode.SYSTEM_BUSY: Code.TOO_MANY_REQUESTS,
    ResponseCode.REQUEST_CODE_NOT_SUPPORTED: Code.NOT_IMPLEMENTED,
    ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST: Code.CONSUMER_GROUP_NOT_FOUND,
    ResponseCode.TOPIC_NOT_EXIST: Code.TOPIC_NOT_FOUND,
}


class ProxyError(Exception):
    """Ends a request with this `Code` in its Status (GrpcProxyException)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def status(code: int, message: str | None = None) -> d.Status:
    return d.Status(code=code, message=message if message is not None else Code.Name(code))  # type: ignore[arg-type]


OK_STATUS = status(Code.OK)


def status_of(exc: BaseException) -> d.Status:
    """The Status a failure answers with (ResponseBuilder.buildStatus(Throwable))."""
    if isinstance(exc, ProxyError):
        return status(exc.code, exc.message)
    if isinstance(exc, MQBrokerError):
        return status(_REMOTING_TO_CODE.get(exc.response_code, Code.INTERNAL_SERVER_ERROR), exc.remark or str(exc))
    if isinstance(exc, MQTimeoutError):
        return status(Code.PROXY_TIMEOUT, str(exc))
    if isinstance(exc, MQClientError):
        return status(Code.INTERNAL_SERVER_ERROR, str(exc))
    return status(Code.INTERNAL_SERVER_ERROR, f"{type(exc).__name__}: {exc}")


def millis(value: Duration) -> int:
    return int(value.seconds) * 1000 + int(value.nanos) // 1_000_000


def duration(ms: int) -> Duration:
    return Duration(seconds=ms // 1000, nanos=(ms % 1000) * 1_000_000)


def timestamp(ms: int) -> Timestamp:
    return Timestamp(seconds=ms // 1000, nanos=(ms % 1000) * 1_000_000)


def timestamp_ms(value: Timestamp) -> int:
    return int(value.seconds) * 1000 + int(value.nanos) // 1_000_000


def checked_name(resource: d.Resource, code: int, what: str) -> str:
    """A topic's or group's name; ProxyError `code` when it is empty, too long or has a
    character RocketMQ does not allow."""
    name = resource.name
    if not name or len(name) > 255 or any(not (c.isalnum() or c in "%|-_") for c in name):
        raise ProxyError(code, f"{what} {name!r} is illegal")
    return name


def _has_control(text: str) -> bool:
    return any(ord(c) < 0x20 or ord(c) == 0x7F for c in text)


def send_properties(
    msg: d.Message, producer_group: str, peer: str, max_delay_ms: int, now_ms: int | None = None
) -> dict[str, str]:
    """The 4.x properties of a message to send (buildMessageProperty); ProxyError as Java's."""
    props: dict[str, str] = {}
    for key, value in msg.user_properties.items():
        if key in SYSTEM_PROPERTIES or key in (P.TRAN_MSG, P.DELAY):
            raise ProxyError(Code.ILLEGAL_MESSAGE_PROPERTY_KEY, f"property is used by system: {key}")
        if _has_control(key) or _has_control(value):
            raise ProxyError(
                Code.ILLEGAL_MESSAGE_PROPERTY_KEY, "the key or value of property cannot contain control character"
            )
        props[key] = value
    sp = msg.system_properties
    if sp.HasField("tag"):
        if not sp.tag.strip() or "|" in sp.tag or _has_control(sp.tag):
            raise ProxyError(Code.ILLEGAL_MESSAGE_TAG, f"tag {sp.tag!r} is illegal")
        props[P.TAGS] = sp.tag
    if sp.keys:
        for key in sp.keys:
            if not key.strip() or _has_control(key):
                raise ProxyError(Code.ILLEGAL_MESSAGE_KEY, f"key {key!r} is illegal")
        props[P.KEYS] = P.KEY_SEPARATOR.join(sp.keys)
    if not sp.message_id.strip():
        raise ProxyError(Code.ILLEGAL_MESSAGE_ID, "message id cannot be empty")
    props[P.UNIQ_KEY] = sp.message_id
    if sp.message_type == d.TRANSACTION:
        props[P.TRAN_MSG] = "true"
        if sp.HasField("orphaned_transaction_recovery_duration"):
            props[P.CHECK_IMMUNITY_TIME_IN_SECONDS] = str(sp.orphaned_transaction_recovery_duration.seconds)
    if sp.HasField("delivery_timestamp"):
        deliver = timestamp_ms(sp.delivery_timestamp)
        now = int(time.time() * 1000) if now_ms is None else now_ms
        if deliver - now > max_delay_ms:
            raise ProxyError(
                Code.ILLEGAL_DELIVERY_TIME, f"the delay time of message is too large, max is {max_delay_ms}"
            )
        if deliver > now:
            props[P.TIMER_DELIVER_MS] = str(deliver)
    props[P.RECONSUME_TIME] = str(sp.delivery_attempt)
    props[P.PGROUP] = producer_group
    if sp.HasField("message_group"):
        if not sp.message_group.strip() or _has_control(sp.message_group):
            raise ProxyError(Code.ILLEGAL_MESSAGE_GROUP, f"message group {sp.message_group!r} is illegal")
        props[P.SHARDING_KEY] = sp.message_group
    if sp.HasField("trace_context") and sp.trace_context:
        props[PROPERTY_TRACE_CONTEXT] = sp.trace_context
    props[PROPERTY_BORN_HOST] = sp.born_host or peer
    if sp.HasField("born_timestamp"):
        props[PROPERTY_BORN_TIMESTAMP] = str(timestamp_ms(sp.born_timestamp))
    return props


def message_type(props: dict[str, str]) -> int:
    if props.get(P.TRAN_MSG) == "true":
        return d.TRANSACTION
    if P.DELAY in props or P.TIMER_DELIVER_MS in props or P.TIMER_DELAY_SEC in props:
        return d.DELAY
    if P.SHARDING_KEY in props:
        return d.FIFO
    return d.NORMAL


def _host(addr: tuple[str, int]) -> str:
    return f"{addr[0]}:{addr[1]}"


def received(msg: MessageExt, receipt_handle: str | None = None, invisible_ms: int = 0) -> d.Message:
    """A popped message as the client sees it (GrpcConverter.buildMessage); without a
    receipt handle (a transaction check's half message) it names no invisible time."""
    props = msg.properties
    sp = d.SystemProperties(
        message_id=props.get(P.UNIQ_KEY) or msg.offset_msg_id,
        body_digest=d.Digest(type=d.MD5, checksum=hashlib.md5(msg.body).hexdigest().upper()),
        body_encoding=d.IDENTITY,
        message_type=message_type(props),  # type: ignore[arg-type]
        born_timestamp=timestamp(msg.born_timestamp),
        born_host=props.get(PROPERTY_BORN_HOST) or _host(msg.born_host),
        store_timestamp=timestamp(msg.store_timestamp),
        store_host=_host(msg.store_host),
        queue_id=msg.queue_id,
        queue_offset=msg.queue_offset,
        delivery_attempt=msg.reconsume_times + 1,
    )
    if receipt_handle is not None:
        sp.receipt_handle = receipt_handle
        sp.invisible_duration.CopyFrom(duration(invisible_ms))
    if P.TAGS in props:
        sp.tag = props[P.TAGS]
    if props.get(P.KEYS):
        sp.keys.extend(P.split_keys(props[P.KEYS]))
    if P.TIMER_DELIVER_MS in props:
        try:
            sp.delivery_timestamp.CopyFrom(timestamp(int(props[P.TIMER_DELIVER_MS])))
        except ValueError:
            pass
    if P.SHARDING_KEY in props:
        sp.message_group = props[P.SHARDING_KEY]
    if PROPERTY_TRACE_CONTEXT in props:
        sp.trace_context = props[PROPERTY_TRACE_CONTEXT]
    origin_topic, origin_id = props.get("DLQ_ORIGIN_TOPIC"), props.get("DLQ_ORIGIN_MESSAGE_ID")
    if origin_topic and origin_id:
        sp.dead_letter_queue.CopyFrom(d.DeadLetterQueue(topic=origin_topic, message_id=origin_id))
    user = {k: v for k, v in props.items() if k not in SYSTEM_PROPERTIES}
    return d.Message(topic=d.Resource(name=msg.topic), user_properties=user, system_properties=sp, body=msg.body)
