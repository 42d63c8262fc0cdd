"""Appending: drafts become CommitLog records (the write half of DefaultMessageStore).

``Appender.put`` encodes one ``MessageDraft`` straight into the CommitLog's mapped page cache
(or one pwrite, see MappedFile.expect_appends) and returns; ``put_many`` writes several in one
piece, all or none: a batch, or a transaction's commit and its op record. Queue offsets come
from an in-memory table per (topic, queue id), advanced only by what was written. Neither
syncs: the store facade and ``aio.AsyncMessageStore`` apply the flush policy (``wants_wait``).
An HA slave's appends of its master's bytes (``append_replica``) come in here too.
"""

from __future__ import annotations

import errno
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from rmq.protocol import properties as P
from rmq.protocol.errors import LocalProtocolError
from rmq.protocol.message import (
    BORNHOST_V6_FLAG,
    MAX_PROPERTIES_LENGTH,
    MAX_TOPIC_LENGTH,
    MESSAGE_MAGIC_CODE,
    STOREHOST_V6_FLAG,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    TRANSACTION_TYPE_MASK,
    BatchItem,
    Message,
    MessageDraft,
    RecordMeta,
    encode_host,
    is_ipv6_host,
    pack_record_into,
    record_size,
)

from .commitlog import CommitLog
from .config import StoreConfig
from .dispatch import Dispatcher
from .errors import StoreError
from .mapped_file import MappedFile
from .results import PutMessageResult, PutMessageStatus, StoreStats
from .space import CHECK_MS, DiskSpace

_NO_SPACE = (errno.ENOSPC, errno.EDQUOT)
_V6_FLAGS = BORNHOST_V6_FLAG | STOREHOST_V6_FLAG
_V4_HEAD = record_size(0, 0, 0, 0) - 3  # 88: a record's fixed part, before body and tail
_V6_EXTRA = 12  # per IPv6 host
_NOT_QUEUED = (TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE)
_APPENDED_LIMIT = 16384  # records told to dispatch ahead of it (Dispatcher.appended)
_OK = PutMessageStatus.PUT_OK
_ILLEGAL = PutMessageStatus.MESSAGE_ILLEGAL

# What the records of a topic, born host, store host and sysFlag share: the topic's state,
# the hosts' bytes, the sysFlag with its V6 bits and the size of the record's fixed part.
_Head = tuple["_TopicState", bytes, bytes, int, int]


class IllegalBatch(StoreError):
    """A batch RocketMQ refuses as MESSAGE_ILLEGAL: transactional, or an item with a delay
    level. ``str(exc)`` says which."""


class _TopicState:
    __slots__ = ("offsets", "puts", "topic_field")

    def __init__(self, encoded: bytes) -> None:
        self.topic_field = bytes((len(encoded),)) + encoded  # length and UTF-8 name, as records hold it
        self.offsets: dict[int, int] = {}  # queue id -> next queue offset
        self.puts = 0


def wants_wait(wait: bool | None, props: Mapping[str, str] | str | bytes | None) -> bool:
    """Whether an append waits for its sync: ``wait`` if given, else the WAIT property
    (absent means true)."""
    if wait is not None:
        return wait
    if props is None:
        return True
    if isinstance(props, str):
        return f"{P.WAIT}{P.NAME_VALUE_SEPARATOR}false" not in props
    if isinstance(props, bytes):
        return b"WAIT\x01false" not in props
    return props.get(P.WAIT) != "false"


def batch_drafts(head: MessageDraft, items: Iterable[Message | BatchItem]) -> list[MessageDraft]:
    """The drafts of a batch (SEND_BATCH_MESSAGE): one per item (``decode_batch_items`` or
    ``decode_batch_body``), with ``head``'s topic, queue, sysFlag, born time and host, store
    host, reconsume times and wait; its body is not used.

    Each item keeps its own properties (UNIQ_KEY, KEYS, TAGS); ``head.properties`` (the
    batch-level ones such as WAIT, and CLUSTER) are added to each, overriding. A
    BatchItem's properties are kept as they came, the batch's appended, unless they may name
    DELAY or a batch property (then they are decoded, checked and merged as a Message's are).
    Whether the batch waits is decided here once, from ``head`` (``wants_wait``).

    Raises:
        IllegalBatch: ``head`` is transactional, or an item has a delay level (as RocketMQ).
    """
    if head.sys_flag & TRANSACTION_TYPE_MASK != TRANSACTION_NOT_TYPE:
        raise IllegalBatch("batch messages cannot be transactional")
    extra = head.properties
    if extra is not None and not isinstance(extra, Mapping):
        extra = P.decode_properties(extra)
    items = list(items)
    topic, queue_id, sys_flag = head.topic, head.queue_id, head.sys_flag
    born_ts, born, store, times = head.born_timestamp, head.born_host, head.store_host, head.reconsume_times
    wait = wants_wait(head.wait, extra)
    extra_b = P.encode_properties(extra).encode("utf-8") if extra else b""
    # a separator between an item's own and the batch's unless the item's end with one (the
    # C++ client's do), as RocketMQ's batch encoder does
    sep_extra = b"\x02" + extra_b if extra_b else b""
    watched = P.property_marks((P.DELAY, *extra) if extra else (P.DELAY,))
    # one scan of all items first: in the common batch none names a watched property
    some_watched = P.may_any_have((m.properties for m in items if isinstance(m, BatchItem)), watched)
    new = tuple.__new__  # a draft built straight: MessageDraft's own __new__ is a Python call per item
    drafts = []
    for m in items:
        if isinstance(m, BatchItem) and not (some_watched and P.may_have(m.properties, watched)):
            raw = m.properties
            props_b = raw + sep_extra if raw and raw[-1] != 2 else raw + extra_b
        else:
            props = dict(m.properties) if isinstance(m, Message) else P.decode_properties(m.properties)
            if extra:
                props.update(extra)
            delay = props.get(P.DELAY, "0")
            if delay.strip().lstrip("-").isdigit() and int(delay) > 0:
                raise IllegalBatch("batch messages cannot be delayed")
            props_b = P.encode_properties(props).encode("utf-8")
        drafts.append(
            new(
                MessageDraft,
                (topic, queue_id, m.body, m.flag, props_b, sys_flag, born_ts, born, store, times, 0, None, wait),
            )
        )
    return drafts


class Appender:
    """Writes drafts into ``commitlog``; statuses and refusals as ``MessageStore.put`` says.

    Not thread-safe, like the store. ``closed`` refuses everything (the store sets it).
    """

    def __init__(
        self,
        config: StoreConfig,
        clock: Callable[[], int],
        commitlog: CommitLog,
        dispatcher: Dispatcher,
        space: DiskSpace,
        stats: StoreStats,
    ) -> None:
        self.config = config
        self.clock = clock
        self.commitlog = commitlog
        self.dispatcher = dispatcher
        self.space = space
        self._stats = stats
        self.closed = True
        # Per topic: its field in records, next queue offset per queue id, put count. One
        # lookup per append however many topics there are.
        self.topics: dict[str, _TopicState] = {}
        self._hosts: dict[tuple[str, int], tuple[bytes, bool]] = {}  # see _host
        self.replica_next = 0  # where an HA slave expects the next record header

    # --- the table of topics and queue offsets ----------------------------------------------

    def _topic(self, topic: str) -> _TopicState | None:
        state = self.topics.get(topic)
        if state is None:
            encoded = topic.encode("utf-8")
            if not 0 < len(encoded) <= MAX_TOPIC_LENGTH:
                return None
            state = self.topics[topic] = _TopicState(encoded)
        return state

    def queue_offset_for_next(self, topic: str, queue_id: int) -> int:
        """Queue offset the next append to (topic, queue) will get."""
        state = self.topics.get(topic)
        return state.offsets.get(queue_id, 0) if state is not None else 0

    def reset_queue_offsets(self, max_offsets: Iterable[tuple[tuple[str, int], int]]) -> None:
        """Take every queue's next offset from ``max_offsets`` ((topic, queue id), next offset)
        alone: what the consume queues say."""
        for state in self.topics.values():
            state.offsets.clear()
        for (topic, queue_id), max_offset in max_offsets:
            known = self._topic(topic)
            if known is not None:
                known.offsets[queue_id] = max_offset

    def count_records(self, records: Iterable[RecordMeta]) -> None:
        """Raise queue offsets past ``records`` (CommitLog records no consume queue holds yet),
        after ``reset_queue_offsets``: their queues' next offsets follow them."""
        for meta in records:
            if meta.sys_flag & TRANSACTION_TYPE_MASK in _NOT_QUEUED:
                continue
            state = self._topic(meta.topic)
            if state is not None and state.offsets.get(meta.queue_id, 0) <= meta.queue_offset:
                state.offsets[meta.queue_id] = meta.queue_offset + 1

    def put_counts(self) -> dict[str, int]:
        """Appends per topic since the store opened (topics with none left out)."""
        return {t: st.puts for t, st in self.topics.items() if st.puts}

    # --- appends ----------------------------------------------------------------------------

    def _refuse(self, status: PutMessageStatus, remark: str) -> PutMessageResult:
        self._stats.put_message_failed_times += 1
        return PutMessageResult(status, remark)

    def _refused(self, now: int) -> PutMessageResult | None:
        """A refusal when the store is closed or refuses appends now (measuring the disk
        first if that is a second old), else None."""
        space = self.space
        if not -CHECK_MS < now - space.checked_at < CHECK_MS and not self.closed:
            space.check()
        if space.refusal is not None or self.closed:
            return self._refuse(PutMessageStatus.SERVICE_NOT_AVAILABLE, space.refusal or "store is closed")
        return None

    def _host(self, host: tuple[str, int]) -> tuple[bytes, bool]:
        """Encode a host not cached yet: its bytes, and whether it is IPv6 (needs its V6
        sysFlag bit). The bit is the caller's to choose: one host may be a born host and a
        store host.

        Raises:
            LocalProtocolError: not a host address.
        """
        if len(self._hosts) > 4096:  # bounded: born hosts come from many clients
            self._hosts.clear()
        v6 = is_ipv6_host(host[0])
        cached = self._hosts[host] = (encode_host(host, v6), v6)
        return cached

    def _head(
        self, topic: str, born: tuple[str, int], store: tuple[str, int], sys_flag: int
    ) -> _Head | PutMessageResult:
        """What the records of a topic, born host, store host and sysFlag share; a refusal
        when they cannot be stored."""
        state = self.topics.get(topic) or self._topic(topic)
        if state is None:
            return self._refuse(_ILLEGAL, f"topic length must be 1..{MAX_TOPIC_LENGTH} bytes")
        hosts = self._hosts
        try:
            born_b, born_v6 = hosts.get(born) or self._host(born)
            store_b, store_v6 = hosts.get(store) or self._host(store)
        except LocalProtocolError as exc:
            return self._refuse(_ILLEGAL, str(exc))
        # the V6 bits describe the hosts we write, whatever the sender's sysFlag said
        sys_flag &= ~_V6_FLAGS
        fixed = _V4_HEAD
        if born_v6:
            sys_flag |= BORNHOST_V6_FLAG
            fixed += _V6_EXTRA
        if store_v6:
            sys_flag |= STOREHOST_V6_FLAG
            fixed += _V6_EXTRA
        return state, born_b, store_b, sys_flag, fixed

    def _tail(self, body: bytes, queue_id: int, props: Any, topic_field: bytes) -> bytes | PutMessageResult:
        """The bytes of a record after its body (topic and properties, with their lengths),
        once its body, queue id and properties are checked; else a refusal."""
        if len(body) > self.config.max_message_size:
            return self._refuse(
                _ILLEGAL, f"message body of {len(body)} bytes exceeds max_message_size {self.config.max_message_size}"
            )
        if queue_id < 0:
            return self._refuse(_ILLEGAL, f"bad queue id {queue_id}")
        kind = props.__class__
        if kind is bytes:
            props_b = props
        elif kind is str:
            props_b = props.encode("utf-8")
        elif props is None:
            props_b = b""
        else:
            props_b = P.encode_properties(props).encode("utf-8")
        if len(props_b) > MAX_PROPERTIES_LENGTH:
            return self._refuse(
                PutMessageStatus.PROPERTIES_SIZE_EXCEEDED,
                f"properties of {len(props_b)} bytes exceed {MAX_PROPERTIES_LENGTH}",
            )
        return topic_field + len(props_b).to_bytes(2, "big") + props_b  # type: ignore[no-any-return]

    # The appends take a draft's fields apart at once: together they cost less than one by one.

    def put(self, d: MessageDraft) -> PutMessageResult:
        """Write one record into the CommitLog's page cache; never syncs. See
        ``MessageStore.put``."""
        store_ts = self.clock()
        space = self.space
        if not -CHECK_MS < store_ts - space.checked_at < CHECK_MS or space.refusal is not None or self.closed:
            refused = self._refused(store_ts)
            if refused is not None:
                return refused
        topic, queue_id, body, flag, props, sys_flag, born_ts, born, store, times, prepared, tags_code, _ = d
        head = self._head(topic, born, store, sys_flag)
        if isinstance(head, PutMessageResult):
            return head
        state, born_b, store_b, sys_flag, fixed = head
        tail = self._tail(body, queue_id, props, state.topic_field)
        if isinstance(tail, PutMessageResult):
            return tail
        size = fixed + len(body) + len(tail)
        if size > self.config.mapped_file_size_commitlog - 8:
            return self._refuse(_ILLEGAL, f"record of {size} bytes does not fit a CommitLog file")
        offsets = state.offsets
        queued = sys_flag & TRANSACTION_TYPE_MASK not in _NOT_QUEUED
        queue_offset = offsets.get(queue_id, 0) if queued else 0
        try:
            mf, pos = self.commitlog.reserve(size)
        except OSError as exc:
            return self._write_failed(exc, PutMessageStatus.CREATE_MAPPED_FILE_FAILED, "cannot create a CommitLog file")
        phy = mf.start + pos
        built = None if mf.mapped_writes_at(pos, size) else bytearray(size)
        pack_record_into(
            mf.mm if built is None else built, pos if built is None else 0, size, zlib.crc32(body) & 0x7FFFFFFF,
            queue_id, flag, queue_offset, phy, sys_flag, born_ts, born_b, store_ts, store_b, times, prepared, body,
            tail,
        )  # fmt: skip
        if built is not None and (failed := self._write_built(mf, pos, built)) is not None:
            return failed
        mf.wrote = pos + size
        self.commitlog.last_store_timestamp = store_ts
        if queued:
            offsets[queue_id] = queue_offset + 1
        if tags_code is not None:
            self.dispatcher.tags_overrides[phy] = tags_code
        state.puts += 1
        stats = self._stats
        stats.put_message_times_total += 1
        stats.put_message_size_total += size
        elapsed = self.clock() - store_ts
        if elapsed > 0:
            stats.record_put_time(elapsed)
        else:  # the common case, without the call: bucket [<=0ms], the maximum unchanged
            stats.put_message_distribute_time[0] += 1
        return PutMessageResult(
            _OK, "", phy, size, (store_b + phy.to_bytes(8, "big")).hex().upper(), queue_offset, store_ts, 1
        )

    def put_many(self, drafts: Sequence[MessageDraft]) -> PutMessageResult:
        """Write the drafts as consecutive records in one CommitLog file, all or none; never
        syncs. See ``MessageStore.put_many``."""
        store_ts = self.clock()
        refused = self._refused(store_ts)
        if refused is not None:
            return refused
        if not drafts:
            return self._refuse(_ILLEGAL, "empty batch")
        # per draft its head (one object for a run of drafts with the same topic, hosts and
        # sysFlag objects, as a batch's are), tail and record size
        heads: list[_Head] = []
        tails: list[bytes] = []
        sizes: list[int] = []
        total = 0
        head: Any = None
        last: tuple[Any, ...] = (None, None, None, None)
        tagged = False
        for d in drafts:
            topic, queue_id, body, _, props, sys_flag, _, born, store, _, _, tags_code, _ = d
            if topic is not last[0] or born is not last[1] or store is not last[2] or sys_flag != last[3]:
                head = self._head(topic, born, store, sys_flag)
                if isinstance(head, PutMessageResult):
                    return head
                last = topic, born, store, sys_flag
            tail = self._tail(body, queue_id, props, head[0].topic_field)
            if isinstance(tail, PutMessageResult):
                return tail
            size = head[4] + len(body) + len(tail)
            heads.append(head)
            tails.append(tail)
            sizes.append(size)
            total += size
            tagged = tagged or tags_code is not None
        if total > self.config.mapped_file_size_commitlog - 8:
            return self._refuse(_ILLEGAL, f"batch of {total} bytes does not fit a CommitLog file")
        written = self._write_run(drafts, heads, tails, sizes, total, store_ts, tagged)
        if isinstance(written, PutMessageResult):
            return written
        first_phy, ids, queue_offsets = written
        return PutMessageResult(
            _OK, "", first_phy, total, ",".join(ids), queue_offsets[0], store_ts, len(drafts), queue_offsets
        )

    def put_group(self, drafts: Sequence[MessageDraft]) -> list[PutMessageResult]:
        """Write independent drafts (sends that came together) as ``put`` would one after the
        other, each with its own result and refusal, but the records in one piece: one pwrite,
        one clock read. A group that does not fit the rest of the CommitLog file goes draft by
        draft, so that files roll where single puts would roll them. Never syncs."""
        store_ts = self.clock()
        refused = self._refused(store_ts)
        if refused is not None:
            return [refused, *(self._refuse(refused.status, refused.remark) for _ in drafts[1:])]
        results: list[Any] = [None] * len(drafts)
        todo: list[MessageDraft] = []
        where: list[int] = []
        heads: list[_Head] = []
        tails: list[bytes] = []
        sizes: list[int] = []
        total = 0
        tagged = False
        head: Any = None
        last: tuple[Any, ...] = (None, None, None, None)
        limit = self.config.mapped_file_size_commitlog - 8
        for n, d in enumerate(drafts):
            topic, queue_id, body, _, props, sys_flag, _, born, store, _, _, tags_code, _ = d
            if topic is not last[0] or born is not last[1] or store is not last[2] or sys_flag != last[3]:
                head = self._head(topic, born, store, sys_flag)
                if isinstance(head, PutMessageResult):
                    results[n] = head
                    last = (None, None, None, None)
                    continue
                last = topic, born, store, sys_flag
            tail = self._tail(body, queue_id, props, head[0].topic_field)
            if isinstance(tail, PutMessageResult):
                results[n] = tail
                continue
            size = head[4] + len(body) + len(tail)
            if size > limit:
                results[n] = self._refuse(_ILLEGAL, f"record of {size} bytes does not fit a CommitLog file")
                continue
            todo.append(d)
            where.append(n)
            heads.append(head)
            tails.append(tail)
            sizes.append(size)
            total += size
            tagged = tagged or tags_code is not None
        if not todo:
            return results
        last_file = self.commitlog.files.last()
        if last_file is None or last_file.wrote + total + 8 > last_file.size:
            for n, d in zip(where, todo, strict=True):
                results[n] = self.put(d)
            return results
        written = self._write_run(todo, heads, tails, sizes, total, store_ts, tagged)
        if isinstance(written, PutMessageResult):
            for n in where:
                results[n] = written
            return results
        phy, ids, queue_offsets = written
        for n, size, msg_id, queue_offset in zip(where, sizes, ids, queue_offsets, strict=True):
            results[n] = PutMessageResult(_OK, "", phy, size, msg_id, queue_offset, store_ts, 1)
            phy += size
        return results

    def _write_run(
        self,
        drafts: Sequence[MessageDraft],
        heads: list[_Head],
        tails: list[bytes],
        sizes: list[int],
        total: int,
        store_ts: int,
        tagged: bool,
    ) -> tuple[int, list[str], list[int]] | PutMessageResult:
        """Write checked drafts as consecutive records in one piece: (the first one's CommitLog
        offset, each one's offset id, each one's queue offset), or the refusal when the disk
        refuses (then nothing counts as written)."""
        try:
            mf, pos = self.commitlog.reserve(total)
        except OSError as exc:
            return self._write_failed(exc, PutMessageStatus.CREATE_MAPPED_FILE_FAILED, "cannot create a CommitLog file")
        first_pos = pos
        first_phy = mf.start + pos
        built = None if mf.mapped_writes_at(pos, total) else bytearray(total)  # all of them: one pwrite
        target, base = (mf.mm, 0) if built is None else (built, first_pos)
        ids = []
        queue_offsets = []
        crcs: list[int] = []
        # A queue's offsets advance through a run of drafts with one head and queue id; what
        # they were before puts them back if the write fails.
        undo: list[tuple[dict[int, int], int, int]] = []
        offsets: dict[int, int] = {}
        run_head: Any = None
        run_queue = queue_offset = -1
        step = 0
        for d, head, tail, size in zip(drafts, heads, tails, sizes, strict=True):
            _, queue_id, body, flag, _, _, born_ts, _, _, times, prepared, _, _ = d
            if head is not run_head or queue_id != run_queue:
                if step:
                    offsets[run_queue] = queue_offset
                run_head, run_queue = head, queue_id
                state, born_b, store_b, sys_flag, _ = head
                step = 1 if sys_flag & TRANSACTION_TYPE_MASK not in _NOT_QUEUED else 0
                offsets = state.offsets
                queue_offset = offsets.get(queue_id, 0) if step else 0
                if step:
                    undo.append((offsets, queue_id, queue_offset))
            phy = mf.start + pos
            crc = zlib.crc32(body) & 0x7FFFFFFF
            pack_record_into(
                target, pos - base, size, crc, queue_id, flag, queue_offset, phy, sys_flag,
                born_ts, born_b, store_ts, store_b, times, prepared, body, tail,
            )  # fmt: skip
            crcs.append(crc)
            ids.append((store_b + phy.to_bytes(8, "big")).hex().upper())
            queue_offsets.append(queue_offset)
            queue_offset += step
            pos += size
        if step:
            offsets[run_queue] = queue_offset
        if built is not None and (failed := self._write_built(mf, first_pos, built)) is not None:
            for offsets, queue_id, queue_offset in reversed(undo):
                offsets[queue_id] = queue_offset
            return failed
        mf.wrote = pos
        self.commitlog.last_store_timestamp = store_ts
        for head in heads:
            head[0].puts += 1
        if tagged:
            phy = first_phy
            for d, size in zip(drafts, sizes, strict=True):
                if d.tags_code is not None:
                    self.dispatcher.tags_overrides[phy] = d.tags_code
                phy += size
        self._tell_dispatch(first_phy, drafts, heads, tails, sizes, crcs, queue_offsets, store_ts)
        stats = self._stats
        stats.put_message_times_total += len(drafts)
        stats.put_message_size_total += total
        elapsed = self.clock() - store_ts
        if elapsed > 0:
            stats.record_put_time(elapsed)
        else:  # the common case, without the call: bucket [<=0ms], the maximum unchanged
            stats.put_message_distribute_time[0] += 1
        return first_phy, ids, queue_offsets

    def _tell_dispatch(
        self,
        phy: int,
        drafts: Sequence[MessageDraft],
        heads: list[_Head],
        tails: list[bytes],
        sizes: list[int],
        crcs: list[int],
        queue_offsets: list[int],
        store_ts: int,
    ) -> None:
        """Hand the dispatcher what it would parse back from the records just written
        (``Dispatcher.appended``): those whose properties are a dict that their encoded form
        decodes back to, as a plain send's are, or the encoded bytes themselves, as a batch's
        items' are (decoded here as dispatch would decode them from the record)."""
        dispatcher = self.dispatcher
        appended = dispatcher.appended
        if len(appended) > _APPENDED_LIMIT:
            if next(iter(appended)) >= dispatcher.reput_offset:
                return  # dispatch held back (a replica's ack, a commit): these are parsed then
            # offsets dispatch went past without reading them (a cut, a DLedger log matching)
            dispatcher.appended = appended = {o: known for o, known in appended.items() if o >= dispatcher.reput_offset}
        decode_props = P.decode_properties
        records = zip(drafts, heads, tails, sizes, crcs, queue_offsets, strict=True)
        for d, head, tail, size, crc, queue_offset in records:
            if head[4] != _V4_HEAD:  # dispatch checks a told record by TOLD_HEAD: IPv4 hosts only
                phy += size
                continue
            props = d[4]
            named: tuple[str | None, str | None, str | None] | None = None  # TAGS, KEYS, UNIQ_KEY
            if props is None:
                named = (None, None, None)
            elif props.__class__ is bytes:  # what the record holds: its decoding is dispatch's
                found = decode_props(str(props, "utf-8", "replace")) if props else {}
                named = (found.get(P.TAGS), found.get(P.KEYS), found.get(P.UNIQ_KEY))
            elif props.__class__ is dict:
                # Each property adds one \x01 and all but the first one \x02: then no name or value
                # holds a separator, and decoding the bytes gives back this dict's values (an
                # empty value reads as absent, as dispatch treats it alike).
                at, n = len(head[0].topic_field) + 2, len(props)
                if tail.count(b"\x01", at) == n and tail.count(b"\x02", at) == max(n - 1, 0):
                    named = (props.get(P.TAGS), props.get(P.KEYS), props.get(P.UNIQ_KEY))
            if named is not None:
                appended[phy] = (size, MESSAGE_MAGIC_CODE, crc, d[1], queue_offset, head[3], store_ts, d[0], *named)
            phy += size

    def _write_built(self, mf: MappedFile, pos: int, built: bytearray) -> PutMessageResult | None:
        """Write records built for a file not written through its mapping (``mf.mapped_writes_at``
        false, see MappedFile.expect_appends); a refusal when the kernel refuses the write:
        nothing counts as written, and the next append writes there again."""
        try:
            mf.pwrite(pos, built)
        except OSError as exc:
            return self._write_failed(exc, PutMessageStatus.UNKNOWN_ERROR, "cannot write the CommitLog")
        return None

    def _write_failed(self, exc: OSError, status: PutMessageStatus, what: str) -> PutMessageResult:
        """The disk refused a CommitLog write or file. No space (ENOSPC, EDQUOT): appends are
        refused with SERVICE_NOT_AVAILABLE until the next disk measurement (a second at most)
        lets one try again. Any other error fails this append only, with ``status``."""
        if exc.errno not in _NO_SPACE:
            return self._refuse(status, f"{what}: {exc}")
        return self._refuse(PutMessageStatus.SERVICE_NOT_AVAILABLE, self.space.refuse_writes(what, exc))

    # --- replication (HA) -------------------------------------------------------------------

    def append_replica(self, offset: int, data: bytes | memoryview) -> None:
        """Append a master's CommitLog bytes verbatim at ``offset``: see
        ``MessageStore.append_replica``."""
        if self.closed:
            raise StoreError("store is closed")
        if self.space.held is not None:
            raise StoreError(self.space.held)
        if not data:
            return
        empty = not self.commitlog.files.files
        self.replica_next, whole = self.commitlog.append_replica(offset, data, self.replica_next)
        d = self.dispatcher
        if empty:
            d.reput_offset = offset
        # A chunk may end inside a record: dispatch stops at the last whole one.
        d.replica_end = whole
        d.update_limit()
        self._stats.put_message_size_total += len(data)
