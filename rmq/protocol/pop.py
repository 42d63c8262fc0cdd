"""POP consumption's wire vocabulary (RocketMQ 5.x, RIP-19): headers, names, receipt handles.

A POP consumer asks the broker for messages (POP_MESSAGE) and gets each with an invisible
time; it acks it (ACK_MESSAGE, BATCH_ACK_MESSAGE) or extends the time
(CHANGE_MESSAGE_INVISIBLETIME), naming the message by its *extraInfo*, the receipt handle:
space-separated fields, as ExtraInfoUtil builds them,

    ckQueueOffset popTime invisibleTime reviveQid retryFlag brokerName queueId queueOffset

`retryFlag` is "0" for the topic itself, "1" for its POP retry topic `%RETRY%<group>_<topic>`
(KeyBuilder's V1, the default) and "2" for the V2 form `%RETRY%<group>+<topic>`. A pop
answer carries the first four in its header, and per queue read the start offset
(startOffsetInfo "flag queueId offset;...") and the messages' offsets (msgOffsetInfo
"flag queueId o1,o2;..."): a client builds each message's extraInfo from them
(`receipt_handles`). The checkpoint and ack records the broker keeps are in
rmq.protocol.bodies.pop.

An orderly pop (order=true) names revive queue 999 (POP_ORDER_REVIVE_QUEUE) in its handles and
counts in orderCountInfo how often each message was popped before ("flag qo<queueId>%<offset>
count" per message popped again, then "flag queueId count", the queue's least): a client sets
a message's reconsumeTimes from it (`order_counts`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .constants import RETRY_PREFIX
from .errors import HeaderError
from .headers import Header

if TYPE_CHECKING:
    from .message import MessageExt

REVIVE_TOPIC_PREFIX = "rmq_sys_REVIVE_LOG_"  # + cluster name (PopAckConstants.REVIVE_TOPIC)
REVIVE_GROUP = "CID_RMQ_SYS_REVIVE_GROUP"  # its consumer offsets are the revive progress
POP_ORDER_REVIVE_QUEUE = 999  # reviveQid of an orderly pop (KeyBuilder)
CK_TAG = "ck"
ACK_TAG = "ack"
BATCH_ACK_TAG = "bAck"
MAX_POP_NUMS = 32  # a pop asks for at most this many messages

# message properties (MessageConst)
POP_CK = "POP_CK"  # a popped retry message's extraInfo, set by the broker
POP_CK_OFFSET = "POP_CK_OFFSET"
FIRST_POP_TIME = "1ST_POP_TIME"  # when the message was first popped (set at its first revive)

NORMAL, RETRY_V1, RETRY_V2 = "0", "1", "2"  # extraInfo's retry flag
_SEP = " "
_QUEUE_OFFSET = "qo"  # orderCountInfo's mark of a per-message entry (ExtraInfoUtil.QUEUE_OFFSET)


def revive_topic(cluster: str) -> str:
    return REVIVE_TOPIC_PREFIX + cluster


def pop_retry_topic(topic: str, group: str, v2: bool = False) -> str:
    """Where a POP group's unacked messages of `topic` come back (KeyBuilder.buildPopRetryTopic)."""
    return f"{RETRY_PREFIX}{group}{'+' if v2 else '_'}{topic}"


def retry_flag(topic: str) -> str:
    """extraInfo's flag for a message read from `topic` (ExtraInfoUtil.getRetry)."""
    if topic.startswith(RETRY_PREFIX):
        return RETRY_V2 if "+" in topic else RETRY_V1
    return NORMAL


def real_topic(topic: str, group: str, flag: str) -> str:
    """The topic a message was popped from, from its origin topic and retry flag."""
    if flag == NORMAL:
        return topic
    if flag in (RETRY_V1, RETRY_V2):
        return pop_retry_topic(topic, group, flag == RETRY_V2)
    raise HeaderError(f"bad retry flag {flag!r} in extraInfo")


@dataclass(frozen=True, slots=True)
class ExtraInfo:
    """A popped message's receipt handle (ExtraInfoUtil)."""

    ck_queue_offset: int  # the checkpoint's start offset
    pop_time: int  # ms since the epoch
    invisible_time: int  # ms
    revive_qid: int
    retry: str  # NORMAL, RETRY_V1 or RETRY_V2
    broker_name: str
    queue_id: int
    queue_offset: int = -1  # the message's own offset; -1: not given (the 7-field form)
    # the message's CommitLog offset, a 9th field as the 5.x proxy's ReceiptHandle has it (for
    # its dead-letter forward); brokers ignore it; -1: not given
    commit_log_offset: int = -1

    def encode(self) -> str:
        fields = [self.ck_queue_offset, self.pop_time, self.invisible_time, self.revive_qid, self.retry]
        fields += [self.broker_name, self.queue_id]
        if self.queue_offset >= 0:
            fields.append(self.queue_offset)
            if self.commit_log_offset >= 0:
                fields.append(self.commit_log_offset)
        return _SEP.join(str(f) for f in fields)

    @classmethod
    def parse(cls, text: str) -> ExtraInfo:
        """HeaderError when it has fewer than 7 fields or a number is not one."""
        parts = text.split(_SEP)
        if len(parts) < 7:
            raise HeaderError(f"extraInfo {text!r} has {len(parts)} fields, wants 7 to 9")
        try:
            return cls(
                int(parts[0]),
                int(parts[1]),
                int(parts[2]),
                int(parts[3]),
                parts[4],
                parts[5],
                int(parts[6]),
                int(parts[7]) if len(parts) > 7 else -1,
                int(parts[8]) if len(parts) > 8 else -1,
            )
        except ValueError:
            raise HeaderError(f"extraInfo {text!r} has a field that is not a number") from None

    @property
    def revive_time(self) -> int:
        return self.pop_time + self.invisible_time

    @property
    def is_order(self) -> bool:
        return self.revive_qid == POP_ORDER_REVIVE_QUEUE


def offset_info(entries: list[tuple[str, int, list[int]]]) -> tuple[str, str]:
    """(startOffsetInfo, msgOffsetInfo) for the queues a pop read: each entry is the topic
    read, its queue id and the offsets returned; the first offset read is the start."""
    starts, msgs = [], []
    for topic, queue_id, offsets in entries:
        flag = retry_flag(topic)
        starts.append(f"{flag}{_SEP}{queue_id}{_SEP}{offsets[0]}")
        msgs.append(f"{flag}{_SEP}{queue_id}{_SEP}{','.join(str(o) for o in offsets)}")
    return ";".join(starts), ";".join(msgs)


def parse_offset_info(text: str | None) -> dict[str, list[int]]:
    """ "flag queueId n[,n…];…" → {"flag@queueId": [n, …]} (ExtraInfoUtil.parseMsgOffsetInfo
    and parseStartOffsetInfo); HeaderError when malformed or a queue repeats."""
    out: dict[str, list[int]] = {}
    if not text:
        return out
    for one in text.split(";"):
        parts = one.split(_SEP)
        if len(parts) != 3:
            raise HeaderError(f"bad offset info {text!r}")
        key = f"{parts[0]}@{parts[1]}"
        if key in out:
            raise HeaderError(f"offset info {text!r} names queue {key} twice")
        try:
            out[key] = [int(n) for n in parts[2].split(",")]
        except ValueError:
            raise HeaderError(f"bad offset in offset info {text!r}") from None
    return out


def receipt_handles(
    header: PopMessageResponseHeader, messages: list[MessageExt], broker_name: str, group: str
) -> list[ExtraInfo]:
    """Each popped message's extraInfo, as a Java client builds it from the answer: the
    POP_CK property when the broker set one (a retry message), else from the start offset
    of its queue in the header."""
    starts = parse_offset_info(header.start_offset_info)
    out = []
    for msg in messages:
        ck = msg.properties.get(POP_CK)
        if ck:
            out.append(ExtraInfo.parse(ck))
            continue
        flag = retry_flag(msg.topic)
        start = starts.get(f"{flag}@{msg.queue_id}")
        if start is None:
            raise HeaderError(f"the pop answer names no start offset for queue {msg.queue_id} of {msg.topic}")
        out.append(
            ExtraInfo(
                start[0],
                header.pop_time,
                header.invisible_time,
                header.revive_qid,
                flag,
                broker_name,
                msg.queue_id,
                msg.queue_offset,
            )
        )
    return out


def order_count_info(topic: str, queue_id: int, counts: dict[int, int], least: int) -> str:
    """One queue's part of orderCountInfo: each message popped before with its count, then
    the queue's least count (buildQueueOffsetOrderCountInfo, buildQueueIdOrderCountInfo)."""
    flag = retry_flag(topic)
    parts = [f"{flag}{_SEP}{_QUEUE_OFFSET}{queue_id}%{offset}{_SEP}{n}" for offset, n in sorted(counts.items())]
    parts.append(f"{flag}{_SEP}{queue_id}{_SEP}{least}")
    return ";".join(parts)


def parse_order_count_info(text: str | None) -> dict[str, int]:
    """orderCountInfo → {"flag@qo<queueId>%<offset>" or "flag@queueId": count}
    (ExtraInfoUtil.parseOrderCountInfo); HeaderError when malformed or a key repeats."""
    out: dict[str, int] = {}
    if not text:
        return out
    for one in text.split(";"):
        parts = one.split(_SEP)
        if len(parts) != 3:
            raise HeaderError(f"bad order count info {text!r}")
        key = f"{parts[0]}@{parts[1]}"
        if key in out:
            raise HeaderError(f"order count info {text!r} names {key} twice")
        try:
            out[key] = int(parts[2])
        except ValueError:
            raise HeaderError(f"bad count in order count info {text!r}") from None
    return out


def order_counts(header: PopMessageResponseHeader, messages: list[MessageExt]) -> None:
    """Set each message's reconsumeTimes to how often an orderly pop returned it before, as a
    Java client does from orderCountInfo: the message's own count, else its queue's."""
    counts = parse_order_count_info(header.order_count_info)
    if not counts:
        return
    for msg in messages:
        flag = retry_flag(msg.topic)
        n = counts.get(f"{flag}@{_QUEUE_OFFSET}{msg.queue_id}%{msg.queue_offset}")
        if n is None:
            n = counts.get(f"{flag}@{msg.queue_id}")
        if n is not None and n > 0:
            msg.reconsume_times = n


# --- headers -------------------------------------------------------------------------


@dataclass(slots=True)
class PopMessageRequestHeader(Header):
    """POP_MESSAGE: `queue_id` -1 pops from every queue of the topic."""

    consumer_group: str
    topic: str
    queue_id: int
    max_msg_nums: int
    invisible_time: int
    poll_time: int
    born_time: int
    init_mode: int
    exp_type: str | None = None
    exp: str | None = None
    order: bool | None = None
    attempt_id: str | None = None


@dataclass(slots=True)
class PopMessageResponseHeader(Header):
    pop_time: int
    invisible_time: int
    revive_qid: int
    rest_num: int
    start_offset_info: str | None = None
    msg_offset_info: str | None = None
    order_count_info: str | None = None


@dataclass(slots=True)
class AckMessageRequestHeader(Header):
    """ACK_MESSAGE: `topic` is the topic the message was read from (its retry topic for a
    retry message), `offset` its queue offset there."""

    consumer_group: str
    topic: str
    queue_id: int
    extra_info: str
    offset: int


@dataclass(slots=True)
class ChangeInvisibleTimeRequestHeader(Header):
    consumer_group: str
    topic: str
    queue_id: int
    extra_info: str
    offset: int
    invisible_time: int


@dataclass(slots=True)
class ChangeInvisibleTimeResponseHeader(Header):
    """The new handle's times: a client replaces popTime, invisibleTime and reviveQid (and
    ckQueueOffset with the message's offset) in its extraInfo."""

    pop_time: int
    invisible_time: int
    revive_qid: int


@dataclass(slots=True)
class PeekMessageRequestHeader(Header):
    """PEEK_MESSAGE: up to `max_msg_nums` messages the group would pop next, changing nothing."""

    topic: str
    queue_id: int  # -1: every queue
    max_msg_nums: int
    consumer_group: str


@dataclass(slots=True)
class NotificationRequestHeader(Header):
    """NOTIFICATION: answer once the group has a message to pop (long polling, as a pop)."""

    consumer_group: str
    topic: str
    queue_id: int  # -1: every queue
    poll_time: int
    born_time: int
    order: bool | None = None
    attempt_id: str | None = None


@dataclass(slots=True)
class NotificationResponseHeader(Header):
    has_msg: bool
    polling_full: bool = False


@dataclass(slots=True)
class PollingInfoRequestHeader(Header):
    """POLLING_INFO: how many pops of the group wait on (topic, queueId) (-1: the pops of
    every queue)."""

    consumer_group: str
    topic: str
    queue_id: int


@dataclass(slots=True)
class PollingInfoResponseHeader(Header):
    polling_num: int
