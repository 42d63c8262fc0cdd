"""EmbeddedCluster: a name server and a broker in a background thread, for tests and notebooks.

    with EmbeddedCluster() as cluster:             # free ports on 127.0.0.1, a temporary store
        cluster.create_topic("Orders")
        print(cluster.namesrv)                     # give it to any client: ours, Java's, C++

The servers run in their own thread with their own Trio loop, so the calling code may be
synchronous (the C++ client, a blocking script), Trio or asyncio alike: nothing it does
blocks the servers. The client factories (``producer()``, ``push_consumer()``,
``pull_consumer()``) give the flavour the caller can use: rmq.client in a Trio task,
rmq.client.aio in an asyncio task, rmq.client.blocking elsewhere. With
``virtual_clock=True``, ``advance(seconds)`` moves the broker's clock forward: delay levels
and timer messages come due at once instead of after real minutes (store timestamps follow
the same clock; client liveness and timeouts keep real time).
"""

from __future__ import annotations

import inspect
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import sniffio
import trio

from rmq import metrics
from rmq.broker.config import BrokerConfig
from rmq.broker.controller import BrokerController
from rmq.client import MQAdmin, aio, blocking
from rmq.client import Producer as TrioProducer
from rmq.client import PullConsumer as TrioPullConsumer
from rmq.client import PushConsumer as TrioPushConsumer
from rmq.namesrv.config import NamesrvConfig
from rmq.namesrv.server import NamesrvServer
from rmq.protocol.bodies.configs import TopicConfig

START_TIMEOUT = 30.0


class EmbeddedCluster:
    """Args:
    store: the broker's store directory (default: a temporary one, removed at close).
    virtual_clock: let ``advance`` move the broker's clock forward.
    broker_config: extra broker.conf keys (e.g. ``{"flushDiskType": "SYNC_FLUSH"}``).
    """

    def __init__(
        self,
        store: str | Path | None = None,
        *,
        virtual_clock: bool = False,
        broker_config: Mapping[str, str] | None = None,
    ) -> None:
        self._own_store = store is None
        self.store = Path(store) if store is not None else Path(tempfile.mkdtemp(prefix="rmq-embedded-"))
        self.virtual_clock = virtual_clock
        self._props = dict(broker_config or {})
        self._clock_offset_ms = 0  # how far advance() has moved the broker's clock
        self._token: trio.lowlevel.TrioToken | None = None
        self._stop: trio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        self.namesrv = ""  # "127.0.0.1:port", what clients take as namesrv=
        self.broker_addr = ""
        self.broker: BrokerController | None = None

    # -- lifetime ------------------------------------------------------------------------------

    def start(self) -> Self:
        """Start the servers; returns once both serve. Raises what stopped them from starting."""
        self._thread = threading.Thread(target=self._run, name="rmq-embedded", daemon=True)
        self._thread.start()
        if not self._ready.wait(START_TIMEOUT):
            raise TimeoutError(f"the embedded cluster did not start within {START_TIMEOUT} s")
        if self._error is not None:
            raise self._error
        return self

    def close(self) -> None:
        """Stop the broker and the name server cleanly (offsets and store flushed)."""
        if self._thread is None:
            return
        if self._token is not None and self._stop is not None:
            try:
                trio.from_thread.run_sync(self._stop.set, trio_token=self._token)
            except trio.RunFinishedError:
                pass
        self._thread.join(START_TIMEOUT)
        self._thread = None
        if self._own_store:
            shutil.rmtree(self.store, ignore_errors=True)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _run(self) -> None:
        try:
            trio.run(self._main)
        except BaseException as exc:  # noqa: BLE001 - reported to the starting thread
            self._error = exc
        finally:
            self._ready.set()

    async def _main(self) -> None:
        metrics.install()  # broker_config={"metricsExporterType": "PROM"} serves metrics
        self._token = trio.lowlevel.current_trio_token()
        self._stop = trio.Event()

        def clock_ms() -> int:
            return time.time_ns() // 1_000_000 + self._clock_offset_ms

        ns_config = NamesrvConfig(listen_host="127.0.0.1", listen_port=0, kv_config_path=None)
        async with NamesrvServer(ns_config) as namesrv, trio.open_nursery() as nursery:
            props = {
                "brokerClusterName": "EmbeddedCluster",
                "brokerName": "broker-a",
                "brokerIP1": "127.0.0.1",
                "bindAddress": "127.0.0.1",
                "listenPort": "0",
                "storePathRootDir": str(self.store),
                "namesrvAddr": namesrv.address,
                "mappedFileSizeCommitLog": str(64 * 1024 * 1024),
                **self._props,
            }
            broker = BrokerController(BrokerConfig.from_properties(props, environ={}), clock_ms=clock_ms)
            await nursery.start(broker.serve)
            self.broker = broker
            self.namesrv = namesrv.address
            self.broker_addr = broker.address
            self._ready.set()
            await self._stop.wait()
            broker.shutdown()
            await broker.wait_stopped()
            nursery.cancel_scope.cancel()

    @property
    def namesrv_addr(self) -> str:
        """The name server's address (older spelling of ``namesrv``)."""
        return self.namesrv

    # -- helpers -------------------------------------------------------------------------------

    def advance(self, seconds: float) -> None:
        """Move the broker's clock forward (``virtual_clock=True`` only): delay levels and
        timer messages due by then are delivered at once. Everything else (client liveness,
        timeouts) keeps real time. Callable from any thread, a Trio or asyncio test's too."""
        if not self.virtual_clock:
            raise RuntimeError("advance() needs EmbeddedCluster(virtual_clock=True)")
        broker = self.broker
        assert broker is not None

        def jump() -> None:
            self._clock_offset_ms += int(seconds * 1000)
            broker.clock_jumped()

        self._in_loop(jump)

    def _in_loop(self, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` (a function, or an async function) in the servers' loop and wait for it.

        TrioToken.run_sync_soon works from any thread, also one running its own Trio or
        asyncio loop (trio.from_thread refuses those); the caller blocks for the moment it takes.
        """
        if self._token is None:
            raise RuntimeError("the embedded cluster is not running")
        done = threading.Event()
        box: list[tuple[bool, Any]] = []

        async def run_async() -> None:
            try:
                box.append((True, await fn()))
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                box.append((False, exc))
            finally:
                done.set()

        def run() -> None:
            if inspect.iscoroutinefunction(fn):
                trio.lowlevel.spawn_system_task(run_async)
                return
            try:
                box.append((True, fn()))
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                box.append((False, exc))
            done.set()

        self._token.run_sync_soon(run)
        if not done.wait(START_TIMEOUT):
            raise TimeoutError("the embedded cluster did not answer")
        ok, value = box[0]
        if not ok:
            raise value
        return value

    def create_topic(self, topic: str, queues: int = 4, *, order: bool = False) -> None:
        """Create (or update) a topic on the broker; it registers with the name server at once."""
        broker = self.broker
        assert broker is not None
        self._in_loop(lambda: broker.topics.update(TopicConfig(topic, queues, queues, order=order)))

    # Client factories: not started; ``async with cluster.producer() as p`` in a Trio or
    # asyncio task, ``with cluster.producer() as p`` in plain code.

    def producer(self, group: str = "embedded-producer", **options: Any) -> Any:
        return _FLAVOURS[_flavour()][0](group, namesrv=self.namesrv, **options)

    def push_consumer(self, group: str, **options: Any) -> Any:
        return _FLAVOURS[_flavour()][1](group, namesrv=self.namesrv, **options)

    def pull_consumer(self, group: str, **options: Any) -> Any:
        return _FLAVOURS[_flavour()][2](group, namesrv=self.namesrv, **options)

    def admin(self) -> MQAdmin:
        return MQAdmin(namesrv=self.namesrv)


# (producer, push consumer, pull consumer) classes of each client flavour
_FLAVOURS: dict[str, tuple[Callable[..., Any], Callable[..., Any], Callable[..., Any]]] = {
    "trio": (TrioProducer, TrioPushConsumer, TrioPullConsumer),
    "asyncio": (aio.Producer, aio.PushConsumer, aio.PullConsumer),
    "blocking": (blocking.Producer, blocking.PushConsumer, blocking.PullConsumer),
}


def _flavour() -> str:
    """The flavour for the caller: trio or asyncio in such a task, else blocking."""
    try:
        library = sniffio.current_async_library()
    except sniffio.AsyncLibraryNotFoundError:
        return "blocking"
    return library if library in _FLAVOURS else "blocking"
