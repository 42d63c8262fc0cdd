"""The plugin's client factories hand each kind of test the client flavour it can await.

Run through pytester, as a user's project would run them: the plugin is loaded by its entry
point, and the asyncio test uses anyio's pytest plugin (installed with anyio).
"""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

USER_TESTS = """
import asyncio

import pytest

from rmq.client import ConsumeFromWhere, Message, aio, blocking

FIRST = ConsumeFromWhere.FIRST_OFFSET


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.mark.anyio
async def test_asyncio(rmq_cluster, rmq_producer, rmq_pull_consumer, rmq_push_consumer):
    rmq_cluster.create_topic("AsyncioTopic", 2)
    async with rmq_producer() as producer:
        assert isinstance(producer, aio.Producer)
        for i in range(4):
            await producer.send(Message("AsyncioTopic", b"m%d" % i))
    consumer = rmq_pull_consumer("asyncio-pull", consume_from_where=FIRST)
    assert isinstance(consumer, aio.PullConsumer)
    consumer.subscribe("AsyncioTopic")
    got = []
    async with consumer:
        async with asyncio.timeout(20):
            while len(got) < 4:
                got += [m.body for m in await consumer.poll(timeout=1.0)]
    assert sorted(got) == [b"m0", b"m1", b"m2", b"m3"]
    assert isinstance(rmq_push_consumer("asyncio-push"), aio.PushConsumer)


def test_plain(rmq_cluster, rmq_producer, rmq_pull_consumer):
    rmq_cluster.create_topic("PlainTopic", 1)
    assert rmq_cluster.namesrv == rmq_cluster.namesrv_addr
    with rmq_producer() as producer:
        assert isinstance(producer, blocking.Producer)
        producer.send(Message("PlainTopic", b"plain"))
    with rmq_pull_consumer("plain-pull", consume_from_where=FIRST) as consumer:
        consumer.subscribe("PlainTopic")
        got = []
        for _ in range(20):
            got += consumer.poll(timeout=1.0)
            if got:
                break
    assert [m.body for m in got] == [b"plain"]
"""


def test_factories_serve_asyncio_and_plain_tests(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_user=USER_TESTS)
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider", "-p", "anyio")
    result.assert_outcomes(passed=2)
