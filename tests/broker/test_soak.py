"""Soak: a broker process under hostile load keeps serving valid clients in bounded memory.

One broker runs as `python -m rmq broker -c broker.conf` (its RSS read from /proc/PID/status)
with serverChannelMaxIdleTimeSeconds=IDLE_TIMEOUT; the name server runs in this process. While
a Producer sends and a PushConsumer consumes (the valid traffic, whose send latency is
measured), the broker gets at once:

* IDLE_CONNECTIONS connections that never send a byte: each must be closed by the broker
  after the idle timeout;
* a client that sends PULL_MESSAGE requests (each answered with up to 32 messages) as fast as
  it can and never reads: the broker must stop reading from it (backpressure), not buffer;
* PARKED_POLLS long polls on an empty topic, re-issued as they time out: all stay parked
  until one message per queue arrives, then all are answered.

Every loop is bounded in count and time; the whole test takes under a minute. The figures are
printed (run with -s to see them).
"""

from __future__ import annotations

import resource
import statistics
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

from rmq.client import ConsumeFromWhere, ConsumeStatus, Message, Producer, PushConsumer
from rmq.namesrv.config import NamesrvConfig
from rmq.namesrv.server import NamesrvServer
from rmq.protocol import FrameDecoder, RemotingCommand, RequestCode, ResponseCode
from rmq.remoting import RemotingClient

from .ha.procs import BrokerProcess

pytestmark = [pytest.mark.slow]

IDLE_TIMEOUT = 6  # serverChannelMaxIdleTimeSeconds
IDLE_CONNECTIONS = 1000
PARKED_POLLS = 500
POLL_CONNECTIONS = 50  # PARKED_POLLS spread over these
# below IDLE_TIMEOUT: a parked poll's connection is not idle for long; and not a divisor of the
# IDLE_TIMEOUT + 6 s the polls are woken at, where a wave of them would time out (not found,
# not re-issued) as the messages come
POLL_SUSPEND_MS = 5000
HOG_FRAMES = 100_000  # the non-reading client stops after this many requests ...
HOG_SECONDS = 15.0  # ... or this long
BODY = b"s" * 1024
MAX_RSS_GROWTH_KB = 300 * 1024  # peak RSS under the load, above the RSS before it
MAX_RSS_LEFT_KB = 150 * 1024  # RSS a few seconds after the load, above the RSS before it

FLAG_SUSPEND_SUBSCRIPTION = 0x2 | 0x4


def _rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for {pid}")


def _raise_fd_limit(needed: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft != resource.RLIM_INFINITY and soft < needed:
        pytest.skip(f"needs {needed} file descriptors, the limit is {soft}")


@pytest.fixture
async def namesrv() -> AsyncIterator[NamesrvServer]:
    async with NamesrvServer(NamesrvConfig(listen_host="127.0.0.1", listen_port=0, kv_config_path=None)) as ns:
        yield ns


@pytest.fixture
def broker(tmp_path: Path, namesrv: NamesrvServer) -> AsyncIterator[BrokerProcess]:
    _raise_fd_limit(4 * (IDLE_CONNECTIONS + POLL_CONNECTIONS) + 256)  # inherited by the broker
    b = BrokerProcess(
        tmp_path / "soak",
        namesrv.address,
        "broker-soak",
        serverChannelMaxIdleTimeSeconds=str(IDLE_TIMEOUT),
        vipChannelEnable="false",
    )
    b.start()
    yield b
    b.stop()


def _pull(topic: str, group: str, queue_id: int, opaque: int, *, suspend_ms: int = 0) -> bytes:
    ext = {
        "consumerGroup": group,
        "topic": topic,
        "queueId": str(queue_id),
        "queueOffset": "0",
        "maxMsgNums": "32",
        "sysFlag": str(FLAG_SUSPEND_SUBSCRIPTION if suspend_ms else 0x4),
        "commitOffset": "0",
        "suspendTimeoutMillis": str(suspend_ms),
        "subscription": "*",
        "subVersion": "0",
        "expressionType": "TAG",
    }
    cmd = RemotingCommand.request(RequestCode.PULL_MESSAGE, ext)
    cmd.opaque = opaque
    return cmd.encode()


async def _create_topic(client: RemotingClient, addr: str, topic: str) -> None:
    ext = {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": "4", "writeQueueNums": "4", "perm": "6"}
    resp = await client.invoke(addr, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, ext), 5)
    assert resp.code == ResponseCode.SUCCESS, resp


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def test_soak(namesrv: NamesrvServer, broker: BrokerProcess) -> None:
    pid = broker.pid
    addr = broker.address
    async with RemotingClient() as client:
        await _create_topic(client, addr, "SoakTopic")
        await _create_topic(client, addr, "SoakPoll")
    rss = {"peak": 0}
    latencies: list[float] = []
    consumed = 0
    figures: dict[str, object] = {}

    async def sample_rss() -> None:
        for _ in range(10_000):  # bounded: the test's own fail_after ends it sooner
            rss["peak"] = max(rss["peak"], _rss_kb(pid))
            await trio.sleep(0.1)

    async def produce(producer: Producer, stop: trio.Event) -> None:
        for i in range(100_000):
            if stop.is_set():
                return
            start = trio.current_time()
            result = await producer.send(Message("SoakTopic", BODY, keys=f"k{i}"))
            assert result.status.name == "SEND_OK"
            latencies.append(trio.current_time() - start)
            await trio.sleep(0.02)

    async def handle(msg: object) -> ConsumeStatus:
        nonlocal consumed
        consumed += 1
        return ConsumeStatus.SUCCESS

    with trio.fail_after(100):
        consumer = PushConsumer(
            "soak-consumer", namesrv=namesrv.address, handler=handle, consume_from_where=ConsumeFromWhere.FIRST_OFFSET
        )
        consumer.subscribe("SoakTopic")
        async with (
            Producer("soak-producer", namesrv=namesrv.address) as producer,
            consumer,
            trio.open_nursery() as nursery,
        ):
            stop_producing = trio.Event()
            nursery.start_soon(sample_rss)
            nursery.start_soon(produce, producer, stop_producing)
            await trio.sleep(3)  # warm-up: the valid traffic runs, the broker's heap settles
            rss_before = _rss_kb(pid)
            rss["peak"] = rss_before
            calm = list(latencies)
            latencies.clear()

            idle_closed_after: list[float] = []
            hog = {"frames": 0, "bytes": 0, "blocked_after": None}
            polls = {"sent": 0, "answered_early": 0, "answered": 0, "found": 0}
            waking = trio.Event()
            woken: list[float] = []

            async def idle_connection(started: trio.Event) -> None:
                # timed from before the connect: this loop, busy with the soak, may resume the
                # task long after the broker accepted, which must not shorten the idle time seen
                opened = trio.current_time()
                stream = await trio.open_tcp_stream("127.0.0.1", broker.port)
                started.set()
                async with stream:
                    with trio.move_on_after(IDLE_TIMEOUT + 20):
                        try:
                            while await stream.receive_some(4096):
                                pass
                        except trio.BrokenResourceError:
                            pass
                        idle_closed_after.append(trio.current_time() - opened)

            async def open_idle() -> None:
                async with trio.open_nursery() as idle:
                    for _batch in range(0, IDLE_CONNECTIONS, 100):
                        for _ in range(100):
                            started = trio.Event()
                            idle.start_soon(idle_connection, started)
                        await started.wait()
                        await trio.sleep(0.05)

            async def never_reads() -> None:
                stream = await trio.open_tcp_stream("127.0.0.1", broker.port)
                async with stream:
                    begin = trio.current_time()
                    for i in range(HOG_FRAMES):
                        if trio.current_time() - begin > HOG_SECONDS:
                            break
                        frame = _pull("SoakTopic", "soak-hog", i % 4, i + 1)
                        with trio.move_on_after(2) as blocked:
                            await stream.send_all(frame)
                        if blocked.cancelled_caught:
                            hog["blocked_after"] = trio.current_time() - begin
                            break
                        hog["frames"] += 1
                        hog["bytes"] += len(frame)
                    # hold the connection, unread, while the rest of the load runs
                    await trio.sleep(max(0.0, HOG_SECONDS - (trio.current_time() - begin)))

            async def poll_connection(index: int, stop: trio.Event) -> None:
                per_conn = PARKED_POLLS // POLL_CONNECTIONS
                stream = await trio.open_tcp_stream("127.0.0.1", broker.port)
                decoder = FrameDecoder()
                opaque = index * 1_000_000
                sent_at: dict[int, tuple[float, int]] = {}  # opaque -> (when, queue id)

                async def send_poll(queue_id: int) -> None:
                    nonlocal opaque
                    opaque += 1
                    sent_at[opaque] = (trio.current_time(), queue_id)
                    polls["sent"] += 1
                    await stream.send_all(_pull("SoakPoll", "soak-poll", queue_id, opaque, suspend_ms=POLL_SUSPEND_MS))

                async with stream:
                    for j in range(per_conn):
                        await send_poll((index + j) % 4)
                    with trio.move_on_after(60):
                        while not (stop.is_set() and not sent_at):
                            data = await stream.receive_some(65536)
                            if not data:
                                raise AssertionError("the broker closed a long-polling connection")
                            decoder.feed(data)
                            for frame in decoder:
                                resp = RemotingCommand.decode(frame)
                                if not resp.is_response:
                                    continue
                                asked, queue_id = sent_at.pop(resp.opaque)
                                polls["answered"] += 1
                                if resp.code == ResponseCode.SUCCESS:
                                    polls["found"] += 1
                                    woken.append(trio.current_time() - waking_at[0])
                                elif trio.current_time() - asked < POLL_SUSPEND_MS / 1000 * 0.9:
                                    polls["answered_early"] += 1  # not parked for its suspend time
                                if not stop.is_set():
                                    await send_poll(queue_id)

            waking_at = [0.0]
            hostile_start = trio.current_time()
            async with trio.open_nursery() as hostile:
                hostile.start_soon(open_idle)
                hostile.start_soon(never_reads)
                for k in range(POLL_CONNECTIONS):
                    hostile.start_soon(poll_connection, k, waking)
                await trio.sleep(IDLE_TIMEOUT + 6)
                parked = polls["sent"] - polls["answered"]
                figures["parked"] = parked
                # one message per queue of SoakPoll: every parked poll must be answered at once
                waking_at[0] = trio.current_time()
                waking.set()
                for _ in range(8):
                    await producer.send(Message("SoakPoll", b"wake up"))
            figures["hostile_seconds"] = trio.current_time() - hostile_start
            stop_producing.set()
            await trio.sleep(3)  # connections gone, the broker settles
            rss_after = _rss_kb(pid)
            nursery.cancel_scope.cancel()

    hostile = latencies
    figures.update(
        connections=IDLE_CONNECTIONS + POLL_CONNECTIONS + 1,
        idle_closed=len(idle_closed_after),
        idle_closed_after_s=(min(idle_closed_after), max(idle_closed_after)) if idle_closed_after else None,
        hog=hog,
        polls=polls,
        wake_s=(max(woken) if woken else None),
        rss_mb=(rss_before / 1024, rss["peak"] / 1024, rss_after / 1024),
        sends=(len(calm), len(hostile)),
        latency_ms_calm=(1000 * statistics.median(calm), 1000 * _percentile(calm, 0.99)),
        latency_ms_hostile=(
            1000 * statistics.median(hostile),
            1000 * _percentile(hostile, 0.99),
            1000 * max(hostile),
        ),
        consumed=consumed,
    )
    print("\nsoak figures:", figures)

    assert len(idle_closed_after) == IDLE_CONNECTIONS, figures
    assert IDLE_TIMEOUT - 1 <= min(idle_closed_after) and max(idle_closed_after) <= IDLE_TIMEOUT + 10, figures
    assert hog["blocked_after"] is not None, f"the broker kept reading from a client that never reads: {figures}"
    assert figures["parked"] >= PARKED_POLLS * 0.95, figures
    assert polls["answered_early"] <= PARKED_POLLS * 0.05, figures
    assert polls["found"] >= PARKED_POLLS * 0.95 and max(woken) < 5, figures
    assert len(hostile) > 50 and _percentile(hostile, 0.99) < 1.0 and max(hostile) < 3.0, figures
    assert consumed > 0, figures
    grew, stayed = rss["peak"] - rss_before, rss_after - rss_before
    # The remoting layer stops reading a connection whose queued answers reach the outbox's
    # byte bound, so a client that sends pulls and never reads costs a few MiB, not a GiB.
    assert grew < MAX_RSS_GROWTH_KB and stayed < MAX_RSS_LEFT_KB, (
        f"broker RSS grew {grew // 1024} MiB, {stayed // 1024} MiB still held after: {figures}"
    )
