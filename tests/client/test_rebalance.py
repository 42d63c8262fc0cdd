"""Allocation strategies, table-tested against PROTOCOL.md 7."""

from __future__ import annotations

import pytest

from rmq.client.message import MessageQueue
from rmq.client.rebalance import AllocateByConfig, allocate_averagely, allocate_averagely_by_circle


def mqs(n: int, broker: str = "broker-a", topic: str = "T") -> list[MessageQueue]:
    return [MessageQueue(topic, broker, i) for i in range(n)]


def cids(c: int) -> list[str]:
    return [f"10.0.0.{i}@c" for i in range(c)]


# (queues, clients, client index) -> queue ids taken
AVERAGELY = [
    (8, 3, 0, [0, 1, 2]),
    (8, 3, 1, [3, 4, 5]),
    (8, 3, 2, [6, 7]),
    (5, 2, 0, [0, 1, 2]),
    (5, 2, 1, [3, 4]),
    (4, 2, 0, [0, 1]),
    (4, 2, 1, [2, 3]),
    (3, 5, 0, [0]),
    (3, 5, 2, [2]),
    (3, 5, 3, []),
    (3, 5, 4, []),
    (1, 1, 0, [0]),
    (16, 1, 0, list(range(16))),
    (10, 4, 0, [0, 1, 2]),
    (10, 4, 1, [3, 4, 5]),
    (10, 4, 2, [6, 7]),
    (10, 4, 3, [8, 9]),
]

CIRCLE = [
    (8, 3, 0, [0, 3, 6]),
    (8, 3, 1, [1, 4, 7]),
    (8, 3, 2, [2, 5]),
    (3, 5, 3, []),
    (4, 2, 1, [1, 3]),
]


@pytest.mark.parametrize(("n", "c", "i", "expected"), AVERAGELY)
def test_averagely(n: int, c: int, i: int, expected: list[int]) -> None:
    got = allocate_averagely("g", cids(c)[i], mqs(n), cids(c))
    assert [q.queue_id for q in got] == expected


@pytest.mark.parametrize(("n", "c", "i", "expected"), CIRCLE)
def test_averagely_by_circle(n: int, c: int, i: int, expected: list[int]) -> None:
    got = allocate_averagely_by_circle("g", cids(c)[i], mqs(n), cids(c))
    assert [q.queue_id for q in got] == expected


@pytest.mark.parametrize("strategy", [allocate_averagely, allocate_averagely_by_circle])
def test_partition_for_every_shape(strategy) -> None:  # type: ignore[no-untyped-def]
    for n in range(13):
        for c in range(1, 7):
            all_q, all_c = mqs(n), cids(c)
            taken = [q for cid in all_c for q in strategy("g", cid, all_q, all_c)]
            assert sorted(taken) == sorted(all_q), (n, c)
            assert len(set(taken)) == len(taken)


def test_inputs_are_sorted_first() -> None:
    # queues of two brokers, client ids out of order: the result depends only on the sets
    queues = mqs(2, "broker-b") + mqs(2, "broker-a")
    clients = ["b@1", "a@1"]
    assert allocate_averagely("g", "a@1", queues, clients) == [
        MessageQueue("T", "broker-a", 0),
        MessageQueue("T", "broker-a", 1),
    ]
    assert allocate_averagely("g", "b@1", list(reversed(queues)), clients) == [
        MessageQueue("T", "broker-b", 0),
        MessageQueue("T", "broker-b", 1),
    ]


def test_unknown_client_or_no_queues_gets_nothing() -> None:
    assert allocate_averagely("g", "x@1", mqs(4), cids(2)) == []
    assert allocate_averagely_by_circle("g", cids(2)[0], [], cids(2)) == []
    assert allocate_averagely("g", "", mqs(4), cids(2)) == []


def test_by_config() -> None:
    strategy = AllocateByConfig([MessageQueue("T", "b", 3), MessageQueue("T", "b", 1)])
    assert strategy("g", "anyone", mqs(8), cids(3)) == [MessageQueue("T", "b", 1), MessageQueue("T", "b", 3)]
    assert strategy.name == "CONFIG"
    assert allocate_averagely.name == "AVG"
    assert allocate_averagely_by_circle.name == "AVG_BY_CIRCLE"
