"""Offsets and reads for the live source ("rocketmq"), without Spark.

Offsets are queue offsets (message indexes in a ConsumeQueue, PROTOCOL.md 3.3) and are
written as JSON the way Spark keeps them in a checkpoint:

    {"TopicA": {"broker-a:0": 42, "broker-a:1": 17}, "TopicB": {...}}

In `startingOffsets` / `endingOffsets` a value may also be -2 (earliest) or -1 (latest),
a key may be a bare queue id ("0") meaning that queue id on every broker, and the whole
option may be just "earliest" or "latest".

A range [start, end) of one queue is read with PULL_MESSAGE without suspension, and a
read of the same range always returns the same messages, which is what lets a
restarted streaming query replay an unfinished micro-batch without loss or repeats.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable, Iterator
from typing import Any

from rmq.protocol import ResponseCode
from rmq.protocol.message import MessageExt, iter_records

from .options import Bounds
from .pull_client import BrokerClient, ClientError, QueueRef, fetch_route

log = logging.getLogger("spark.live")

EARLIEST = -2
LATEST = -1
_NAMED = {"earliest": EARLIEST, "latest": LATEST}
# A PULL_NOT_FOUND below the planned end means the broker has not got those messages
# (yet, or any more); retry a few times before giving up rather than loop forever.
_NOT_FOUND_RETRIES = 20
_NOT_FOUND_SLEEP = 0.25

Offsets = dict[QueueRef, int]


class DataLossError(RuntimeError):
    """Messages in the requested range are gone from the broker (deleted by retention)."""


def parse_spec(text: str | None, default: str) -> int | dict[str, dict[str, int]]:
    """ "earliest" / "latest" → EARLIEST / LATEST; JSON text → {topic: {queue key: offset}}."""
    text = (text or default).strip()
    if text.lower() in _NAMED:
        return _NAMED[text.lower()]
    try:
        raw = json.loads(text)
        return {str(t): {str(k): int(v) for k, v in qs.items()} for t, qs in raw.items()}
    except (ValueError, AttributeError, TypeError):
        raise ValueError(
            f'bad offsets {text!r}: want "earliest", "latest" or JSON like {{"T": {{"broker-a:0": 12}}}}'
        ) from None


def discover(namesrv: str, topics: Iterable[str], timeout: float) -> list[QueueRef]:
    return sorted(q for t in sorted(set(topics)) for q in fetch_route(namesrv, t, timeout))


def spec_value(spec: int | dict[str, dict[str, int]], q: QueueRef, missing: int) -> int:
    if isinstance(spec, int):
        return spec
    per_topic = spec.get(q.topic, {})
    return per_topic.get(q.key, per_topic.get(str(q.queue_id), missing))


def resolve(
    client: BrokerClient, queues: Iterable[QueueRef], spec: int | dict[str, dict[str, int]], missing: int
) -> Offsets:
    """Concrete offsets for each queue: EARLIEST / LATEST asked of the broker, numbers kept."""
    out = {}
    for q in queues:
        value = spec_value(spec, q, missing)
        if value == EARLIEST:
            value = client.min_offset(q)
        elif value == LATEST:
            value = client.max_offset(q)
        out[q] = value
    return out


def narrow_by_time(client: BrokerClient, q: QueueRef, start: int, end: int, bounds: Bounds) -> tuple[int, int]:
    """Move [start, end) in toward [since, until) with SEARCH_OFFSET_BY_TIMESTAMP.

    The search answers the nearest offset, so one message of margin is kept on each side;
    rows are still filtered by time exactly. A broker without the request leaves the
    range as it was.
    """
    try:
        if bounds.since_ms is not None:
            start = max(start, client.search_offset(q, bounds.since_ms) - 1)
        if bounds.until_ms is not None:
            end = min(end, client.search_offset(q, bounds.until_ms) + 1)
    except ClientError as exc:
        log.info("no time search on %s (%s); reading the whole range", q.addr, exc)
    return start, max(start, end)


def to_json(offsets: Offsets) -> dict[str, dict[str, int]]:
    """{topic: {"broker:queue": offset}} with sorted keys, as a checkpoint stores it."""
    out: dict[str, dict[str, int]] = {}
    for q in sorted(offsets):
        out.setdefault(q.topic, {})[q.key] = offsets[q]
    return out


def read_range(
    client: BrokerClient,
    q: QueueRef,
    start: int,
    end: int,
    *,
    batch: int = 32,
    bounds: Bounds | None = None,
    fail_on_data_loss: bool = True,
) -> Iterator[MessageExt]:
    """Messages with queue offsets in [start, end), pulled in order.

    Raises:
        DataLossError: part of the range was deleted and `fail_on_data_loss` is set.
        ClientError: the broker failed, or kept answering "no message" below `end`.
    """
    bounds = bounds or Bounds()
    offset = start
    not_found = 0
    while offset < end:
        r = client.pull(q, offset, min(batch, end - offset))
        if r.code == ResponseCode.SUCCESS:
            not_found = 0
            last = offset - 1
            for msg in iter_records(r.body):
                if msg.queue_offset >= end:
                    break
                if msg.queue_offset >= offset and bounds.accepts(msg.topic, msg.store_timestamp):
                    yield msg
                last = max(last, msg.queue_offset)
            advanced = max(last + 1, r.next_begin_offset)
            if advanced <= offset:
                raise ClientError(f"{q.topic} {q.key}: pull at {offset} succeeded without moving forward")
            offset = advanced
        elif r.code == ResponseCode.PULL_NOT_FOUND:
            not_found += 1
            if not_found > _NOT_FOUND_RETRIES:
                raise ClientError(
                    f"{q.topic} {q.key} has no messages at {offset} (max {r.max_offset}), wanted up to {end}"
                )
            time.sleep(_NOT_FOUND_SLEEP)
        elif r.next_begin_offset > offset:  # 20 (nothing matched) or 21 (offset moved forward)
            if r.code == ResponseCode.PULL_OFFSET_MOVED:
                lost = (
                    f"{q.topic} {q.key}: offsets {offset}..{r.next_begin_offset - 1} are gone (min is {r.min_offset})"
                )
                if fail_on_data_loss:
                    raise DataLossError(lost + "; set failOnDataLoss=false to skip them")
                log.warning("%s; skipping", lost)
            offset = r.next_begin_offset
        else:
            raise ClientError(
                f"{q.topic} {q.key}: pull at {offset} answered {r.code} with next offset {r.next_begin_offset}"
            )


def plan_chunks(starts: Offsets, ends: Offsets, chunk: int) -> list[tuple[QueueRef, int, int]]:
    """[start, end) ranges per queue, cut into pieces of at most `chunk` messages."""
    out = []
    for q in sorted(ends):
        a, b = starts.get(q, ends[q]), ends[q]
        while a < b:
            out.append((q, a, min(b, a + chunk)))
            a += chunk
    return out


def offsets_from_json(raw: dict[str, Any], queues: Iterable[QueueRef]) -> Offsets:
    """Checkpointed offsets back onto the current route's queues (queues gone are dropped)."""
    out = {}
    for q in queues:
        value = raw.get(q.topic, {}).get(q.key)
        if value is not None:
            out[q] = int(value)
    return out
