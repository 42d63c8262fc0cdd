"""Option parsing, filter pushdown and read limits: plain Python, no Spark session."""

from __future__ import annotations

import datetime as dt

import pytest
from pyspark.sql.datasource import EqualTo, GreaterThan, GreaterThanOrEqual, In, LessThan, LessThanOrEqual

from rmq_spark.java import parse_major
from rmq_spark.live import parse_spec, plan_chunks
from rmq_spark.options import Bounds, parse_time, push_filters
from rmq_spark.pull_client import QueueRef, queues_from_route, split_addrs
from rmq_spark.sources import _cap

UTC = dt.UTC


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("1700000000123", 1700000000123),
        ("2024-05-01", 1714521600000),
        ("2024-05-01T00:00:01Z", 1714521601000),
        ("2024-05-01T02:00:00+02:00", 1714521600000),
        ("2024-05-01 00:00:00.5", 1714521600500),
    ],
)
def test_parse_time(text: str, ms: int) -> None:
    assert parse_time(text) == ms


def test_parse_time_rejects_garbage() -> None:
    with pytest.raises(ValueError, match="ISO 8601"):
        parse_time("yesterday")


def test_bounds_from_options() -> None:
    b = Bounds.from_options({"topics": "A, B", "topic": "C", "since": "1000", "until": "2000"})
    assert b == Bounds(frozenset({"A", "B", "C"}), 1000, 2000)
    assert b.accepts("A", 1000) and not b.accepts("A", 2000) and not b.accepts("D", 1500)


def test_push_filters_folds_topic_and_time_exactly() -> None:
    t = dt.datetime(2024, 5, 1, 0, 0, 0, 500, tzinfo=UTC)  # 1714521600000 ms + 500 µs
    ms = 1714521600000
    other = EqualTo(("queue_id",), 1)
    filters = [
        In(("topic",), ("A", "B")),
        EqualTo(("topic",), "A"),
        GreaterThan(("store_timestamp",), t),
        LessThanOrEqual(("store_timestamp",), t + dt.timedelta(seconds=1)),
        other,
    ]
    bounds, rest = push_filters(Bounds(), filters)
    assert rest == [other]
    assert bounds == Bounds(frozenset({"A"}), ms + 1, ms + 1001)
    bounds, _ = push_filters(Bounds(), [GreaterThanOrEqual(("store_timestamp",), t), LessThan(("store_timestamp",), t)])
    assert (bounds.since_ms, bounds.until_ms) == (ms + 1, ms + 1)


def test_java_version_parsing() -> None:
    assert parse_major('openjdk version "17.0.15" 2025-04-15') == 17
    assert parse_major('java version "1.8.0_292"') == 8
    assert parse_major('openjdk version "21" 2023-09-19') == 21
    assert parse_major("no version here") is None


def test_offset_spec() -> None:
    assert parse_spec(None, "earliest") == -2
    assert parse_spec("latest", "earliest") == -1
    assert parse_spec('{"T": {"b:0": 5, "1": -2}}', "latest") == {"T": {"b:0": 5, "1": -2}}
    with pytest.raises(ValueError, match="bad offsets"):
        parse_spec("[1, 2]", "latest")


def test_plan_chunks() -> None:
    q = QueueRef("T", "b", 0, "h:1")
    assert plan_chunks({q: 5}, {q: 12}, 3) == [(q, 5, 8), (q, 8, 11), (q, 11, 12)]
    assert plan_chunks({q: 5}, {q: 5}, 3) == []


def test_cap_shares_the_budget_and_never_exceeds_it() -> None:
    start = {"T": {"b:0": 0, "b:1": 10, "b:2": 7}}
    end = {"T": {"b:0": 100, "b:1": 11, "b:2": 7}}
    capped = _cap(start, end, 21)
    got = sum(capped["T"][k] - start["T"][k] for k in start["T"])
    assert got == 21
    assert capped["T"]["b:1"] == 11 and capped["T"]["b:2"] == 7
    assert _cap(start, end, 1000) == end


def test_route_to_queues() -> None:
    route = {
        "brokerDatas": [
            {"brokerName": "b", "cluster": "c", "brokerAddrs": {0: "h:1", 1: "h:2"}},
            {"brokerName": "s", "cluster": "c", "brokerAddrs": {"1": "h:3"}},  # no master
        ],
        "queueDatas": [
            {"brokerName": "b", "perm": 6, "readQueueNums": 2, "writeQueueNums": 2},
            {"brokerName": "s", "perm": 6, "readQueueNums": 2, "writeQueueNums": 2},
        ],
    }
    assert queues_from_route("T", route) == [QueueRef("T", "b", 0, "h:1"), QueueRef("T", "b", 1, "h:1")]
    assert split_addrs("a:1;b:2, c:3") == ["a:1", "b:2", "c:3"]
