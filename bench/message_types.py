"""Message-type benchmark: timer and delay-level accuracy, transactions and retries per second.

    python bench/message_types.py [--rate 1000] [--seconds 3] [--transactions 2000] [--retries 2000]

One in-process broker (real sockets on 127.0.0.1, a temporary store, every delay level
1 s) and a raw-protocol load generator in the same Trio run, so the figures include the
generator's cost on the same cores.

1. Timer messages: `rate` per second for `seconds` seconds, each due 1-1.5 s after it is
   sent (TIMER_DELIVER_MS); lateness = store time of the delivered copy - the time asked.
2. Delay level 1: the same load with DELAY=1; lateness against the delivery time the
   consume queue holds (store time + 1 s).
3. Transactions: half message + END_TRANSACTION commit, 32 at a time, until every
   committed message is in its queue.
4. Retries: CONSUMER_SEND_MSG_BACK, 32 at a time, then until every retry copy is in
   %RETRY%<group> (through delay level 3 = 1 s here).

Every phase is bounded by its count and a time limit.
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import trio

from rmq.broker.config import BrokerConfig
from rmq.broker.controller import BrokerController
from rmq.broker.schedule import DELIVERED_FROM
from rmq.protocol import RemotingCommand, RequestCode, ResponseCode
from rmq.protocol import properties as P
from rmq.protocol.headers import EndTransactionRequestHeader, SendMessageRequestHeader
from rmq.protocol.message import iter_records, parse_offset_msg_id
from rmq.remoting import RemotingClient

PHASE_LIMIT = 120.0  # seconds any one phase may take
CONCURRENCY = 32
BODY = b"x" * 256


def send_request(topic: str, props: dict[str, str], queue_id: int = 0, sys_flag: int = 0) -> RemotingCommand:
    header = SendMessageRequestHeader(
        producer_group="BENCH_PG",
        topic=topic,
        queue_id=queue_id,
        sys_flag=sys_flag,
        born_timestamp=int(time.time() * 1000),
        properties=P.encode_properties(props),
    )
    return RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, header.to_v2_ext(), BODY)


async def call(client: RemotingClient, addr: str, request: RemotingCommand) -> RemotingCommand:
    response = await client.invoke(addr, request, 10)
    if response.code != ResponseCode.SUCCESS:
        raise RuntimeError(f"request {request.code} failed: {response.code} {response.remark}")
    return response


async def run_pool(count: int, work: Callable[[int], Awaitable[None]]) -> float:
    """Run work(0..count-1), CONCURRENCY at a time; seconds taken."""
    start = time.perf_counter()
    it = iter(range(count))

    async def worker() -> None:
        for i in it:
            await work(i)

    with trio.move_on_after(PHASE_LIMIT):
        async with trio.open_nursery() as nursery:
            for _ in range(CONCURRENCY):
                nursery.start_soon(worker)
    return time.perf_counter() - start


async def paced(rate: int, seconds: float, send: Callable[[int], Awaitable[None]]) -> int:
    """Start `rate` sends per second for `seconds`; returns how many were sent."""
    total = int(rate * seconds)
    sent = 0
    start = trio.current_time()

    async def one(i: int) -> None:
        nonlocal sent
        await send(i)
        sent += 1

    with trio.move_on_after(PHASE_LIMIT):
        async with trio.open_nursery() as nursery:
            for i in range(total):
                await trio.sleep_until(start + i / rate)
                nursery.start_soon(one, i)
    return sent


async def wait_queued(broker: BrokerController, topic: str, queues: int, count: int) -> float:
    start = time.perf_counter()
    store = broker.message_store
    with trio.move_on_after(PHASE_LIMIT):
        while sum(store.get_max_offset_in_queue(topic, q) for q in range(queues)) < count:
            await trio.sleep(0.05)
    return time.perf_counter() - start


def read_queue(broker: BrokerController, topic: str, queue_id: int) -> list[Any]:
    store = broker.message_store
    out: list[Any] = []
    offset = 0
    while True:
        result = store.get_message(topic, queue_id, offset, 32)
        if not result.records:
            return out
        out += list(iter_records(result.body))
        offset = result.next_begin_offset


def quantiles(values: list[float]) -> str:
    if not values:
        return "no samples"
    values = sorted(values)

    def p(q: float) -> float:
        return values[min(len(values) - 1, int(q * len(values)))]

    return (
        f"p50 {p(0.50):6.1f} ms   p99 {p(0.99):6.1f} ms   max {values[-1]:6.1f} ms   "
        f"mean {statistics.fmean(values):6.1f} ms   ({len(values)} messages)"
    )


async def bench_timers(broker: BrokerController, client: RemotingClient, rate: int, seconds: float) -> None:
    addr = broker.address

    async def send(i: int) -> None:
        due = int(time.time() * 1000) + 1000 + random.randrange(500)
        await call(client, addr, send_request("BenchTimer", {P.TIMER_DELIVER_MS: str(due)}))

    sent = await paced(rate, seconds, send)
    await wait_queued(broker, "BenchTimer", 1, sent)
    late = [m.store_timestamp - int(m.properties[P.TIMER_DELIVER_MS]) for m in read_queue(broker, "BenchTimer", 0)]
    print(f"timer messages   {rate}/s for {seconds:.0f} s, lateness: {quantiles(late)}")


async def bench_delay_level(broker: BrokerController, client: RemotingClient, rate: int, seconds: float) -> None:
    addr = broker.address

    async def send(i: int) -> None:
        await call(client, addr, send_request("BenchDelay", {P.DELAY: "1"}))

    sent = await paced(rate, seconds, send)
    await wait_queued(broker, "BenchDelay", 1, sent)
    store = broker.message_store
    late = []
    for m in read_queue(broker, "BenchDelay", 0):
        level, _, offset = m.properties[DELIVERED_FROM].partition(":")
        ((_, _, _, due),) = store.read_consume_queue("SCHEDULE_TOPIC_XXXX", int(level) - 1, int(offset), 1)
        late.append(m.store_timestamp - due)
    print(f"delay level 1    {rate}/s for {seconds:.0f} s, lateness: {quantiles(late)}")


async def bench_transactions(broker: BrokerController, client: RemotingClient, count: int) -> None:
    addr = broker.address

    async def transaction(i: int) -> None:
        props = {P.TRAN_MSG: "true", P.PGROUP: "BENCH_PG", P.UNIQ_KEY: f"TX{i}"}
        r = await call(client, addr, send_request("BenchTx", props, sys_flag=0x4))
        end = EndTransactionRequestHeader(
            producer_group="BENCH_PG",
            tran_state_table_offset=int(r.ext_fields["queueOffset"]),
            commit_log_offset=parse_offset_msg_id(r.ext_fields["msgId"])[2],
            commit_or_rollback=0x8,
            msg_id=f"TX{i}",
        )
        await client.invoke_oneway(addr, RemotingCommand.request(RequestCode.END_TRANSACTION, end.to_ext()), 10)

    sent_in = await run_pool(count, transaction)
    done_in = sent_in + await wait_queued(broker, "BenchTx", 1, count)
    print(
        f"transactions     {count} half + commit: {count / done_in:8.0f} tx/s "
        f"(all committed messages queued after {done_in:.2f} s)"
    )


async def bench_retries(broker: BrokerController, client: RemotingClient, count: int) -> None:
    addr = broker.address
    offsets = []

    async def put(i: int) -> None:
        r = await call(client, addr, send_request("BenchRetry", {P.UNIQ_KEY: f"R{i}"}))
        offsets.append(parse_offset_msg_id(r.ext_fields["msgId"])[2])

    await run_pool(count, put)

    async def send_back(i: int) -> None:
        ext = {"group": "BENCH_CG", "offset": offsets[i], "delayLevel": 0, "originTopic": "BenchRetry"}
        await call(client, addr, RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK, ext))

    back_in = await run_pool(len(offsets), send_back)
    landed_in = await wait_queued(broker, "%RETRY%BENCH_CG", 1, len(offsets))
    print(
        f"retries          {len(offsets)} CONSUMER_SEND_MSG_BACK: {len(offsets) / back_in:8.0f} /s; "
        f"all in %RETRY% {landed_in:.2f} s later (delay level 3 = 1 s here)"
    )


async def main(args: argparse.Namespace) -> None:
    root = Path(tempfile.mkdtemp(prefix="rmq-bench-types-"))
    try:
        config = BrokerConfig.from_properties(
            {
                "brokerName": "bench",
                "brokerIP1": "127.0.0.1",
                "bindAddress": "127.0.0.1",
                "listenPort": "0",
                "vipChannelEnable": "false",
                "storePathRootDir": str(root),
                "mappedFileSizeCommitLog": str(256 * 1024 * 1024),
                "messageDelayLevel": " ".join(["1s"] * 18),
            },
            environ={},
        )
        async with BrokerController(config) as broker, RemotingClient() as client:
            await bench_timers(broker, client, args.rate, args.seconds)
            await bench_delay_level(broker, client, args.rate, args.seconds)
            await bench_transactions(broker, client, args.transactions)
            await bench_retries(broker, client, args.retries)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=int, default=1000, help="timer / delayed messages per second")
    parser.add_argument("--seconds", type=float, default=3.0, help="seconds of timer / delayed load")
    parser.add_argument("--transactions", type=int, default=2000)
    parser.add_argument("--retries", type=int, default=2000)
    trio.run(main, parser.parse_args())
