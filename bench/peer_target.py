"""rmq as a target of the peer benchmark harness (bench-peers: RabbitMQ, NATS, Redis).

Plug in, from the harness directory, with the project root on PYTHONPATH:

    BENCH_EXTRA_TARGETS="rocketmq=bench.peer_target:RocketMQTarget" PYTHONPATH=PROJECT_ROOT \\
        .venv/bin/python run_peers.py --only rocketmq,nats,redis --ratio-to rocketmq/async-flush

The orchestrator side starts a name server and a broker as two separate processes
(`python -m rmq namesrv` / `python -m rmq broker`) over a fresh store, restarting the
broker when the flush mode changes. The worker side is what a user writes: `Producer.send`
for every message and a `PullConsumer` polling the topic's one queue (auto commit), with the
producer's defaults. Among them is `auto_batch` (RocketMQ 5.x's autoBatch, on by default
since 2026-12-03): concurrent sends leave as batch requests, each still answered with its own
SendResult after the broker stored it (and flushed it, with SYNC_FLUSH); a lone send is a
plain one. The `-unbatched` variants turn it off: one request per message, the wire of
every send before (the `-batch` variants of older results turned it on).

The `-poll` variants have both sides poll for I/O briefly before they sleep
(rmq.remoting.busypoll: `busyPollMicros` for the broker, `busy_poll_micros` for the client),
as a user after the lowest latency would set them: the clients 300 µs (an answer to a
request in flight comes sooner), the broker 1,000 µs, which covers S4's gap between two
messages at 1,000 msg/s, so the next send finds it awake, at the cost of spinning through
that gap (about a third of a core more in S4).

The `-sendbatch` variants replace the harness's sliding window (S2, S3 and S5's preload) by
RocketMQ's batch send: `window` messages per `Producer.send_batch` call, one request and one
round trip each, as the harness drives Redis with pipelines of `window` XADDs. A user who
has many messages at hand sends them this way; the sliding window is what concurrent
callers of `send` get. The `-sendbatch-poll` variants do both: what a user who has messages
at hand and wants the lowest latency for single sends would configure.
"""

from __future__ import annotations

import array
import functools
import os
import shutil
import sys
import time
from dataclasses import dataclass
from typing import Any

from harness.core import (
    HOST,
    ManagedProcess,
    Target,
    dist_version,
    lat_to_bytes,
    make_body,
    port_free,
    tcp_ready,
    wait_until,
)
from harness.trioclient import TrioClient

NAMESRV_PORT = 23876  # below 32768: outside the ephemeral range
BROKER_PORT = 23911  # the broker also binds listenPort - 2 (VIP) and listenPort + 1 (HA)
PROJECT_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUSY_POLL_MICROS = 300  # -poll variants: the clients' busy_poll_micros
BROKER_BUSY_POLL_MICROS = 1000  # -poll variants: the broker's busyPollMicros


_FLUSH_SAYS = {
    "SYNC_FLUSH": "SYNC_FLUSH: answer after the commit log flush (group commit)",
    "ASYNC_FLUSH": "ASYNC_FLUSH: answer after the page-cache write; flushed in the background",
}


@dataclass(frozen=True)
class Variant:
    flush: str  # the broker's flushDiskType
    auto_batch: bool = True  # Producer's auto_batch (its default): concurrent sends leave as batch requests
    send_batch: bool = False  # window mode sends `window` messages per Producer.send_batch call
    busy_poll: bool = False  # clients poll BUSY_POLL_MICROS, the broker BROKER_BUSY_POLL_MICROS

    @property
    def says(self) -> str:
        """What the harness prints as the variant's durability."""
        parts = [_FLUSH_SAYS[self.flush]]
        if self.auto_batch and not self.send_batch:
            parts.append("producer auto_batch, the default (concurrent sends coalesced into batch requests)")
        elif not self.send_batch:
            parts.append("producer auto_batch off (one request per message)")
        if self.send_batch:
            parts.append("window mode: batches of `window` messages per send_batch call (as Redis pipelines them)")
        if self.busy_poll:
            parts.append(
                f"clients poll {BUSY_POLL_MICROS} µs and the broker {BROKER_BUSY_POLL_MICROS} µs before sleeping"
                " (busy polling)"
            )
        return ", ".join(parts)


VARIANTS = {
    "async-flush": Variant("ASYNC_FLUSH"),
    "sync-flush": Variant("SYNC_FLUSH"),
    "async-flush-unbatched": Variant("ASYNC_FLUSH", auto_batch=False),
    "sync-flush-unbatched": Variant("SYNC_FLUSH", auto_batch=False),
    "async-flush-poll": Variant("ASYNC_FLUSH", busy_poll=True),
    "sync-flush-poll": Variant("SYNC_FLUSH", busy_poll=True),
    "async-flush-unbatched-poll": Variant("ASYNC_FLUSH", auto_batch=False, busy_poll=True),
    "sync-flush-unbatched-poll": Variant("SYNC_FLUSH", auto_batch=False, busy_poll=True),
    "async-flush-sendbatch": Variant("ASYNC_FLUSH", send_batch=True),
    "sync-flush-sendbatch": Variant("SYNC_FLUSH", send_batch=True),
    "async-flush-sendbatch-poll": Variant("ASYNC_FLUSH", send_batch=True, busy_poll=True),
    "sync-flush-sendbatch-poll": Variant("SYNC_FLUSH", send_batch=True, busy_poll=True),
}


@functools.lru_cache(maxsize=64)
def _topic(dest: str) -> str:
    # harness destinations may hold dots and dashes; topics allow [A-Za-z0-9_%|-]. Cached: a
    # user names a topic once, not per send (this cost 2 µs of a send's 20-25 in S3)
    return "".join(c if c.isalnum() or c in "_-" else "_" for c in dest)


def _busy_poll_micros(variant: str) -> int:
    return BUSY_POLL_MICROS if VARIANTS[variant].busy_poll else 0


def _broker_busy_poll_micros(variant: str) -> int:
    return BROKER_BUSY_POLL_MICROS if VARIANTS[variant].busy_poll else 0


class RocketMQTarget(Target):
    name = "rocketmq"
    variants = tuple(VARIANTS)
    client_class = "bench.peer_target:RocketMQClient"
    durability = {name: v.says for name, v in VARIANTS.items()}

    def __init__(self, workdir: str) -> None:
        super().__init__(workdir)
        self.dir = os.path.join(workdir, "rocketmq")
        self.namesrv: ManagedProcess | None = None
        self.broker: ManagedProcess | None = None
        self.variant: str | None = None

    def available(self) -> str | None:
        for port in (NAMESRV_PORT, BROKER_PORT - 2, BROKER_PORT, BROKER_PORT + 1):
            if not port_free(port):
                return f"port {port} busy"
        return None

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["PYTHONPATH"] = PROJECT_ROOT + os.pathsep + env.get("PYTHONPATH", "")
        return env

    def start(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir)
        argv = [sys.executable, "-m", "rmq", "namesrv", "--host", HOST, "-p", str(NAMESRV_PORT)]
        argv += ["--log-level", "WARNING"]
        self.namesrv = ManagedProcess(
            "mqnamesrv", argv, env=self._env(), log_path=os.path.join(self.dir, "namesrv.log")
        )
        self.namesrv.start()
        wait_until(lambda: tcp_ready(NAMESRV_PORT), 30, what="name server port", proc=self.namesrv)
        self._start_broker("async-flush")

    def _start_broker(self, variant: str) -> None:
        if self.broker is not None:
            self.broker.stop(timeout=20)
        store = os.path.join(self.dir, "store")
        shutil.rmtree(store, ignore_errors=True)
        conf = os.path.join(self.dir, "broker.conf")
        with open(conf, "w") as f:
            f.write(
                f"brokerName=bench\nbrokerIP1={HOST}\nlistenPort={BROKER_PORT}\n"
                f"namesrvAddr={HOST}:{NAMESRV_PORT}\nflushDiskType={VARIANTS[variant].flush}\n"
                f"storePathRootDir={store}\nautoCreateTopicEnable=false\n"
                f"busyPollMicros={_broker_busy_poll_micros(variant)}\n"
            )
        argv = [sys.executable, "-m", "rmq", "broker", "-c", conf, "--log-level", "WARNING"]
        self.broker = ManagedProcess("mqbroker", argv, env=self._env(), log_path=os.path.join(self.dir, "broker.log"))
        self.broker.start()
        wait_until(lambda: tcp_ready(BROKER_PORT), 30, what="broker port", proc=self.broker)
        self.variant = variant

    def stop(self) -> None:
        for proc in (self.broker, self.namesrv):
            if proc is not None:
                proc.stop(timeout=20)
        self.broker = self.namesrv = None

    def server_cpu_seconds(self) -> float | None:
        # the broker alone: the name server idles after the first route lookup
        return self.broker.cpu_seconds() if self.broker is not None else None

    def versions(self) -> dict[str, str]:
        return {"rmq": dist_version("rmq"), "trio": dist_version("trio"), "python": sys.version.split()[0]}

    def select_variant(self, variant: str) -> None:
        if variant != self.variant:  # a fresh store per variant: topics and groups repeat
            self._start_broker(variant)

    def prepare(self, dest: str, variant: str) -> None:
        import trio

        sys.path.insert(0, PROJECT_ROOT)
        from rmq.client import MQAdmin
        from rmq.client.admin import TopicConfig

        async def create() -> None:
            async with MQAdmin(f"{HOST}:{NAMESRV_PORT}", timeout=10) as admin:
                config = TopicConfig(_topic(dest), read_queue_nums=1, write_queue_nums=1)
                await admin.create_topic(f"{HOST}:{BROKER_PORT}", config)
                with trio.fail_after(30):  # until the name server has the route
                    while True:
                        try:
                            await admin.topic_route(_topic(dest))
                            return
                        except Exception:  # noqa: BLE001 - not registered yet
                            await trio.sleep(0.1)

        trio.run(create)

    def client_config(self, variant: str) -> dict[str, Any]:
        return {"namesrv": f"{HOST}:{NAMESRV_PORT}", "variant": variant}


class RocketMQClient(TrioClient):
    """Our own client, used as a user would: one Producer, one PullConsumer.

    Each one lives in a task of the harness's nursery (its context opens a nursery, which
    must not straddle the harness's timeouts around open/close)."""

    async def open(self) -> None:
        import trio

        from rmq.client import Message, Producer, SendStatus

        self._message, self._send_ok = Message, SendStatus.SEND_OK  # looked up once, not per send
        self._done = trio.Event()
        self.consumer: Any = None
        batch = VARIANTS[self.cfg["variant"]].auto_batch
        self.producer = await self.nursery.start(
            self._hold,
            Producer(
                "bench_peer_producer",
                self.cfg["namesrv"],
                send_timeout=30.0,
                auto_batch=batch,
                busy_poll_micros=_busy_poll_micros(self.cfg["variant"]),
            ),
        )

    async def _hold(self, service: Any, task_status: Any) -> None:
        async with service as running:
            task_status.started(running)
            await self._done.wait()

    async def close(self) -> None:
        self._done.set()

    async def send(self, dest: str, body: bytes) -> None:
        result = await self.producer.send(self._message(_topic(dest), body))
        if result.status is not self._send_ok:
            raise RuntimeError(f"send status {result.status}")

    async def produce_window(self, p: dict[str, Any]) -> dict[str, Any]:
        """``window`` messages per ``send_batch`` call and round trip in the ``-sendbatch``
        variants (RocketMQ's batch send: one request, stored and acknowledged together), as
        the harness drives Redis with pipelines of ``window`` XADDs; each message's latency is
        its batch's round trip. The other variants keep the harness's sliding window."""
        if not VARIANTS[self.cfg["variant"]].send_batch:
            return await super().produce_window(p)
        message, producer, ok = self._message, self.producer, self._send_ok
        body, topic, count, window = make_body(p["body_size"]), _topic(p["dest"]), p["count"], p["window"]
        lat = array.array("d")
        t0 = time.perf_counter()
        deadline = t0 + p["seconds"]
        n = 0
        while n < count and time.perf_counter() < deadline:
            k = min(window, count - n)
            batch = [message(topic, body) for _ in range(k)]
            sent = time.perf_counter()
            for result in await producer.send_batch(batch):
                if result.status is not ok:
                    raise RuntimeError(f"send status {result.status}")
            lat.extend([(time.perf_counter() - sent) * 1000.0] * k)
            n += k
        return {"count": n, "t_start": t0, "t_end": time.perf_counter(), "lat": lat_to_bytes(lat)}

    async def consumer_open(self, dest: str) -> None:
        from rmq.client import ConsumeFromWhere, PullConsumer

        consumer = PullConsumer(
            f"bench_peer_{_topic(dest)}",
            self.cfg["namesrv"],
            consume_from_where=ConsumeFromWhere.FIRST_OFFSET,
            busy_poll_micros=_busy_poll_micros(self.cfg["variant"]),
        )
        consumer.subscribe(_topic(dest))
        self.consumer = await self.nursery.start(self._hold, consumer)

    async def receive(self, timeout: float) -> list[bytes]:
        return [m.body for m in await self.consumer.poll(timeout)]
