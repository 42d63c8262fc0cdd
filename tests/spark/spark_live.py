"""Our name server, broker and producer on 127.0.0.1, in a background thread running Trio.

Spark's Python workers pull from this broker with the blocking client while the test's
thread sends messages through `LiveCluster.send`, which runs the producer on the Trio
thread (trio.from_thread).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Self

import trio

from rmq.broker.config import BrokerConfig
from rmq.broker.controller import BrokerController
from rmq.client import Message, SendResult, open_producer
from rmq.namesrv.config import NamesrvConfig
from rmq.namesrv.server import NamesrvServer
from rmq_spark.pull_client import ClientError, QueueRef, fetch_route

START_TIMEOUT = 60.0


def broker_config(store: Path, namesrv: str) -> BrokerConfig:
    return BrokerConfig.from_properties(
        {
            "brokerClusterName": "SparkCluster",
            "brokerName": "broker-a",
            "brokerIP1": "127.0.0.1",
            "bindAddress": "127.0.0.1",
            "listenPort": "0",
            "storePathRootDir": str(store),
            "namesrvAddr": namesrv,
            "mappedFileSizeCommitLog": str(1024 * 1024),
            "mappedFileSizeConsumeQueue": str(300 * 20),
        },
        environ={},
    )


class LiveCluster:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.namesrv = ""
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._stop: trio.Event | None = None
        self._producer = None
        self._thread = threading.Thread(target=self._thread_main, name="live-cluster", daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        if not self._ready.wait(START_TIMEOUT) or self._error is not None:
            raise RuntimeError(f"the test cluster did not start: {self._error!r}")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._token is not None and self._stop is not None:
            trio.from_thread.run_sync(self._stop.set, trio_token=self._token)
        self._thread.join(START_TIMEOUT)

    def _thread_main(self) -> None:
        try:
            trio.run(self._main)
        except BaseException as exc:  # noqa: BLE001 - reported to the test thread by __enter__
            self._error = exc
            self._ready.set()

    async def _main(self) -> None:
        config = NamesrvConfig(listen_host="127.0.0.1", listen_port=0, kv_config_path=None)
        async with NamesrvServer(config) as namesrv, trio.open_nursery() as nursery:
            self.namesrv = namesrv.address
            broker = BrokerController(broker_config(self.root / "store", namesrv.address))
            await nursery.start(broker.serve)
            async with open_producer("spark-test-producer", namesrv=namesrv.address) as producer:
                self._producer = producer
                self._stop = trio.Event()
                self._token = trio.lowlevel.current_trio_token()
                self._ready.set()
                await self._stop.wait()
            broker.shutdown()
            await broker.wait_stopped()
            nursery.cancel_scope.cancel()

    async def _send(self, messages: Sequence[Message]) -> list[SendResult]:
        assert self._producer is not None
        return [await self._producer.send(m) for m in messages]

    def send(self, messages: Sequence[Message]) -> list[SendResult]:
        """Send from any thread but the Trio one; returns the send results in order."""
        assert self._token is not None
        return trio.from_thread.run(self._send, messages, trio_token=self._token)

    def wait_route(self, topic: str, timeout: float = 30.0) -> list[QueueRef]:
        """Queues of `topic` once the name server knows it (the broker registers it after creation)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                return fetch_route(self.namesrv, topic)
            except ClientError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
