"""POP's revive log: checkpoints and acks in rmq_sys_REVIVE_LOG_<cluster>, and the service
that brings unacked messages back (PopReviveService).

Every pop of a queue appends a checkpoint (tag "ck": start offset, the messages' offsets,
pop time and invisible time) to one queue of the revive topic before it answers; an ack
appends an ack (tag "ack" or "bAck") to the same queue. A revive task per queue reads its
queue in order, keeps the checkpoints not yet settled in memory, marks the acks on them,
and once a checkpoint's invisible time is over re-puts each message it still has unacked
into the group's POP retry topic `%RETRY%<group>_<topic>` with reconsumeTimes + 1, or into
`%DLQ%<group>` when it used up the group's retries (routing.to_dead_letters).

Progress is the consumer offset of CID_RMQ_SYS_REVIVE_GROUP on each revive queue (in
consumerOffset.json): the offset of the oldest checkpoint still pending, or the read
position when none is. A restart reads again from there, so a checkpoint is dropped from
the log's view only once all its messages were acked or re-put: a popped message is never
lost. The file lags (5 s), so each re-put goes in with an ack of the message, in one write:
a restart that reads a checkpoint again finds what was revived settled, and revives
nothing twice. After a crash the groups' offsets, which lag as much, are caught up from
the checkpoints (recover_pop_offsets; docs/pop.md, "Restarts").

RocketMQ 5 delays checkpoints and acks through its timer wheel so that they reach the revive
queue near their revive time; here they are appended at once and the pending ones kept in
memory (the memory and the restart scan grow with the invisible time of what is in flight).
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING

import trio

from rmq.protocol import properties as P
from rmq.protocol.bodies.pop import AckMsg, PopCheckPoint
from rmq.protocol.body import dumps, loads
from rmq.protocol.constants import PERM_READ, PERM_WRITE, RETRY_PREFIX, dlq_topic
from rmq.protocol.errors import ProtocolError
from rmq.protocol.message import MessageDraft, decode_record, redraft
from rmq.protocol.pop import (
    ACK_TAG,
    BATCH_ACK_TAG,
    CK_TAG,
    FIRST_POP_TIME,
    POP_CK,
    REVIVE_GROUP,
    pop_retry_topic,
    revive_topic,
)
from rmq.store.results import GetMessageStatus

from .routing import to_dead_letters

if TYPE_CHECKING:
    from collections.abc import Iterator

    from rmq.store.results import PutMessageResult

    from .parts import BrokerParts

log = logging.getLogger("rmq.broker.revive")

READ_BATCH = 32  # revive-queue entries read at a time
READ_ROUNDS = 1000  # batches one read takes in at most; the rest on the next round
RECOVERY_ROUNDS = 1 << 40  # the whole queue (the read ends where the queue does)
RETRY_QUEUE_NUMS = 1  # queues of a POP retry topic (PopAckConstants.retryQueueNum)


def ck_unique_id(ck: PopCheckPoint) -> str:
    """The UNIQ_KEY of a checkpoint record (PopMessageProcessor.genCkUniqueId)."""
    return f"{ck.topic}@{ck.queue_id}@{ck.start_offset}@{ck.cid}@{ck.pop_time}@{ck.broker_name}@{CK_TAG}"


def ack_unique_id(ack: AckMsg) -> str:
    """The UNIQ_KEY of an ack record (genAckUniqueId, genBatchAckUniqueId)."""
    if ack.is_batch:
        offsets = "[" + ", ".join(str(o) for o in ack.offsets) + "]"
        return f"{ack.topic}@{ack.queue_id}@{offsets}@{ack.consumer_group}@{ack.pop_time}@{BATCH_ACK_TAG}"
    return (
        f"{ack.topic}@{ack.queue_id}@{ack.ack_offset}@{ack.consumer_group}@{ack.pop_time}@{ack.broker_name}@{ACK_TAG}"
    )


async def append_checkpoint(broker: BrokerParts, ck: PopCheckPoint, revive_qid: int) -> PutMessageResult:
    """Append `ck` to revive queue `revive_qid`; the answer waits for its flush (and slave)."""
    props = {P.TAGS: CK_TAG, P.UNIQ_KEY: ck_unique_id(ck)}
    return await broker.store.put(_draft(broker, revive_qid, dumps(ck.to_json()), props))


async def append_ack(broker: BrokerParts, ack: AckMsg, revive_qid: int) -> PutMessageResult:
    return await broker.store.put(_ack_draft(broker, ack, revive_qid))


def _ack_draft(broker: BrokerParts, ack: AckMsg, revive_qid: int) -> MessageDraft:
    props = {P.TAGS: BATCH_ACK_TAG if ack.is_batch else ACK_TAG, P.UNIQ_KEY: ack_unique_id(ack)}
    return _draft(broker, revive_qid, dumps(ack.to_json()), props)


def _draft(broker: BrokerParts, revive_qid: int, body: bytes, props: dict[str, str]) -> MessageDraft:
    return MessageDraft(
        revive_topic(broker.config.broker_cluster_name),
        revive_qid,
        body,
        properties=props,
        born_timestamp=broker.clock_ms(),
        born_host=broker.store_host,
        store_host=broker.store_host,
        wait=True,
    )


class ReviveQueue:
    """One revive queue's reader: the checkpoints pending on it, by key, in log order."""

    def __init__(self, broker: BrokerParts, queue_id: int) -> None:
        self.broker = broker
        self.queue_id = queue_id
        self.topic = revive_topic(broker.config.broker_cluster_name)
        self.pending: dict[int, PopCheckPoint] = {}  # by revive-queue offset, in log order
        self._by_key: dict[str, list[int]] = {}  # PopCheckPoint.key() → revive offsets
        self.revived = 0  # messages re-put (retry or dead letters)
        committed = broker.offsets.query(REVIVE_GROUP, self.topic, queue_id)
        self.offset = max(committed, broker.message_store.get_min_offset_in_queue(self.topic, queue_id))
        self._committed = self.offset  # an idle revive queue writes no offset

    @property
    def progress(self) -> int:
        """Where a restart reads again: the oldest pending checkpoint, else the read position."""
        return min((ck.revive_offset for ck in self.pending.values()), default=self.offset)

    def read(self) -> None:
        """Take in what was appended since the last read (up to READ_ROUNDS batches)."""
        for item, offset in self.records(READ_ROUNDS):
            if isinstance(item, PopCheckPoint):
                if offset not in self.pending:
                    self.pending[offset] = replace(item, revive_offset=offset)
                    self._by_key.setdefault(item.key(), []).append(offset)
            else:
                self._ack(item)

    def records(self, rounds: int) -> Iterator[tuple[PopCheckPoint | AckMsg, int]]:
        """The checkpoints and acks from the read position on (up to `rounds` batches), with
        their offsets; the read position moves past each batch."""
        store = self.broker.message_store
        for _ in range(rounds):
            result = store.get_message(self.topic, self.queue_id, self.offset, READ_BATCH)
            for record, offset in zip(result.records, result.queue_offsets, strict=True):
                item = self._parse(record, offset)
                if item is not None:
                    yield item, offset
            moved = result.next_begin_offset != self.offset
            self.offset = result.next_begin_offset
            if result.status is not GetMessageStatus.FOUND or not moved:
                return

    def _parse(self, record: bytes, offset: int) -> PopCheckPoint | AckMsg | None:
        try:
            msg = decode_record(record)[0]
            tag = msg.properties.get(P.TAGS)
            if tag == CK_TAG:
                return PopCheckPoint.from_json(loads(msg.body))
            if tag in (ACK_TAG, BATCH_ACK_TAG):
                return AckMsg.from_json(loads(msg.body))
        except ProtocolError as exc:  # not ours to fix: skip it, as RocketMQ does
            log.warning("revive queue %d: unreadable record at offset %d: %s", self.queue_id, offset, exc)
        return None

    def _ack(self, ack: AckMsg) -> None:
        """Mark the acked messages on the oldest checkpoint of the ack's key that has them
        unacked (a change of invisible time in the pop's millisecond makes two of one key)."""
        for offset in ack.offsets:
            for revive_offset in self._by_key.get(ack.key(), ()):
                ck = self.pending[revive_offset]
                index = ck.index_of(offset)
                if index >= 0 and not ck.bit_map >> index & 1:
                    self._settle(ck.with_acked(index))
                    break

    def _settle(self, ck: PopCheckPoint) -> None:
        """Keep `ck` as it is now, or drop it once every message is acked or revived."""
        if not ck.all_acked:
            self.pending[ck.revive_offset] = ck
            return
        del self.pending[ck.revive_offset]
        same = self._by_key[ck.key()]
        same.remove(ck.revive_offset)
        if not same:
            del self._by_key[ck.key()]

    def next_due(self) -> int | None:
        """The earliest revive time pending, in clock ms."""
        return min((ck.revive_time for ck in self.pending.values()), default=None)

    async def revive_due(self) -> None:
        """Re-put the unacked messages of every checkpoint whose time is over."""
        now = self.broker.clock_ms()
        for ck in list(self.pending.values()):
            if ck.revive_time > now:
                continue
            for index in range(ck.num):
                if not ck.bit_map >> index & 1:
                    if not await self._revive(ck, ck.offset_at(index)):
                        return  # the store refused: try again on the next round
                    ck = ck.with_acked(index)
                    self._settle(ck)

    async def _revive(self, ck: PopCheckPoint, offset: int) -> bool:
        broker = self.broker
        result = broker.message_store.get_message(ck.topic, ck.queue_id, offset, 1)
        if not result.records or result.queue_offsets[0] != offset:
            log.warning("revive: %s queue %d offset %d is gone, not revived", ck.topic, ck.queue_id, offset)
            return True
        msg = decode_record(result.records[0])[0]
        group = broker.subscriptions.find_or_create(ck.cid)
        max_times = group.retry_max_times if group is not None else 16
        props = dict(msg.properties)
        props.pop(POP_CK, None)
        if msg.reconsume_times == 0 or FIRST_POP_TIME not in props:
            props[FIRST_POP_TIME] = str(ck.pop_time)
        if to_dead_letters(msg.reconsume_times, max_times):
            topic = dlq_topic(ck.cid)
            broker.topics.create_if_absent(topic, 1, PERM_READ | PERM_WRITE)
            broker.stats.count_dlq(ck.cid, ck.topic)
        else:
            topic = ck.topic if ck.topic.startswith(RETRY_PREFIX) else pop_retry_topic(ck.topic, ck.cid)
            if broker.topics.get(topic) is None:
                broker.topics.create_if_absent(topic, RETRY_QUEUE_NUMS, PERM_READ | PERM_WRITE)
                if broker.offsets.query(ck.cid, topic, 0) < 0:
                    broker.offsets.commit(ck.cid, topic, 0, 0)
        again = redraft(
            msg,
            topic=topic,
            queue_id=0,
            properties=props,
            born_host=broker.store_host,
            store_host=broker.store_host,
            reconsume_times=msg.reconsume_times + 1,
            wait=True,
        )
        # The re-put and an ack of the message in one piece (one write, all or none): the
        # progress committed in consumerOffset.json lags, and a restart that reads this
        # checkpoint again finds the message revived, rather than revive it a second time
        # after its copy may have been consumed and acked.
        ack = AckMsg(offset, ck.start_offset, ck.cid, ck.topic, ck.queue_id, ck.pop_time, ck.broker_name)
        put = await broker.store.put_many([again, _ack_draft(broker, ack, self.queue_id)])
        if not put.ok:
            log.error("revive: cannot re-put %s queue %d offset %d: %s", ck.topic, ck.queue_id, offset, put.status)
            return False
        self.revived += 1
        return True

    def commit(self) -> None:
        progress = self.progress
        if progress != self._committed:
            self.broker.offsets.commit(REVIVE_GROUP, self.topic, self.queue_id, progress)
            self._committed = progress


def recover_pop_offsets(broker: BrokerParts) -> int:
    """After a crash, move each group's offset past what the checkpoints in the revive log
    say it popped; how many offsets moved.

    A pop's checkpoint is in the CommitLog before the pop is answered (synced first with
    SYNC_FLUSH), the group's offset only in consumerOffset.json, which lags by up to its
    write delay: without this a killed broker would hand out again, at once, messages still
    invisible or acked. Read from each revive queue's committed progress, which is as old as
    the offsets beside it in that file."""
    moved = 0
    for queue_id in range(broker.config.revive_queue_num):
        reader = ReviveQueue(broker, queue_id)
        for item, _ in reader.records(RECOVERY_ROUNDS):
            if isinstance(item, PopCheckPoint) and item.num > 0:
                past = item.offset_at(item.num - 1) + 1
                if broker.offsets.query(item.cid, item.topic, item.queue_id) < past:
                    broker.offsets.commit(item.cid, item.topic, item.queue_id, past)
                    moved += 1
    if moved:
        log.info("recovered %d POP offsets from the revive log", moved)
    return moved


class ReviveService:
    """A revive task per queue of the revive topic (reviveQueueNum); a master's work."""

    def __init__(self, broker: BrokerParts) -> None:
        self.broker = broker
        self.queues: list[ReviveQueue] = []

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        self.queues = [ReviveQueue(self.broker, q) for q in range(self.broker.config.revive_queue_num)]
        async with trio.open_nursery() as nursery:
            for queue in self.queues:
                nursery.start_soon(self._run_queue, queue)
            task_status.started()

    async def _run_queue(self, queue: ReviveQueue) -> None:
        broker = self.broker
        while True:
            queue.read()
            await queue.revive_due()
            queue.commit()
            rest = broker.config.revive_interval
            due = queue.next_due()
            if due is not None:
                rest = min(rest, max(0, due - broker.clock_ms()))
            await broker.sleep_wall(rest / 1000)

    @property
    def revived(self) -> int:
        return sum(q.revived for q in self.queues)
