"""The broker's routing policy (rmq/broker/routing.py): pure functions, checked as tables."""

from __future__ import annotations

import pytest

from rmq.broker.routing import (
    SCHEDULE_DELIVERED_FROM,
    TIMER_OUT_MS,
    TimerRefused,
    half_message,
    route_commit,
    route_later,
    to_dead_letters,
)
from rmq.protocol import properties as P
from rmq.protocol.message import TRANSACTION_NOT_TYPE, TRANSACTION_PREPARED_TYPE

NOW = 1_700_000_000_000
LATER = dict(now_ms=NOW, timer_wheel=True, max_delay_sec=3600, levels=18)


@pytest.mark.parametrize(
    ("topic", "props", "where", "kept"),
    [
        ("T", {}, ("T", 3), {}),
        ("T", {P.DELAY: "2"}, ("SCHEDULE_TOPIC_XXXX", 1), {P.DELAY: "2", P.REAL_TOPIC: "T", P.REAL_QID: "3"}),
        ("T", {P.DELAY: "99"}, ("SCHEDULE_TOPIC_XXXX", 17), {P.DELAY: "18", P.REAL_TOPIC: "T", P.REAL_QID: "3"}),
        ("T", {P.DELAY: "x"}, ("T", 3), {P.DELAY: "x"}),
        ("%DLQ%g", {P.DELAY: "2"}, ("%DLQ%g", 3), {}),  # a dead letter never waits
        (
            "T",
            {P.TIMER_DELAY_SEC: "10", P.DELAY: "2"},  # the timer wins over a delay level
            ("rmq_sys_wheel_timer", 0),
            {P.TIMER_DELAY_SEC: "10", P.REAL_TOPIC: "T", P.REAL_QID: "3", TIMER_OUT_MS: str(NOW + 10_000)},
        ),
        ("T", {P.TIMER_DELIVER_MS: str(NOW - 1)}, ("T", 3), {P.TIMER_DELIVER_MS: str(NOW - 1)}),  # already due
        ("T", {P.DELAY: "1", SCHEDULE_DELIVERED_FROM: "1:5"}, ("SCHEDULE_TOPIC_XXXX", 0), None),
    ],
)
def test_route_later(topic: str, props: dict[str, str], where: tuple[str, int], kept: dict[str, str] | None) -> None:
    assert route_later(topic, 3, props, **LATER) == where
    if kept is not None:
        assert props == kept
    assert SCHEDULE_DELIVERED_FROM not in props


def test_route_later_without_the_timer_wheel_uses_the_delay_level() -> None:
    props = {P.TIMER_DELAY_SEC: "10", P.DELAY: "1"}
    assert route_later("T", 0, props, **{**LATER, "timer_wheel": False}) == ("SCHEDULE_TOPIC_XXXX", 0)


@pytest.mark.parametrize("props", [{P.TIMER_DELAY_SEC: "soon"}, {P.TIMER_DELAY_SEC: str(7200)}])
def test_route_later_refuses_unusable_timers(props: dict[str, str]) -> None:
    with pytest.raises(TimerRefused):
        route_later("T", 0, props, **LATER)


def test_a_commit_is_never_refused_and_falls_back_to_its_delay_level() -> None:
    props = {P.TIMER_DELAY_SEC: str(7200), P.DELAY: "1"}
    topic, queue_id, refused = route_commit("T", 2, props, now_ms=NOW, max_delay_sec=3600, levels=18)
    assert (topic, queue_id) == ("SCHEDULE_TOPIC_XXXX", 0) and refused and "timerMaxDelaySec" in refused
    assert route_commit("T", 2, {}, now_ms=NOW, max_delay_sec=3600, levels=18) == ("T", 2, None)


def test_half_message() -> None:
    props: dict[str, str] = {}
    assert half_message("T", 5, props, TRANSACTION_PREPARED_TYPE | 0x1) == (
        "RMQ_SYS_TRANS_HALF_TOPIC",
        0,
        TRANSACTION_NOT_TYPE | 0x1,
    )
    assert props == {P.REAL_TOPIC: "T", P.REAL_QID: "5"}


@pytest.mark.parametrize(
    ("times", "max_times", "level", "dead"),
    [(0, 16, 0, False), (15, 16, 0, False), (16, 16, 0, True), (0, 16, -1, True), (3, 0, 0, True)],
)
def test_to_dead_letters(times: int, max_times: int, level: int, dead: bool) -> None:
    assert to_dead_letters(times, max_times, level) is dead
