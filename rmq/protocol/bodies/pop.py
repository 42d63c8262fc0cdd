"""POP's records in the revive topic, and BATCH_ACK_MESSAGE's body.

- PopCheckPoint: what one pop of one queue returned (tag "ck"): start offset, the returned
  messages' offsets as differences from it, pop time and invisible time, and a bit map of
  those acked.
- AckMsg (tag "ack"), BatchAckMsg (tag "bAck"): acks of a checkpoint's messages.
- BatchAckMessageRequestBody with its BatchAck entries: a client's acks in one request, the
  acked messages as a bit set over the offsets from a start offset.
- OrderInfo and ConsumerOrderInfoWrapper: an orderly POP group's in-flight batch per queue
  (ConsumerOrderInfoManager.OrderInfo) and config/consumerOrderInfo.json, the table of them.

fastjson's short names (@JSONField) are written, sorted; the long names (alternateNames, and
the getters' names) are read too.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from .. import body
from ..errors import BodyError
from . import _fields as F


def _get(obj: dict[Any, Any], *names: str) -> Any:
    for name in names:
        if name in obj:
            return obj[name]
    return None


def _need(obj: dict[Any, Any], what: str, *names: str) -> Any:
    value = _get(obj, *names)
    if value is None:
        raise BodyError(f"{what} has no {names[0]!r}")
    return value


def _merge_key(topic: str, group: str, queue_id: int, start: int, pop_time: int, broker: str | None) -> str:
    """PopReviveService's merge key: Java's concatenation, a null broker name as "null"."""
    return f"{topic}{group}{queue_id}{start}{pop_time}{'null' if broker is None else broker}"


@dataclass(frozen=True, slots=True)
class PopCheckPoint:
    """One pop of one queue, kept in the revive topic until acked or revived."""

    start_offset: int
    pop_time: int
    invisible_time: int
    num: int  # messages returned (a Java byte)
    queue_id: int
    topic: str  # the topic read: the topic itself or its POP retry topic
    cid: str  # the consumer group
    bit_map: int = 0  # bit i set: message i acked
    revive_offset: int = 0
    queue_offset_diff: tuple[int, ...] = ()  # message i's offset - start_offset
    broker_name: str | None = None
    re_put_times: str | None = None

    @property
    def revive_time(self) -> int:
        return self.pop_time + self.invisible_time

    def offset_at(self, index: int) -> int:
        """The queue offset of message `index` (ackOffsetByIndex)."""
        if not self.queue_offset_diff:
            return self.start_offset + index
        return self.start_offset + self.queue_offset_diff[index]

    def index_of(self, offset: int) -> int:
        """The index of the message at `offset`, -1 when not this checkpoint's (indexOfAck)."""
        if offset < self.start_offset:
            return -1
        if not self.queue_offset_diff:
            return offset - self.start_offset if offset - self.start_offset < self.num else -1
        try:
            return self.queue_offset_diff.index(offset - self.start_offset)
        except ValueError:
            return -1

    def with_acked(self, index: int) -> PopCheckPoint:
        return replace(self, bit_map=self.bit_map | (1 << index))

    @property
    def all_acked(self) -> bool:
        return self.bit_map & ((1 << self.num) - 1) == (1 << self.num) - 1

    def key(self) -> str:
        """What acks name a checkpoint by: topic, consumer group, queue, start offset, pop time
        (the merge key of PopReviveService)."""
        return _merge_key(self.topic, self.cid, self.queue_id, self.start_offset, self.pop_time, self.broker_name)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"bm": self.bit_map}
        if self.broker_name is not None:
            out["bn"] = self.broker_name
        out["c"] = self.cid
        if self.queue_offset_diff:
            out["d"] = list(self.queue_offset_diff)
        out.update(it=self.invisible_time, n=self.num, pt=self.pop_time, q=self.queue_id, ro=self.revive_offset)
        if self.re_put_times is not None:
            out["rp"] = self.re_put_times
        out.update(so=self.start_offset, t=self.topic)
        return out

    @classmethod
    def from_json(cls, obj: Any) -> PopCheckPoint:
        o = F.obj(obj, "PopCheckPoint")
        what = "PopCheckPoint"
        diff = F.array(_get(o, "d", "queueOffsetDiff"), "PopCheckPoint.d")
        bn, rp = _get(o, "bn", "brokerName"), _get(o, "rp", "rePutTimes")
        return cls(
            start_offset=F.integer(_need(o, what, "so", "startOffset"), "PopCheckPoint.so"),
            pop_time=F.integer(_need(o, what, "pt", "popTime"), "PopCheckPoint.pt"),
            invisible_time=F.integer(_need(o, what, "it", "invisibleTime"), "PopCheckPoint.it"),
            num=F.integer(_need(o, what, "n", "num"), "PopCheckPoint.n"),
            queue_id=F.integer(_need(o, what, "q", "queueId"), "PopCheckPoint.q"),
            topic=F.text(_need(o, what, "t", "topic"), "PopCheckPoint.t"),
            cid=F.text(_need(o, what, "c", "cId", "cid"), "PopCheckPoint.c"),
            bit_map=F.integer(_get(o, "bm", "bitMap") or 0, "PopCheckPoint.bm"),
            revive_offset=F.integer(_get(o, "ro", "reviveOffset") or 0, "PopCheckPoint.ro"),
            queue_offset_diff=tuple(F.integer(d, "PopCheckPoint.d") for d in diff),
            broker_name=None if bn is None else F.text(bn, "PopCheckPoint.bn"),
            re_put_times=None if rp is None else F.text(rp, "PopCheckPoint.rp"),
        )


@dataclass(frozen=True, slots=True)
class AckMsg:
    """An ack of one message (tag "ack"), or with `ack_offsets` of several (BatchAckMsg,
    tag "bAck", whose ack_offset is -1)."""

    ack_offset: int
    start_offset: int
    consumer_group: str
    topic: str
    queue_id: int
    pop_time: int
    broker_name: str | None = None
    ack_offsets: tuple[int, ...] | None = None  # BatchAckMsg's ackOffsetList

    @property
    def is_batch(self) -> bool:
        return self.ack_offsets is not None

    @property
    def offsets(self) -> tuple[int, ...]:
        return self.ack_offsets if self.ack_offsets is not None else (self.ack_offset,)

    def key(self) -> str:
        """The key of the checkpoint this acks (PopCheckPoint.key)."""
        return _merge_key(
            self.topic, self.consumer_group, self.queue_id, self.start_offset, self.pop_time, self.broker_name
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"ao": self.ack_offset}
        if self.ack_offsets is not None:
            out["aol"] = list(self.ack_offsets)
        if self.broker_name is not None:
            out["bn"] = self.broker_name
        out.update(c=self.consumer_group, pt=self.pop_time, q=self.queue_id, so=self.start_offset, t=self.topic)
        return out

    @classmethod
    def from_json(cls, obj: Any) -> AckMsg:
        o = F.obj(obj, "AckMsg")
        what = "AckMsg"
        aol = _get(o, "aol", "ackOffsetList")
        bn = _get(o, "bn", "brokerName")
        return cls(
            ack_offset=F.integer(_get(o, "ao", "ackOffset") if aol is None else -1, "AckMsg.ao"),
            start_offset=F.integer(_need(o, what, "so", "startOffset"), "AckMsg.so"),
            consumer_group=F.text(_need(o, what, "c", "consumerGroup"), "AckMsg.c"),
            topic=F.text(_need(o, what, "t", "topic"), "AckMsg.t"),
            queue_id=F.integer(_need(o, what, "q", "queueId"), "AckMsg.q"),
            pop_time=F.integer(_need(o, what, "pt", "popTime"), "AckMsg.pt"),
            broker_name=None if bn is None else F.text(bn, "AckMsg.bn"),
            ack_offsets=None if aol is None else tuple(F.integer(a, "AckMsg.aol") for a in F.array(aol, "aol")),
        )


def _bits_to_bytes(bits: frozenset[int]) -> bytes:
    """java.util.BitSet.toByteArray: little-endian, no trailing zero bytes."""
    value = sum(1 << i for i in bits)
    return value.to_bytes((value.bit_length() + 7) // 8, "little")


def _bytes_to_bits(data: bytes) -> frozenset[int]:
    value = int.from_bytes(data, "little")
    return frozenset(i for i in range(value.bit_length()) if value >> i & 1)


@dataclass(frozen=True, slots=True)
class BatchAck:
    """Acks of messages popped together from one queue: bit i acks start_offset + i."""

    consumer_group: str
    topic: str  # the origin topic; `retry` says whether the messages came from its retry topic
    retry: str
    start_offset: int
    queue_id: int
    revive_queue_id: int
    pop_time: int
    invisible_time: int
    bits: frozenset[int] = field(default_factory=frozenset)

    def to_json(self) -> dict[str, Any]:
        return {
            "b": base64.b64encode(_bits_to_bytes(self.bits)).decode("ascii"),  # fastjson's byte[]
            "c": self.consumer_group,
            "it": self.invisible_time,
            "pt": self.pop_time,
            "q": self.queue_id,
            "r": self.retry,
            "rq": self.revive_queue_id,
            "so": self.start_offset,
            "t": self.topic,
        }

    @classmethod
    def from_json(cls, obj: Any) -> BatchAck:
        o = F.obj(obj, "BatchAck")
        what = "BatchAck"
        raw = _get(o, "b", "bitSet")
        try:
            data = b"" if raw is None else base64.b64decode(F.text(raw, "BatchAck.b"), validate=True)
        except (binascii.Error, ValueError):
            raise BodyError(f"BatchAck.b is not base64: {raw!r:.80}") from None
        return cls(
            consumer_group=F.text(_need(o, what, "c", "consumerGroup"), "BatchAck.c"),
            topic=F.text(_need(o, what, "t", "topic"), "BatchAck.t"),
            retry=F.text(_get(o, "r", "retry") or "0", "BatchAck.r"),
            start_offset=F.integer(_need(o, what, "so", "startOffset"), "BatchAck.so"),
            queue_id=F.integer(_need(o, what, "q", "queueId"), "BatchAck.q"),
            revive_queue_id=F.integer(_need(o, what, "rq", "reviveQueueId"), "BatchAck.rq"),
            pop_time=F.integer(_need(o, what, "pt", "popTime"), "BatchAck.pt"),
            invisible_time=F.integer(_need(o, what, "it", "invisibleTime"), "BatchAck.it"),
            bits=_bytes_to_bits(data),
        )


@dataclass(frozen=True, slots=True)
class BatchAckMessageRequestBody:
    broker_name: str | None = None
    acks: tuple[BatchAck, ...] = ()

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"acks": [a.to_json() for a in self.acks]}
        if self.broker_name is not None:
            out["brokerName"] = self.broker_name
        return out

    @classmethod
    def from_json(cls, obj: Any) -> BatchAckMessageRequestBody:
        o = F.obj(obj, "BatchAckMessageRequestBody")
        bn = o.get("brokerName")
        return cls(
            None if bn is None else F.text(bn, "brokerName"),
            tuple(BatchAck.from_json(a) for a in F.array(o.get("acks"), "acks")),
        )


@dataclass(frozen=True, slots=True)
class OrderInfo:
    """The batch an orderly POP group has in flight on one queue (ConsumerOrderInfoManager's
    OrderInfo): while one of its messages is unacked and still invisible, no other pop of the
    group gets the queue. Acks set bits of `commit_bits`; the group's offset is the first
    unacked message. Times are epoch milliseconds."""

    pop_time: int
    queue_offsets: tuple[int, ...]  # the messages popped ("o": Java keeps the first and differences)
    invisible_time: int | None = None  # "i"
    next_visible: dict[int, int] | None = None  # "ot": queue offset → a changed invisible time's end
    consumed: dict[int, int] | None = None  # "oc": queue offset → times popped before this batch
    last_consume: int = 0  # "l"
    commit_bits: int = 0  # "cm": bit i set: message i acked
    attempt_id: str | None = None  # "a": the pop's attemptId; a pop repeating it is not blocked

    def acked(self, index: int) -> bool:
        return bool(self.commit_bits >> index & 1)

    def _visible_at(self, index: int, invisible_time: int) -> int:
        at = self.pop_time + invisible_time
        if self.next_visible is not None:
            at = self.next_visible.get(self.queue_offsets[index], at)
        return at

    def need_block(self, attempt_id: str | None, invisible_time: int, now: int) -> bool:
        """Whether a pop (with `attempt_id` and `invisible_time`) must leave the queue alone:
        a message of the batch is unacked and still invisible (OrderInfo.needBlock)."""
        if not self.queue_offsets or (self.attempt_id is not None and self.attempt_id == attempt_id):
            return False
        invisible = invisible_time
        if self.invisible_time is not None and self.invisible_time > 0:
            invisible = self.invisible_time
        return any(not self.acked(i) and now < self._visible_at(i, invisible) for i in range(len(self.queue_offsets)))

    def lock_free_time(self, now: int) -> int | None:
        """When the queue is free for the next pop: the first unacked message's visible
        time, `now` when nothing blocks, None when unknown (getLockFreeTimestamp)."""
        if not self.queue_offsets:
            return None
        for i in range(len(self.queue_offsets)):
            if not self.acked(i):
                if self.invisible_time is None or self.invisible_time <= 0:
                    return None
                at = self._visible_at(i, self.invisible_time)
                if now < at:
                    return at
        return now

    def next_offset(self) -> int:
        """The group's offset after the acks so far: the first unacked message, or past the
        batch when all are acked; -2 for an empty batch (getNextOffset)."""
        if not self.queue_offsets:
            return -2
        for i, offset in enumerate(self.queue_offsets):
            if not self.acked(i):
                return offset
        return self.queue_offsets[-1] + 1

    def with_commit(self, offset: int) -> OrderInfo | None:
        """The batch with the message at `offset` acked; None when it is not the batch's."""
        try:
            index = self.queue_offsets.index(offset)
        except ValueError:
            return None
        return replace(self, commit_bits=self.commit_bits | (1 << index))

    def with_next_visible(self, offset: int, at: int) -> OrderInfo:
        return replace(self, next_visible={**(self.next_visible or {}), offset: at})

    def counted_after(self, previous: OrderInfo) -> OrderInfo:
        """This new batch with its messages' pop counts from the batch it replaces: one more
        for each message `previous` had too, or the same counts for a pop repeating the
        previous one's attemptId (mergeOffsetConsumedCount)."""
        before = previous.consumed or {}
        if previous.attempt_id is not None and previous.attempt_id == self.attempt_id:
            return replace(self, consumed=dict(before))
        had = set(previous.queue_offsets)
        return replace(self, consumed={o: before.get(o, 0) + 1 for o in self.queue_offsets if o in had})

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.attempt_id is not None:
            out["a"] = self.attempt_id
        out["cm"] = self.commit_bits
        if self.invisible_time is not None:
            out["i"] = self.invisible_time
        out["l"] = self.last_consume
        first = self.queue_offsets[0] if self.queue_offsets else 0
        out["o"] = [o if i == 0 else o - first for i, o in enumerate(self.queue_offsets)]
        if self.consumed is not None:
            out["oc"] = dict(sorted(self.consumed.items()))
        if self.next_visible is not None:
            out["ot"] = dict(sorted(self.next_visible.items()))
        out["popTime"] = self.pop_time
        return out

    @classmethod
    def from_json(cls, obj: Any) -> OrderInfo:
        o = F.obj(obj, "OrderInfo")
        raw = [F.integer(n, "OrderInfo.o") for n in F.array(_get(o, "o", "offsetList"), "OrderInfo.o")]
        offsets = tuple(n if i == 0 else raw[0] + n for i, n in enumerate(raw))
        it, a = _get(o, "i", "invisibleTime"), _get(o, "a", "attemptId")
        return cls(
            pop_time=F.integer(_get(o, "popTime") or 0, "OrderInfo.popTime"),
            queue_offsets=offsets,
            invisible_time=None if it is None else F.integer(it, "OrderInfo.i"),
            next_visible=_offset_map(_get(o, "ot", "offsetNextVisibleTime"), "OrderInfo.ot"),
            consumed=_offset_map(_get(o, "oc", "offsetConsumedCount"), "OrderInfo.oc"),
            last_consume=F.integer(_get(o, "l", "lastConsumeTimestamp") or 0, "OrderInfo.l"),
            commit_bits=F.integer(_get(o, "cm", "commitOffsetBit") or 0, "OrderInfo.cm"),
            attempt_id=None if a is None else F.text(a, "OrderInfo.a"),
        )


def _offset_map(value: Any, what: str) -> dict[int, int] | None:
    if value is None:
        return None
    return {F.integer(k, what): F.integer(v, what) for k, v in F.obj(value, what).items()}


@dataclass(frozen=True, slots=True)
class ConsumerOrderInfoWrapper:
    """config/consumerOrderInfo.json: "topic@group" → queue id → OrderInfo. Queue ids and
    the offsets inside are integer keys: written with `legacy=True`, as fastjson writes them."""

    table: dict[str, dict[int, OrderInfo]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"table": self.table}

    def pieces(self) -> Iterator[bytes]:
        """`body.dumps(self.to_json(), legacy=True)` in pieces, one topic@group each."""
        yield b'{"table":'
        yield from body.dumps_members(self.table.items(), legacy=True)
        yield b"}"

    @classmethod
    def from_json(cls, obj: Any) -> ConsumerOrderInfoWrapper:
        table = F.table(F.obj(obj, "ConsumerOrderInfoManager").get("table"), "table")
        return cls(
            {
                F.text(key, "a table key"): {
                    F.integer(qid, f"{key} queue id"): OrderInfo.from_json(info)
                    for qid, info in F.obj(queues, str(key)).items()
                }
                for key, queues in table.items()
            }
        )
