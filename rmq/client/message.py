"""What applications send and get back: Message, MessageQueue, SendResult.

`Message` is rmq.protocol's message (topic, body, flag, properties) with a constructor
for the usual properties (tags, keys, delay level, user properties), so everything the
record codecs accept, the client accepts. Received messages are
`rmq.protocol.message.MessageExt`; `msg.msg_id` is the UNIQ_KEY when present.

This module also holds the producer's pure message work: validation (RocketMQ's
Validators.checkMessage), body compression, and splitting a batch to fit the maximum
message size.
"""

from __future__ import annotations

import enum
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from rmq.protocol import properties as P
from rmq.protocol.body import MessageQueue as MessageQueue
from rmq.protocol.constants import NOT_ALLOWED_SEND_TOPICS, RETRY_PREFIX, TOPIC_MAX_LENGTH, VALID_TOPIC
from rmq.protocol.constants import dlq_topic as dlq_topic
from rmq.protocol.constants import retry_topic as retry_topic
from rmq.protocol.message import COMPRESSED_FLAG, MessageExt, compress
from rmq.protocol.message import Message as _ProtocolMessage

from .errors import MQClientError

__all__ = [
    "MQMessageError",
    "Message",
    "MessageExt",
    "MessageQueue",
    "SendResult",
    "SendStatus",
    "dlq_topic",
    "retry_topic",
]

DEFAULT_MAX_MESSAGE_SIZE = 4 * 1024 * 1024
COMPRESS_OVER = 4096
COMPRESS_LEVEL = 5
# Property names the system owns (MessageConst.STRING_HASH_SET): not user properties.
RESERVED_PROPERTIES = frozenset(
    {
        P.KEYS, P.TAGS, P.WAIT, P.DELAY, P.RETRY_TOPIC, P.REAL_TOPIC, P.REAL_QID, P.TRAN_MSG,
        P.PGROUP, P.MIN_OFFSET, P.MAX_OFFSET, P.BUYER_ID, P.ORIGIN_MESSAGE_ID, P.TRANSFER_FLAG,
        P.CORRECTION_FLAG, P.MQ2_FLAG, P.RECONSUME_TIME, P.MSG_REGION, P.TRACE_ON, P.UNIQ_KEY,
        P.MAX_RECONSUME_TIMES, P.CONSUME_START_TIME, P.TRAN_PREPARED_QUEUE_OFFSET,
        P.TRANSACTION_CHECK_TIMES, P.CHECK_IMMUNITY_TIME_IN_SECONDS, P.INSTANCE_ID,
        P.CORRELATION_ID, P.REPLY_TO_CLIENT, P.TTL, P.ARRIVE_TIME, P.PUSH_REPLY_TIME, P.CLUSTER,
        P.MSG_TYPE,
    }
)  # fmt: skip


class MQMessageError(MQClientError):
    """A message the broker would refuse: bad topic, empty or oversized body, bad batch."""

    response_code = 13  # MESSAGE_ILLEGAL


class Message(_ProtocolMessage):
    """A message to send.

    Args:
      topic: destination topic.
      body: payload; a str is encoded as UTF-8.
      tags: one tag (consumers filter on it; its hash goes into the consume queue).
      keys: business keys (a space-separated string or a sequence), indexed by the broker.
      delay_level: 1..18 (1s 5s 10s 30s 1m ... 2h), 0 for none.
      properties: user properties, copied.
      flag: the user flag stored with the message.
      wait_store_msg_ok: False sends WAIT=false (do not wait for flush/replication).
    """

    __slots__ = ()

    def __init__(
        self,
        topic: str,
        body: bytes | str = b"",
        *,
        tags: str | None = None,
        keys: str | Sequence[str] | None = None,
        delay_level: int = 0,
        properties: Mapping[str, str] | None = None,
        flag: int = 0,
        wait_store_msg_ok: bool = True,
    ) -> None:
        data = body.encode("utf-8") if isinstance(body, str) else bytes(body)
        super().__init__(topic, data, flag, dict(properties or {}))
        if tags:
            self.properties[P.TAGS] = tags
        if keys:
            self.properties[P.KEYS] = keys if isinstance(keys, str) else P.KEY_SEPARATOR.join(keys)
        if delay_level:
            self.delay_level = delay_level
        if not wait_store_msg_ok:
            self.properties[P.WAIT] = "false"

    @property
    def delay_level(self) -> int:
        value = self.properties.get(P.DELAY)
        return int(value) if value and value.lstrip("-").isdigit() else 0

    @delay_level.setter
    def delay_level(self, level: int) -> None:
        if level:
            self.properties[P.DELAY] = str(level)
        else:
            self.properties.pop(P.DELAY, None)

    @property
    def wait_store_msg_ok(self) -> bool:
        return self.properties.get(P.WAIT) != "false"

    def put_user_property(self, name: str, value: str) -> None:
        """Set a user property (RocketMQ's putUserProperty); reserved names are refused."""
        if not name or not value:
            raise MQMessageError("a user property needs a non-empty name and value")
        if name in RESERVED_PROPERTIES:
            raise MQMessageError(f"the property {name!r} is used by the system")
        self.properties[name] = value


class SendStatus(enum.Enum):
    SEND_OK = "SEND_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, slots=True)
class SendResult:
    """The broker's answer to a send.

    `msg_id` is the client id (UNIQ_KEY; comma-joined for a batch), `offset_msg_id` the
    broker's (store host + CommitLog offset), `queue_offset` the (first) message's index
    in its queue. `str()` reads like Java's SendResult.toString().
    """

    status: SendStatus
    msg_id: str
    offset_msg_id: str
    message_queue: MessageQueue
    queue_offset: int
    transaction_id: str | None = None
    region_id: str = "DefaultRegion"
    trace_on: bool = True

    def __str__(self) -> str:
        return (
            f"SendResult [sendStatus={self.status}, msgId={self.msg_id}, offsetMsgId={self.offset_msg_id}, "
            f"messageQueue={self.message_queue}, queueOffset={self.queue_offset}]"
        )


_VALID_TOPICS: set[str] = set()  # topics that passed check_topic: a producer sends to few


def check_topic(topic: str) -> None:
    """Validators.checkTopic plus the not-allowed-to-send set."""
    if topic in _VALID_TOPICS:
        return
    if not topic or not topic.strip():
        raise MQMessageError("the specified topic is blank")
    if len(topic.encode("utf-8")) > TOPIC_MAX_LENGTH:
        raise MQMessageError(f"the specified topic is longer than topic max length {TOPIC_MAX_LENGTH}")
    if not VALID_TOPIC.fullmatch(topic):
        raise MQMessageError(
            f"the specified topic[{topic}] contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
        )
    if topic in NOT_ALLOWED_SEND_TOPICS:
        raise MQMessageError(f"sending message to topic[{topic}] is forbidden")
    if len(_VALID_TOPICS) >= 4096:
        _VALID_TOPICS.clear()
    _VALID_TOPICS.add(topic)


def check_message(msg: _ProtocolMessage, max_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> None:
    """Validators.checkMessage: a valid topic and a body of 1..max_size bytes."""
    check_topic(msg.topic)
    if not msg.body:
        raise MQMessageError("the message body length is zero")
    if len(msg.body) > max_size:
        raise MQMessageError(f"the message body size over max value, MAX: {max_size}")


def compress_body(body: bytes, threshold: int = COMPRESS_OVER, codec: str = "zlib") -> tuple[bytes, int]:
    """(wire body, sysFlag bits) for bodies ≥ threshold: zlib level 5 with COMPRESSED_FLAG (as
    4.x clients send it), or LZ4 / ZSTD with RocketMQ 5.x's compression-type bits."""
    if len(body) >= threshold:
        if codec == "zlib":
            return zlib.compress(body, COMPRESS_LEVEL), COMPRESSED_FLAG
        return compress(body, codec)
    return body, 0


# the longest id a send gives a message that has none: 56 hex characters from an IPv6
# client, 32 from an IPv4 one (ids.py)
LONGEST_UNIQ_KEY = 56


def batch_item_size(msg: _ProtocolMessage, uniq_key_length: int = LONGEST_UNIQ_KEY) -> int:
    """Bytes `msg` takes in a batch body (MessageDecoder.encodeMessage) once sent: a message
    without a UNIQ_KEY gets one of `uniq_key_length` characters when its batch leaves."""
    props = P.encode_properties(msg.properties).encode("utf-8")
    size = 20 + len(msg.body) + 2 + len(props)
    if not msg.properties.get(P.UNIQ_KEY):
        size += len(P.UNIQ_KEY) + 1 + uniq_key_length + (1 if props else 0)
    return size


def check_batch(msgs: Sequence[_ProtocolMessage]) -> str:
    """MessageBatch.generateFromList's rules; returns the common topic."""
    if not msgs:
        raise MQMessageError("a batch needs at least one message")
    topic = msgs[0].topic
    wait = msgs[0].properties.get(P.WAIT) != "false"
    for m in msgs:
        if m.topic != topic:
            raise MQMessageError("the topic of the messages in one batch should be the same")
        if m.topic.startswith(RETRY_PREFIX):
            raise MQMessageError("retry group message is not supported for batch")
        if P.DELAY in m.properties and m.properties[P.DELAY] not in ("", "0"):
            raise MQMessageError("TimeDelayLevel is not supported for batching")
        if (m.properties.get(P.WAIT) != "false") != wait:
            raise MQMessageError("the waitStoreMsgOK of the messages in one batch should be the same")
        check_message(m)
    return topic


def split_batch(
    msgs: Iterable[_ProtocolMessage], max_size: int = DEFAULT_MAX_MESSAGE_SIZE, uniq_key_length: int = LONGEST_UNIQ_KEY
) -> list[list[_ProtocolMessage]]:
    """Cut `msgs` into consecutive batches whose bodies stay within `max_size` bytes, the ids
    of `uniq_key_length` characters a send adds included.

    Raises MQMessageError if one message alone is larger than `max_size`.
    """
    out: list[list[_ProtocolMessage]] = []
    current: list[_ProtocolMessage] = []
    size = 0
    for m in msgs:
        item = batch_item_size(m, uniq_key_length)
        if item > max_size:
            raise MQMessageError(f"a message of {item} bytes cannot fit a batch of at most {max_size} bytes")
        if current and size + item > max_size:
            out.append(current)
            current, size = [], 0
        current.append(m)
        size += item
    if current:
        out.append(current)
    return out
