"""Where a message goes: the broker's routing policy, pure functions of a message's
properties and the broker's settings (no store, no clock read, no I/O).

Every path that stores a message uses these: sends (SendProcessor), a consumer's send-back
(retry or dead letters), transaction commits, and the delay and timer services when they
deliver. Each rewrites the properties it is given in place (REAL_TOPIC / REAL_QID and the
like) and returns the topic and queue to store into.

* Retries and dead letters: a `%RETRY%` message that used up its reconsume times (or is sent
  back with a negative delay level) goes to `%DLQ%<group>` (``to_dead_letters``).
* Transactions: a prepared message is stored as a half message (``half_message``).
* Timers: a message asking for a future delivery time waits in rmq_sys_wheel_timer
  (``route_timer``); the timer wins over a delay level.
* Delay levels: DELAY=L waits in SCHEDULE_TOPIC_XXXX queue L-1 (``route_delay``); dead
  letters are never delayed (``route_later`` puts these three rules together).
"""

from __future__ import annotations

from rmq.protocol import properties as P
from rmq.protocol.constants import DLQ_PREFIX, SCHEDULE_TOPIC, TIMER_TOPIC, TRANS_HALF_TOPIC
from rmq.protocol.message import TRANSACTION_NOT_TYPE, TRANSACTION_TYPE_MASK

# On each delivered message: "<level>:<queue offset>" of the SCHEDULE_TOPIC_XXXX entry it
# came from; and the timer-queue offset of a delivered timer message (redelivery.py)
SCHEDULE_DELIVERED_FROM = "__SCHEDULE_FROM"
TIMER_DELIVERED_FROM = "__TIMER_FROM"
TIMER_OUT_MS = "TIMER_OUT_MS"  # absolute delivery time of a stored timer message


def delay_level(props: dict[str, str]) -> int:
    """The DELAY property as a level; 0 when absent or not a number."""
    raw = props.get(P.DELAY)
    if not raw:
        return 0
    try:
        return int(raw.strip())
    except ValueError:
        return 0


def route_delay(topic: str, queue_id: int, props: dict[str, str], levels: int) -> tuple[str, int]:
    """Where a message is stored: SCHEDULE_TOPIC_XXXX queue level-1 when it has a DELAY
    level (> 0, clamped to `levels`), else where it was going. Rewrites `props` in place."""
    level = delay_level(props)
    if level <= 0:
        return topic, queue_id
    level = min(level, levels)
    props[P.DELAY] = str(level)
    props[P.REAL_TOPIC] = topic
    props[P.REAL_QID] = str(queue_id)
    props.pop(SCHEDULE_DELIVERED_FROM, None)
    return SCHEDULE_TOPIC, level - 1


class TimerRefused(Exception):
    """The timer properties are unusable; the message is MESSAGE_ILLEGAL with this text."""


def deliver_time(props: dict[str, str], now_ms: int) -> int | None:
    """Absolute delivery time the properties ask for, or None for an ordinary message."""
    for key, relative, scale in (
        (P.TIMER_DELIVER_MS, False, 1),
        (P.START_DELIVER_TIME, False, 1),
        (P.TIMER_DELAY_SEC, True, 1000),
        (P.TIMER_DELAY_MS, True, 1),
    ):
        raw = props.get(key)
        if raw is None:
            continue
        try:
            value = int(raw.strip())
        except ValueError:
            raise TimerRefused(f"timer property {key}={raw!r} is not a whole number") from None
        return now_ms + value * scale if relative else value
    return None


def route_timer(topic: str, queue_id: int, props: dict[str, str], now_ms: int, max_delay_sec: int) -> tuple[str, int]:
    """Where a message is stored: rmq_sys_wheel_timer when it asks for a future delivery
    time, else where it was going. Rewrites `props` in place.

    Raises TimerRefused when the time is malformed or too far ahead.
    """
    when = deliver_time(props, now_ms)
    if when is None or when <= now_ms:
        return topic, queue_id
    if when - now_ms > max_delay_sec * 1000:
        raise TimerRefused(
            f"timer message delivery {when - now_ms} ms ahead exceeds timerMaxDelaySec={max_delay_sec} s"
        )
    props[P.REAL_TOPIC] = topic
    props[P.REAL_QID] = str(queue_id)
    props[TIMER_OUT_MS] = str(when)
    props.pop(P.DELAY, None)  # the timer wins over a delay level
    props.pop(TIMER_DELIVERED_FROM, None)
    return TIMER_TOPIC, 0


def route_later(
    topic: str,
    queue_id: int,
    props: dict[str, str],
    *,
    now_ms: int,
    timer_wheel: bool,
    max_delay_sec: int,
    levels: int,
) -> tuple[str, int]:
    """Where a message that may ask to wait is stored (a send's rule): a dead letter never
    waits (its DELAY is dropped); with ``timer_wheel`` a future delivery time wins; else a
    delay level. Rewrites ``props`` in place.

    Raises TimerRefused when the timer properties are malformed or too far ahead.
    """
    if topic.startswith(DLQ_PREFIX):
        props.pop(P.DELAY, None)
        return topic, queue_id
    if timer_wheel:
        routed = route_timer(topic, queue_id, props, now_ms, max_delay_sec)
        if routed[0] != topic:
            return routed
    return route_delay(topic, queue_id, props, levels)


def route_commit(
    topic: str, queue_id: int, props: dict[str, str], *, now_ms: int, max_delay_sec: int, levels: int
) -> tuple[str, int, str | None]:
    """Where a committed transactional message is stored: its timer, else its delay level,
    else its real topic and queue. A commit cannot be refused, so timer properties that
    ``route_timer`` would refuse are dropped from consideration and their reason returned
    (third element; None when there was none)."""
    refused: str | None = None
    try:
        routed = route_timer(topic, queue_id, props, now_ms, max_delay_sec)
    except TimerRefused as exc:
        refused = str(exc)
    else:
        if routed[0] != topic:
            return routed[0], routed[1], None
    topic, queue_id = route_delay(topic, queue_id, props, levels)
    return topic, queue_id, refused


def half_message(topic: str, queue_id: int, props: dict[str, str], sys_flag: int) -> tuple[str, int, int]:
    """A prepared transactional message is stored as a half message in
    RMQ_SYS_TRANS_HALF_TOPIC queue 0, remembering its real topic and queue
    (TransactionalMessageBridge.parseHalfMessageInner): (topic, queue, sysFlag)."""
    props[P.REAL_TOPIC] = topic
    props[P.REAL_QID] = str(queue_id)
    return TRANS_HALF_TOPIC, 0, (sys_flag & ~TRANSACTION_TYPE_MASK) | TRANSACTION_NOT_TYPE


def to_dead_letters(reconsume_times: int, max_reconsume_times: int, delay_level: int = 0) -> bool:
    """Whether a retried message goes to its group's dead letters instead of another retry:
    it used up its reconsume times, or was sent back with a negative delay level."""
    return reconsume_times >= max_reconsume_times or delay_level < 0
