"""rmq's pytest plugin: a real name server and broker for tests of code that uses RocketMQ.

Installed with rmq (entry point ``pytest11``), so any project that has rmq gets:

* ``rmq_cluster``: an :class:`rmq.tools.embedded.EmbeddedCluster` on free ports of
  127.0.0.1 with a temporary store, started for the test and stopped after it. Its servers run
  in a background thread, so the test may be synchronous, Trio (pytest-trio) or asyncio, and
  the client may be ours, Java's or the official C++ client: pass ``rmq_cluster.namesrv``.
* ``rmq_producer`` / ``rmq_push_consumer`` / ``rmq_pull_consumer``: factories for our clients
  bound to that cluster, not started, in the flavour the test can use: rmq.client in a Trio
  test, rmq.client.aio in an asyncio test (``async with rmq_producer() as p: ...``),
  rmq.client.blocking in a plain one (``with rmq_producer() as p: ...``).
* ``@pytest.mark.rmq(virtual_clock=True, broker_config={...})`` configures the cluster of a
  test: with a virtual clock, ``rmq_cluster.advance(seconds)`` delivers delay-level and timer
  messages at once; ``broker_config`` takes broker.conf keys. ``--rmq-virtual-clock`` turns the
  virtual clock on for every test.

    def test_order_events(rmq_cluster):
        rmq_cluster.create_topic("Orders")
        my_app.publish_order(namesrv=rmq_cluster.namesrv)
        ...
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("rmq")
    group.addoption(
        "--rmq-virtual-clock",
        action="store_true",
        default=False,
        help="rmq_cluster brokers run on a virtual clock moved by rmq_cluster.advance()",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "rmq(virtual_clock=False, broker_config=None): configure the rmq_cluster fixture of a test"
    )


@pytest.fixture
def rmq_cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A name server and a broker for this test (see the module docstring)."""
    from rmq.tools.embedded import EmbeddedCluster

    marker = request.node.get_closest_marker("rmq")
    options = dict(marker.kwargs) if marker is not None else {}
    virtual = bool(options.pop("virtual_clock", request.config.getoption("--rmq-virtual-clock")))
    broker_config = options.pop("broker_config", None)
    if options:
        raise pytest.UsageError(f"unknown @pytest.mark.rmq options: {', '.join(options)}")
    store = tmp_path_factory.mktemp("rmq-store")
    with EmbeddedCluster(store, virtual_clock=virtual, broker_config=broker_config) as cluster:
        yield cluster


@pytest.fixture
def rmq_producer(rmq_cluster: Any) -> Callable[..., Any]:
    """``rmq_producer(group="...", **options)``: a Producer for ``rmq_cluster`` (not started)."""
    return rmq_cluster.producer  # type: ignore[no-any-return]


@pytest.fixture
def rmq_push_consumer(rmq_cluster: Any) -> Callable[..., Any]:
    """``rmq_push_consumer(group, **options)``: a PushConsumer for ``rmq_cluster``."""
    return rmq_cluster.push_consumer  # type: ignore[no-any-return]


@pytest.fixture
def rmq_pull_consumer(rmq_cluster: Any) -> Callable[..., Any]:
    """``rmq_pull_consumer(group, **options)``: a PullConsumer for ``rmq_cluster``."""
    return rmq_cluster.pull_consumer  # type: ignore[no-any-return]
