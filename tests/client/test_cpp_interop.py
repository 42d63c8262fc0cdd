"""Our client and the official C++ client (PyPI rocketmq 0.4.4) read each other's messages.

Both directions through our name server and broker on 127.0.0.1: body, keys, tags and
user properties arrive intact, compressed bodies included.
"""

from __future__ import annotations

import pytest
import trio

from rmq.client import ConsumeFromWhere, Message, MessageExt, Producer, PushConsumer
from tests.interop.cpp_client import produce, push_consume, requires_cpp_client, run_scenario

from .conftest import FAST, Cluster

pytestmark = [pytest.mark.interop, requires_cpp_client]

BIG = 5000  # past both clients' 4 KiB compression threshold


async def test_cpp_producer_to_python_consumer(cluster: Cluster) -> None:
    await cluster.create_topic("CppToPy")
    spec = produce(
        cluster.namesrv_addr,
        "CppToPy",
        20,
        keys="K-{i} X-{i}",
        tags="Tag{i}",
        body="cpp-body-{i}",
        properties={"color": "c{i}"},
    )
    (await run_scenario(spec)).check()
    (
        await run_scenario(produce(cluster.namesrv_addr, "CppToPy", 1, keys="BIG", tags="Big", body="z", body_size=BIG))
    ).check()

    got: list[MessageExt] = []
    consumer = PushConsumer(
        "cg_from_cpp",
        cluster.namesrv_addr,
        handler=got.append,
        consume_from_where=ConsumeFromWhere.FIRST_OFFSET,
        **FAST,
    )
    consumer.subscribe("CppToPy", "*")
    async with consumer:
        with trio.fail_after(20):
            while len(got) < 21:
                await trio.sleep(0.05)
        await trio.sleep(0.3)  # nothing twice
    assert len(got) == 21
    by_key = {m.keys: m for m in got}
    for i in range(20):
        m = by_key[f"K-{i} X-{i}"]
        assert m.body == f"cpp-body-{i}".encode()
        assert m.tags == f"Tag{i}"
        assert m.properties["color"] == f"c{i}"
        assert m.topic == "CppToPy"
    assert by_key["BIG"].body == b"z" * BIG  # the C++ client compressed it; we inflated it


async def test_python_producer_to_cpp_consumer(cluster: Cluster) -> None:
    await cluster.create_topic("PyToCpp")
    async with Producer("pg_to_cpp", cluster.namesrv_addr) as producer:
        for i in range(20):
            await producer.send(
                Message(
                    "PyToCpp", f"py-body-{i}".encode(), tags=f"Tag{i}", keys=[f"K-{i}"], properties={"color": f"c{i}"}
                )
            )
        await producer.send(Message("PyToCpp", b"y" * BIG, tags="Big", keys=["BIG"]))

    spec = push_consume(
        cluster.namesrv_addr, "PyToCpp", 21, group="cg_to_cpp", linger=1.0, property_keys=("color",), time_limit=40
    )
    result = (await run_scenario(spec)).check()
    assert len(result.messages) == 21
    by_key = {m.keys: m for m in result.messages}
    for i in range(20):
        m = by_key[f"K-{i}"]
        assert m.body == f"py-body-{i}".encode()
        assert m.tags == f"Tag{i}"
        assert m.properties["color"] == f"c{i}"
        assert m.topic == "PyToCpp"
    assert by_key["BIG"].body == b"y" * BIG  # we compressed it; the C++ client inflated it
