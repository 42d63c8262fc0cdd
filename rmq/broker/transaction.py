"""Transactions: half messages, END_TRANSACTION as a state-machine table, the check-back loop.

Theory of operation (PROTOCOL.md 3.5). A prepared message is stored as a half message in
RMQ_SYS_TRANS_HALF_TOPIC queue 0 (send.py). Its producer ends it with END_TRANSACTION;
if it does not within transactionTimeOut, the check loop asks a live producer of its group
(CHECK_TRANSACTION_STATE), at most transactionCheckMax times, then discards it to
TRANS_CHECK_MAX_TIME_TOPIC.

Each check re-appends the half message with TRANSACTION_CHECK_TIMES + 1, as RocketMQ
does, so the count survives a restart. All copies of one half message form a *chain*,
named by the queue offset of the first (its origin), which every copy carries in
TRAN_PREPARED_QUEUE_OFFSET; an END_TRANSACTION for any copy ends the chain, and the
chain's state decides what an input does (TRANSITIONS below), so a duplicate or late
commit cannot put the real message twice.

Every resolution writes an op record (RMQ_SYS_TRANS_OP_HALF_TOPIC queue 0, tag `d`,
body = half queue offset of the chain's latest copy, as RocketMQ writes them) that also
names the origin and the outcome. A commit (or discard) appends the real message and its op
record in one piece (put_many: one write, all or none), so no crash can separate them.

Restart: progress is kept as offsets of the internal group CID_RMQ_SYS_TRANS (RocketMQ's
choice too): on the half queue, the lowest offset still pending (`low`); on the op
queue, the first op record that may still concern a chain with copies at or above
`low`. `load()` reads op records from there, then half messages from `low`, and so
rebuilds every chain.
"""

from __future__ import annotations

import enum
import heapq
import logging
import random
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

import trio

from rmq.protocol import LanguageCode, RemotingCommand, RequestCode, ResponseCode
from rmq.protocol import properties as P
from rmq.protocol.constants import (
    PERM_READ,
    PERM_WRITE,
    TRANS_CHECK_MAX_TIME_TOPIC,
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
)
from rmq.protocol.constants import TRANS_CHECK_GROUP as SYS_GROUP
from rmq.protocol.errors import ProtocolError
from rmq.protocol.headers import CheckTransactionStateRequestHeader
from rmq.protocol.message import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    TRANSACTION_TYPE_MASK,
    MessageDraft,
    MessageExt,
    encode_draft,
    make_offset_msg_id,
    redraft,
)
from rmq.remoting import RemotingError

from .routing import route_commit

if TYPE_CHECKING:
    from rmq.store.results import PutMessageResult

    from .parts import BrokerParts

log = logging.getLogger("rmq.broker.transaction")

REMOVE_TAG = "d"
OP_KIND = "__TRAN_OP"  # on op records: COMMIT, ROLLBACK or DISCARD
CHECK_TIMEOUT = 3.0  # seconds to queue one CHECK_TRANSACTION_STATE
KEEP_RESOLVED = 100_000  # resolved chains remembered below `low`, for late duplicates
READ_BATCH = 256


class State(enum.Enum):
    HALF = "HALF"  # waiting for its producer
    COMMITTED = "COMMITTED"
    ROLLED_BACK = "ROLLED_BACK"
    DISCARDED = "DISCARDED"  # checked transactionCheckMax times without an answer


class Input(enum.Enum):
    COMMIT = "COMMIT"  # END_TRANSACTION 8
    ROLLBACK = "ROLLBACK"  # END_TRANSACTION 12
    UNKNOWN = "UNKNOWN"  # END_TRANSACTION 0: the producer does not know yet
    CHECK = "CHECK"  # check time came, checks left
    CHECK_LIMIT = "CHECK_LIMIT"  # check time came, none left


class Action(enum.Enum):
    NONE = "NONE"  # nothing to do (answered SUCCESS)
    REJECT = "REJECT"  # contradicts the outcome already reached (TRANSACTION_FAILED)
    COMMIT = "COMMIT"  # put the real message, then the op record
    ROLLBACK = "ROLLBACK"  # op record only
    CHECK = "CHECK"  # re-append with the count + 1, ask a producer
    DISCARD = "DISCARD"  # copy to TRANS_CHECK_MAX_TIME_TOPIC, op record


S, I, A = State, Input, Action  # noqa: E741 - short names keep the table readable
# (state, input) → (next state, action). A late answer after a discard still counts, as in
# RocketMQ, whose discard leaves the half message resolvable.
TRANSITIONS: dict[tuple[State, Input], tuple[State, Action]] = {
    (S.HALF, I.COMMIT): (S.COMMITTED, A.COMMIT),
    (S.HALF, I.ROLLBACK): (S.ROLLED_BACK, A.ROLLBACK),
    (S.HALF, I.UNKNOWN): (S.HALF, A.NONE),
    (S.HALF, I.CHECK): (S.HALF, A.CHECK),
    (S.HALF, I.CHECK_LIMIT): (S.DISCARDED, A.DISCARD),
    (S.COMMITTED, I.COMMIT): (S.COMMITTED, A.NONE),
    (S.COMMITTED, I.ROLLBACK): (S.COMMITTED, A.REJECT),
    (S.COMMITTED, I.UNKNOWN): (S.COMMITTED, A.NONE),
    (S.COMMITTED, I.CHECK): (S.COMMITTED, A.NONE),
    (S.COMMITTED, I.CHECK_LIMIT): (S.COMMITTED, A.NONE),
    (S.ROLLED_BACK, I.COMMIT): (S.ROLLED_BACK, A.REJECT),
    (S.ROLLED_BACK, I.ROLLBACK): (S.ROLLED_BACK, A.NONE),
    (S.ROLLED_BACK, I.UNKNOWN): (S.ROLLED_BACK, A.NONE),
    (S.ROLLED_BACK, I.CHECK): (S.ROLLED_BACK, A.NONE),
    (S.ROLLED_BACK, I.CHECK_LIMIT): (S.ROLLED_BACK, A.NONE),
    (S.DISCARDED, I.COMMIT): (S.COMMITTED, A.COMMIT),
    (S.DISCARDED, I.ROLLBACK): (S.ROLLED_BACK, A.ROLLBACK),
    (S.DISCARDED, I.UNKNOWN): (S.DISCARDED, A.NONE),
    (S.DISCARDED, I.CHECK): (S.DISCARDED, A.NONE),
    (S.DISCARDED, I.CHECK_LIMIT): (S.DISCARDED, A.NONE),
}
del S, I, A

# END_TRANSACTION's commitOrRollback → input
END_INPUTS = {
    TRANSACTION_COMMIT_TYPE: Input.COMMIT,
    TRANSACTION_ROLLBACK_TYPE: Input.ROLLBACK,
    TRANSACTION_NOT_TYPE: Input.UNKNOWN,
}
_OP_STATES = {"COMMIT": State.COMMITTED, "ROLLBACK": State.ROLLED_BACK, "DISCARD": State.DISCARDED}


@dataclass(slots=True)
class Chain:
    """One half message and its check copies."""

    origin: int  # half queue offset of the first copy
    latest: int  # half queue offset of the newest copy
    phy: int  # its CommitLog offset
    store_timestamp: int  # its store time (ms): the next check waits transactionTimeOut from here
    check_times: int
    state: State = State.HALF
    topic: str = ""  # the real topic (rocketmq_half_messages counts HALF chains per topic)


class TransactionService:
    """Chains, END_TRANSACTION outcomes and the check loop; `load()` once the store is open."""

    def __init__(self, broker: BrokerParts) -> None:
        self.broker = broker
        self.chains: dict[int, Chain] = {}
        self.ingested = 0  # next half queue offset to read
        self.checks_sent = 0
        self._pending: list[tuple[int, int]] = []  # (latest, origin) of HALF chains; stale ones skipped
        self._ops: deque[tuple[int, int]] = deque()  # (op queue offset, chain's latest) in op order
        self._op_next = 0  # op queue offset just past the last op record known not to matter

    # -- rebuilding -------------------------------------------------------------------

    def load(self) -> None:
        broker = self.broker
        store = broker.message_store
        low = max(broker.offsets.query(SYS_GROUP, TRANS_HALF_TOPIC, 0), 0)
        op_from = max(broker.offsets.query(SYS_GROUP, TRANS_OP_HALF_TOPIC, 0), 0)
        resolved: dict[int, State] = {}
        self._op_next = op_from
        while entries := store.read_consume_queue(TRANS_OP_HALF_TOPIC, 0, self._op_next, READ_BATCH):
            for offset, phy, _size, _tags in entries:
                self._op_next = offset + 1
                msg = store.look_message_by_offset(phy)
                if msg is None or msg.tags != REMOVE_TAG:
                    continue
                try:
                    latest = int(msg.body.decode("ascii"))
                except ValueError:
                    continue
                origin = _int(msg.properties.get(P.TRAN_PREPARED_QUEUE_OFFSET), latest)
                resolved[origin] = _OP_STATES.get(msg.properties.get(OP_KIND, ""), State.COMMITTED)
                self._ops.append((offset, latest))
        self.ingested = max(low, store.get_min_offset_in_queue(TRANS_HALF_TOPIC, 0))
        self._ingest(resolved)
        pending = sum(1 for c in self.chains.values() if c.state is State.HALF)
        if pending:
            log.info("transactions: %d half messages waiting for their producers", pending)

    def _ingest(self, resolved: dict[int, State] | None = None) -> None:
        """Read new half messages (copies included) into their chains."""
        store = self.broker.message_store
        while entries := store.read_consume_queue(TRANS_HALF_TOPIC, 0, self.ingested, READ_BATCH):
            for offset, phy, _size, _tags in entries:
                self.ingested = offset + 1
                try:
                    meta = store.commitlog.meta_at(phy)
                except ProtocolError:
                    meta = None
                if meta is None:
                    continue
                props = P.decode_properties(meta.properties)
                origin = _int(props.get(P.TRAN_PREPARED_QUEUE_OFFSET), offset)
                chain = self.chains.get(origin)
                if chain is None:
                    state = resolved.get(origin, State.HALF) if resolved else State.HALF
                    chain = self.chains[origin] = Chain(
                        origin, offset, phy, meta.store_timestamp, 0, state, props.get(P.REAL_TOPIC, "")
                    )
                if offset >= chain.latest:
                    chain.latest, chain.phy, chain.store_timestamp = offset, phy, meta.store_timestamp
                    chain.check_times = _int(props.get(P.TRANSACTION_CHECK_TIMES), 0)
                if chain.state is State.HALF:
                    heapq.heappush(self._pending, (chain.latest, origin))

    # -- progress ---------------------------------------------------------------------

    @property
    def low(self) -> int:
        """Lowest half queue offset a pending chain still needs."""
        pending = self._pending
        while pending:
            latest, origin = pending[0]
            chain = self.chains.get(origin)
            if chain is not None and chain.state is State.HALF and chain.latest == latest:
                return latest
            heapq.heappop(pending)
        return self.ingested

    def commit_progress(self) -> None:
        """Record `low` and the op-queue start in the offset table (persisted with it)."""
        low = self.low
        ops = self._ops
        while ops and ops[0][1] < low:
            self._op_next = max(self._op_next, ops.popleft()[0] + 1)
        op_from = ops[0][0] if ops else self._op_next
        offsets = self.broker.offsets
        if low == op_from == 0 and offsets.query(SYS_GROUP, TRANS_HALF_TOPIC, 0) < 0:
            return  # never had a transaction: keep the offset table clean
        offsets.commit(SYS_GROUP, TRANS_HALF_TOPIC, 0, low)
        offsets.commit(SYS_GROUP, TRANS_OP_HALF_TOPIC, 0, op_from)
        if len(self.chains) > 2 * KEEP_RESOLVED:
            for origin in [o for o, c in self.chains.items() if c.latest < low - KEEP_RESOLVED]:
                del self.chains[origin]

    def pending_count(self) -> int:
        return sum(1 for c in self.chains.values() if c.state is State.HALF)

    def pending_by_topic(self) -> dict[str, int]:
        """Half messages waiting for their producer, per real topic (rocketmq_half_messages);
        reads the half messages stored since the last look first, as `end` does."""
        self._ingest()
        out: dict[str, int] = {}
        for chain in self.chains.values():
            if chain.state is State.HALF:
                out[chain.topic] = out.get(chain.topic, 0) + 1
        return out

    # -- END_TRANSACTION ----------------------------------------------------------------

    async def end(self, half: MessageExt, kind: int) -> tuple[int, str | None]:
        """Apply an END_TRANSACTION (`kind` 8, 12 or 0) for the half copy `half`, already
        checked against the request. Returns (response code, remark)."""
        self._ingest()
        origin = _int(half.properties.get(P.TRAN_PREPARED_QUEUE_OFFSET), half.queue_offset)
        chain = self.chains.get(origin)
        if chain is None:
            if half.queue_offset < self.low:
                return ResponseCode.SUCCESS, None  # resolved long ago and forgotten
            chain = self.chains[origin] = Chain(
                origin,
                half.queue_offset,
                half.commitlog_offset,
                half.store_timestamp,
                _int(half.properties.get(P.TRANSACTION_CHECK_TIMES), 0),
                topic=half.properties.get(P.REAL_TOPIC, ""),
            )
            heapq.heappush(self._pending, (chain.latest, origin))
        return await self._apply(chain, END_INPUTS[kind], half)

    async def _apply(self, chain: Chain, what: Input, half: MessageExt) -> tuple[int, str | None]:
        before = chain.state
        after, action = TRANSITIONS[(before, what)]
        if action is Action.NONE:
            return ResponseCode.SUCCESS, None
        if action is Action.REJECT:
            return ResponseCode.TRANSACTION_FAILED, f"transaction {chain.origin} is already {before.value.lower()}"
        chain.state = after  # before any await: a concurrent END sees the outcome
        try:
            remark = await self._act(action, chain, half)
        except BaseException:
            chain.state = before
            raise
        if remark is not None:
            chain.state = before
            return ResponseCode.SYSTEM_ERROR, remark
        if after is State.HALF:
            heapq.heappush(self._pending, (chain.latest, chain.origin))
        return ResponseCode.SUCCESS, None

    async def _act(self, action: Action, chain: Chain, half: MessageExt) -> str | None:
        """Carry out `action`; None on success, else why it failed."""
        broker = self.broker
        if action is Action.COMMIT:
            props = dict(half.properties)
            for key in (P.TRAN_MSG, P.TRANSACTION_CHECK_TIMES, P.TRAN_PREPARED_QUEUE_OFFSET):
                props.pop(key, None)
            topic, queue_id = props.get(P.REAL_TOPIC, ""), _int(props.get(P.REAL_QID), 0)
            topic, queue_id, refused = route_commit(
                topic,
                queue_id,
                props,
                now_ms=broker.clock_ms(),
                max_delay_sec=broker.config.timer_max_delay_sec,
                levels=len(broker.config.delay_levels_ms),
            )
            if refused is not None:
                log.warning("committed transaction %d keeps no timer: %s", chain.origin, refused)
            commit = redraft(
                half,
                topic=topic,
                queue_id=queue_id,
                properties=props,
                sys_flag=(half.sys_flag & ~TRANSACTION_TYPE_MASK) | TRANSACTION_COMMIT_TYPE,
                store_host=broker.store_host,
                prepared_transaction_offset=half.commitlog_offset,
                wait=False,
            )
            result = await self._write_op(chain, "COMMIT", commit)
            if not result.ok:
                return f"cannot store the committed message: {result.status.value} {result.remark}".strip()
            broker.stats.put_total += 1
            real_topic = half.properties.get(P.REAL_TOPIC, "")
            broker.stats.count_commit(real_topic, (broker.clock_ms() - half.born_timestamp) // 1000)
            return None
        if action is Action.ROLLBACK:
            result = await self._write_op(chain, "ROLLBACK")
            if not result.ok:
                return f"cannot write the op record: {result.status.value}"
            broker.stats.count_rollback(half.properties.get(P.REAL_TOPIC, ""))
            return None
        if action is Action.DISCARD:
            broker.topics.create_if_absent(TRANS_CHECK_MAX_TIME_TOPIC, 1, PERM_READ | PERM_WRITE)
            discard = redraft(
                half,
                topic=TRANS_CHECK_MAX_TIME_TOPIC,
                queue_id=0,
                sys_flag=half.sys_flag & ~TRANSACTION_TYPE_MASK,
                store_host=broker.store_host,
                wait=False,
            )
            result = await self._write_op(chain, "DISCARD", discard)
            if not result.ok:
                return f"cannot discard: {result.status.value}"
            log.warning(
                "transaction %d of %s discarded after %d checks",
                chain.origin,
                half.properties.get(P.PGROUP),
                chain.check_times,
            )
            return None
        assert action is Action.CHECK
        return await self._check(chain, half)

    async def _write_op(self, chain: Chain, kind: str, message: MessageDraft | None = None) -> PutMessageResult:
        """Append the op record of `kind` for `chain`, after `message` (the committed or
        discarded copy) in the same append: no crash can keep one and lose the other. Both
        are appended before the first await."""
        broker = self.broker
        broker.topics.create_if_absent(TRANS_OP_HALF_TOPIC, 1, PERM_READ | PERM_WRITE)
        props = {P.TAGS: REMOVE_TAG, P.TRAN_PREPARED_QUEUE_OFFSET: str(chain.origin), OP_KIND: kind}
        op = MessageDraft(
            TRANS_OP_HALF_TOPIC,
            0,
            str(chain.latest).encode("ascii"),
            properties=props,
            born_timestamp=broker.clock_ms(),
            born_host=broker.store_host,
            store_host=broker.store_host,
            wait=False,
        )
        result = await broker.store.put_many([op] if message is None else [message, op])
        if result.ok:
            self._ops.append((result.queue_offsets[-1], chain.latest))
        return result

    # -- check-back ---------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Every transactionCheckInterval, check the half messages that waited too long."""
        interval = self.broker.config.transaction_check_interval / 1000
        task_status.started()
        while True:
            await trio.sleep(interval)
            with trio.move_on_after(interval):
                await self.check_round()
            self.commit_progress()

    async def check_round(self) -> int:
        """One pass over the pending chains; returns how many were checked or discarded."""
        broker = self.broker
        config = broker.config
        self._ingest()
        now = broker.clock_ms()
        acted = 0
        for chain in sorted((c for c in self.chains.values() if c.state is State.HALF), key=lambda c: c.latest):
            if chain.state is not State.HALF:
                continue  # ended while we were checking others
            half = broker.message_store.look_message_by_offset(chain.phy)
            if half is None:
                log.error("transaction %d: half message at %d is gone", chain.origin, chain.phy)
                chain.state = State.DISCARDED
                continue
            immunity = _int(half.properties.get(P.CHECK_IMMUNITY_TIME_IN_SECONDS), -1)
            wait_ms = immunity * 1000 if immunity >= 0 else config.transaction_time_out
            if now - chain.store_timestamp < wait_ms:
                continue
            what = Input.CHECK_LIMIT if chain.check_times >= config.transaction_check_max else Input.CHECK
            code, remark = await self._apply(chain, what, half)
            if code != ResponseCode.SUCCESS:
                log.warning("transaction %d: %s", chain.origin, remark)
            acted += 1
        return acted

    async def _check(self, chain: Chain, half: MessageExt) -> str | None:
        """Re-append the half message with one more check counted, then ask a producer."""
        broker = self.broker
        props = dict(half.properties)
        props[P.TRANSACTION_CHECK_TIMES] = str(chain.check_times + 1)
        props[P.TRAN_PREPARED_QUEUE_OFFSET] = str(chain.origin)
        again = redraft(
            half, topic=TRANS_HALF_TOPIC, queue_id=0, properties=props, store_host=broker.store_host, wait=False
        )
        result = await broker.store.put(again)
        if not result.ok:
            return f"cannot re-append the half message: {result.status.value}"
        chain.latest, chain.phy = result.queue_offset, result.wrote_offset
        chain.store_timestamp, chain.check_times = result.store_timestamp, chain.check_times + 1
        group = props.get(P.PGROUP, "")
        channels = broker.clients.producer_channels(group)
        if not channels:
            log.info("transaction %d: no producer of group %s online to check", chain.origin, group)
            return None
        real_topic = props.get(P.REAL_TOPIC, half.topic)
        record = encode_draft(
            again._replace(topic=real_topic, queue_id=_int(props.get(P.REAL_QID), 0)),
            queue_offset=chain.latest,
            commitlog_offset=chain.phy,
            store_timestamp=chain.store_timestamp,
        )
        uniq = props.get(P.UNIQ_KEY)
        header = CheckTransactionStateRequestHeader(
            tran_state_table_offset=chain.latest,
            commit_log_offset=chain.phy,
            msg_id=uniq,
            transaction_id=props.get(P.TRANSACTION_ID) or uniq,
            offset_msg_id=make_offset_msg_id(*broker.store_host, chain.phy),
        )
        request = RemotingCommand(
            RequestCode.CHECK_TRANSACTION_STATE, header.to_ext(), record, language=LanguageCode.JAVA
        )
        channel = random.choice(channels)
        try:
            await channel.conn.invoke_oneway(request, CHECK_TIMEOUT)  # type: ignore[attr-defined]
            self.checks_sent += 1
        except RemotingError as exc:
            log.info("transaction %d: check to %s failed: %s", chain.origin, channel.address, exc)
        return None


def _int(value: str | None, default: int) -> int:
    try:
        return int(value) if value is not None else default
    except ValueError:
        return default
