"""Broker test fixtures: `cluster` (a name server and a broker on 127.0.0.1, port 0)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

from rmq.namesrv.config import NamesrvConfig
from rmq.namesrv.server import NamesrvServer
from rmq.remoting import RemotingClient

from .cluster import Cluster, trio_wall_clock


@pytest.fixture
def broker_props() -> dict[str, str]:
    """Override in a test module (or parametrize) to change broker.conf keys."""
    return {}


@pytest.fixture
async def cluster(
    request: pytest.FixtureRequest, tmp_path: Path, broker_props: dict[str, str]
) -> AsyncIterator[Cluster]:
    config = NamesrvConfig(listen_host="127.0.0.1", listen_port=0, kv_config_path=None)
    mock_time = "autojump_clock" in request.fixturenames or "mock_clock" in request.fixturenames
    async with NamesrvServer(config) as namesrv, RemotingClient() as client, trio.open_nursery() as nursery:
        c = Cluster(
            nursery, namesrv, client, tmp_path / "store", broker_props, trio_wall_clock() if mock_time else None
        )
        await c.start()
        yield c
        await c.stop()
        nursery.cancel_scope.cancel()
