"""The pytest plugin (entry point pytest11): fixtures for projects that test code using RocketMQ."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import trio

from rmq.client import ConsumeFromWhere, Message
from tests.interop.cpp_client import produce, push_consume, requires_cpp_client, run_scenario


async def test_our_client_against_the_fixture(rmq_cluster: Any, rmq_producer: Any, rmq_pull_consumer: Any) -> None:
    rmq_cluster.create_topic("PluginTopic", 2)
    async with rmq_producer() as producer:
        for i in range(10):
            await producer.send(Message("PluginTopic", b"m%d" % i))
    got: list[bytes] = []
    consumer = rmq_pull_consumer("plugin-group", consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
    consumer.subscribe("PluginTopic")
    async with consumer:
        with trio.fail_after(20):
            while len(got) < 10:
                got += [m.body for m in await consumer.poll(timeout=1.0)]
    assert sorted(got) == sorted(b"m%d" % i for i in range(10))


@pytest.mark.rmq(virtual_clock=True)
async def test_virtual_clock_delivers_delayed_messages_at_once(
    rmq_cluster: Any, rmq_producer: Any, rmq_push_consumer: Any
) -> None:
    rmq_cluster.create_topic("Later", 1)
    got: list[bytes] = []
    consumer = rmq_push_consumer("later-group", handler=lambda m: got.append(m.body))
    consumer.subscribe("Later")
    async with consumer:
        async with rmq_producer() as producer:
            await producer.send(Message("Later", b"in 10 minutes", delay_level=14))  # level 14 = 10 min
        await trio.sleep(1)
        assert got == []  # the broker's clock stands still
        started = trio.current_time()
        await trio.to_thread.run_sync(rmq_cluster.advance, 600)
        with trio.fail_after(20):
            while not got:
                await trio.sleep(0.05)
        assert got == [b"in 10 minutes"]
        assert trio.current_time() - started < 20  # not ten real minutes


@pytest.mark.interop
@requires_cpp_client
def test_the_cpp_client_against_the_fixture_from_a_plain_test(rmq_cluster: Any) -> None:
    """A synchronous test: the servers run in their own thread, so blocking clients work."""
    rmq_cluster.create_topic("CppPlugin", 2)
    ns = rmq_cluster.namesrv_addr

    async def scenario() -> None:
        async with trio.open_nursery() as nursery:
            results: dict[str, Any] = {}

            async def consume() -> None:
                results["c"] = await run_scenario(push_consume(ns, "CppPlugin", 5, group="cpp-plugin"))

            nursery.start_soon(consume)
            await trio.sleep(3)
            (await run_scenario(produce(ns, "CppPlugin", 5))).check()
        assert len(results["c"].check().messages) == 5

    trio.run(scenario)


def test_a_user_project_gets_the_fixtures(tmp_path: Path) -> None:
    (tmp_path / "test_user.py").write_text(
        textwrap.dedent(
            """
            def test_cluster(rmq_cluster):
                assert rmq_cluster.namesrv_addr.startswith("127.0.0.1:")
                rmq_cluster.create_topic("UserTopic")
            """
        )
    )
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path / "test_user.py")],
        capture_output=True, text=True, cwd=tmp_path, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "1 passed" in proc.stdout
