"""Name servers on 127.0.0.1 (port 0) and a client to talk to them."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from rmq.namesrv import NamesrvServer
from rmq.remoting import ClientConfig, RemotingClient

from .helpers import loopback_config

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path


@pytest.fixture
async def namesrv(tmp_path: Path) -> AsyncIterator[NamesrvServer]:
    async with NamesrvServer(loopback_config(tmp_path)) as server:
        yield server


@pytest.fixture
async def client() -> AsyncIterator[RemotingClient]:
    # no client idle timeout: long autojump sleeps must not close connections on this side
    async with RemotingClient(ClientConfig(idle_timeout=None)) as c:
        yield c
