"""Helpers for tests of rmq.remoting and of the packages built on it.

async with serve_on_loopback(dispatcher) as server:       # a real server on 127.0.0.1
    async with RemotingClient() as client:
        response = await client.invoke(server.address, request, timeout=3)

async with memory_connection_pair(server_dispatcher) as (client_side, server_side):
    response = await client_side.invoke(request, timeout=3)   # no sockets at all

async with raw_peer(dispatcher) as (peer, conn):             # hand-made frames in, exact frames out
    await peer.send(request); (response,) = await peer.receive_batch()
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio
import trio.testing

from rmq.protocol import RemotingCommand

from .abc import RequestContext
from .connection import Connection
from .dispatcher import Dispatcher
from .server import ConnectionHook, RemotingServer, ServerConfig
from .stages.codec import CommandStream


@asynccontextmanager
async def serve_on_loopback(
    dispatcher: Dispatcher | None = None,
    *,
    on_open: ConnectionHook | None = None,
    on_close: ConnectionHook | None = None,
    **config: Any,
) -> AsyncIterator[RemotingServer]:
    """Run a RemotingServer on 127.0.0.1 with a free port; yields it (`server.address`
    is "127.0.0.1:port"). `config` is passed to ServerConfig (e.g. ws_port=0,
    idle_timeout=5, tls_mode=..., ssl_context=...). Shut down gracefully on exit."""
    cfg = ServerConfig(**{"host": "127.0.0.1", "port": 0, "shutdown_grace": 1.0, **config})
    server = RemotingServer(
        dispatcher if dispatcher is not None else Dispatcher(), cfg, on_open=on_open, on_close=on_close
    )
    async with server:
        yield server


@asynccontextmanager
async def memory_connection_pair(
    server_dispatcher: Dispatcher | None = None, client_dispatcher: Dispatcher | None = None, **kwargs: Any
) -> AsyncIterator[tuple[Connection, Connection]]:
    """Two running Connections joined by in-memory streams: (client, server). The server
    side serves `server_dispatcher`, the client side `client_dispatcher` (for requests the
    server sends back). `kwargs` (outbox_size, max_in_flight, max_pending) go to both.
    Both are closed on exit."""
    left, right = trio.testing.memory_stream_pair()
    client = Connection(
        CommandStream(left), client_dispatcher, remote_address="memory:server", local_address="memory:client", **kwargs
    )
    server = Connection(
        CommandStream(right), server_dispatcher, remote_address="memory:client", local_address="memory:server", **kwargs
    )
    async with _running(client, server):
        yield client, server


@asynccontextmanager
async def raw_peer(
    dispatcher: Dispatcher | None = None, **kwargs: Any
) -> AsyncIterator[tuple[CommandStream, Connection]]:
    """A running Connection serving `dispatcher`, and the CommandStream of its peer, to
    send hand-made frames and read exactly what comes back. `kwargs` go to Connection."""
    left, right = trio.testing.memory_stream_pair()
    conn = Connection(
        CommandStream(right), dispatcher, remote_address="memory:peer", local_address="memory:conn", **kwargs
    )
    async with _running(conn):
        yield CommandStream(left), conn


@asynccontextmanager
async def _running(*connections: Connection) -> AsyncIterator[None]:
    """Run `connections` for the body's duration, then close them. The body's exception
    propagates as raised, not wrapped in an ExceptionGroup by the nursery."""
    error: BaseException | None = None
    async with trio.open_nursery() as nursery:
        for conn in connections:
            await nursery.start(conn.run)
        try:
            yield
        except BaseException as exc:  # noqa: BLE001 - re-raised below, outside the nursery
            error = exc
        finally:
            for conn in connections:
                conn.close()
    if error is not None:
        raise error


async def echo(ctx: RequestContext, request: RemotingCommand) -> RemotingCommand:
    """A processor answering SUCCESS with the request's extFields and body."""
    return request.make_response(ext_fields=dict(request.ext_fields), body=request.body)
