"""Busy polling (rmq.remoting.busypoll): the loop still wakes for I/O and timers as it
should, and polls only while its sleeps are short."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from rmq.remoting import busypoll


@pytest.fixture
def polling() -> Iterator[None]:
    assert busypoll.install(300)
    try:
        yield
    finally:
        busypoll.install(0)


def test_install_and_turn_off() -> None:
    try:
        assert busypoll.install(250)
        assert busypoll.installed_micros() == 250
        assert busypoll.install(0)
        assert busypoll.installed_micros() == 0
    finally:
        busypoll.install(0)
    with pytest.raises(ValueError):
        busypoll.install(-1)


async def test_io_and_timers_wake_the_loop_as_before(polling: None) -> None:
    left, right = trio.socket.socketpair()
    with left, right:
        for delay in (0.0, 0.0001, 0.002, 0.02):

            async def answer_later(delay: float = delay) -> None:
                await trio.sleep(delay)
                await right.send(b"x")

            async with trio.open_nursery() as nursery:
                nursery.start_soon(answer_later)
                start = time.perf_counter()
                assert await left.recv(1) == b"x"
                elapsed = time.perf_counter() - start
            assert delay <= elapsed < delay + 0.5  # woken, not left asleep (a loaded machine is slow)
        start = time.perf_counter()
        await trio.sleep(0.03)
        assert 0.03 <= time.perf_counter() - start < 0.5


async def test_polls_only_while_sleeps_are_short(polling: None) -> None:
    state = busypoll._state

    async def after_long_sleeps() -> bool:
        # a sleep far longer than twice the budget turns polling off for the next one (a
        # stray wakeup of the loop could make one sleep short: try a few)
        for _ in range(5):
            await trio.sleep(0.02)
            if state["promising"] is False:
                return True
        return False

    assert await after_long_sleeps()
    # woken by I/O soon after (a thread's result comes back through Trio's wakeup socket):
    # a short sleep, so the next one is polled (a loaded machine may make some waits long)
    seen = []
    for _ in range(50):
        await trio.to_thread.run_sync(time.sleep, 0.0001)
        seen.append(state["promising"])
    assert True in seen
    assert await after_long_sleeps()


async def test_a_client_asking_for_it_turns_it_on() -> None:
    from rmq.client.config import ProducerConfig
    from rmq.client.instance import ClientInstance

    config = ProducerConfig.build("127.0.0.1:9", {"busy_poll_micros": 250})
    try:
        async with ClientInstance(config).running():
            assert busypoll.installed_micros() == 250
    finally:
        busypoll.install(0)


def test_the_broker_key_is_checked() -> None:
    from rmq.broker.config import BrokerConfig, ConfigError

    assert BrokerConfig.from_properties({"busyPollMicros": "300"}).busy_poll_micros == 300
    assert BrokerConfig.from_properties({}).busy_poll_micros == 0  # off unless asked for
    with pytest.raises(ConfigError, match="busyPollMicros"):
        BrokerConfig.from_properties({"busyPollMicros": "20000"})


async def test_a_broker_asking_for_it_turns_it_on(tmp_path: Path) -> None:
    from rmq.broker.config import BrokerConfig
    from rmq.broker.controller import BrokerController

    config = BrokerConfig.from_properties(
        {
            "listenPort": "0",
            "bindAddress": "127.0.0.1",
            "brokerIP1": "127.0.0.1",
            "storePathRootDir": str(tmp_path),
            "busyPollMicros": "200",
        },
        environ={},
    )
    try:
        async with BrokerController(config):
            assert busypoll.installed_micros() == 200
    finally:
        busypoll.install(0)


def test_a_contended_core_turns_polling_off_for_a_while() -> None:
    """Pinned to one core with a process that spins on it, a poll's yield runs the other
    process: the loop stops polling and sleeps, and skips polling for its next waits."""
    import subprocess
    import sys

    script = """
import os, subprocess, sys, trio
from rmq.remoting import busypoll
os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
spin = "import time\\nend = time.time() + 20\\nwhile time.time() < end: pass"
spinner = subprocess.Popen([sys.executable, "-c", spin])
busypoll.install(300)

async def main():
    for _ in range(300):
        await trio.sleep(0.0001)  # short sleeps: the loop polls before each
        if busypoll._state["backoff"]:
            return "backed off"
    return "kept polling"

try:
    print(trio.run(main))
finally:
    spinner.kill()
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "backed off", out.stderr
