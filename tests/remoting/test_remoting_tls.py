"""TLS in its three server modes (RocketMQ's tls.server.mode), with trustme certificates."""

from __future__ import annotations

import logging
import ssl

import pytest
import trio
import trustme

from rmq.protocol import RemotingCommand, RequestCode, ResponseCode
from rmq.remoting import (
    ClientConfig,
    Dispatcher,
    RemotingClient,
    RemotingConnectError,
    RemotingServer,
    TlsMode,
)
from rmq.remoting.testing import echo, serve_on_loopback


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture(scope="module")
def server_context(ca: trustme.CA) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1", "localhost").configure_cert(context)
    return context


@pytest.fixture(scope="module")
def client_context(ca: trustme.CA) -> ssl.SSLContext:
    context = ssl.create_default_context()
    ca.configure_trust(context)
    return context


def echo_dispatcher() -> Dispatcher:
    d = Dispatcher()
    d.register(RequestCode.SEND_MESSAGE, echo)
    return d


async def roundtrip(client: RemotingClient, server: RemotingServer) -> RemotingCommand:
    return await client.invoke(server.address, RemotingCommand.request(RequestCode.SEND_MESSAGE, {"k": "v"}), 3)


async def test_permissive_accepts_plain_and_tls_on_one_port(
    server_context: ssl.SSLContext, client_context: ssl.SSLContext, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="rmq.remoting")
    async with serve_on_loopback(echo_dispatcher(), tls_mode=TlsMode.PERMISSIVE, ssl_context=server_context) as server:
        async with RemotingClient(ClientConfig(tls=True, ssl_context=client_context)) as tls_client:
            assert (await roundtrip(tls_client, server)).ext_fields == {"k": "v"}
        async with RemotingClient() as plain_client:
            assert (await roundtrip(plain_client, server)).code == ResponseCode.SUCCESS
    opened = [r.getMessage() for r in caplog.records if "opened" in r.getMessage()]
    assert len(opened) == 2 and opened[0].endswith("with TLS") and not opened[1].endswith("with TLS")


async def test_enforcing_refuses_plain(
    server_context: ssl.SSLContext, client_context: ssl.SSLContext, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="rmq.remoting")
    async with serve_on_loopback(echo_dispatcher(), tls_mode=TlsMode.ENFORCING, ssl_context=server_context) as server:
        async with RemotingClient(ClientConfig(tls=True, ssl_context=client_context)) as tls_client:
            assert (await roundtrip(tls_client, server)).code == ResponseCode.SUCCESS
        async with RemotingClient() as plain_client:
            with pytest.raises(RemotingConnectError) as info:
                await roundtrip(plain_client, server)
            assert info.value.address == server.address
    assert any("refused" in r.getMessage() and "enforces TLS" in r.getMessage() for r in caplog.records)


async def test_disabled_refuses_tls(
    server_context: ssl.SSLContext, client_context: ssl.SSLContext, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="rmq.remoting")
    async with serve_on_loopback(echo_dispatcher(), tls_mode=TlsMode.DISABLED, ssl_context=server_context) as server:
        async with RemotingClient(ClientConfig(tls=True, ssl_context=client_context)) as tls_client:
            with pytest.raises(RemotingConnectError) as info:
                await roundtrip(tls_client, server)
            assert server.address in str(info.value) and "TLS handshake failed" in str(info.value)
        async with RemotingClient() as plain_client:
            assert (await roundtrip(plain_client, server)).code == ResponseCode.SUCCESS
    assert any("TLS is disabled" in r.getMessage() for r in caplog.records)


async def test_untrusted_server_certificate(server_context: ssl.SSLContext) -> None:
    other = ssl.create_default_context()
    trustme.CA().configure_trust(other)
    async with serve_on_loopback(echo_dispatcher(), tls_mode=TlsMode.ENFORCING, ssl_context=server_context) as server:
        async with RemotingClient(ClientConfig(tls=True, ssl_context=other)) as client:
            with pytest.raises(RemotingConnectError, match="TLS handshake failed"):
                await roundtrip(client, server)
        # the server survived the failed handshake
        good = ssl.create_default_context()
        async with RemotingClient(ClientConfig(tls=True, ssl_context=good)) as client:
            with pytest.raises(RemotingConnectError):
                await roundtrip(client, server)


async def test_handshake_timeout(server_context: ssl.SSLContext) -> None:
    async with serve_on_loopback(
        echo_dispatcher(), tls_mode=TlsMode.ENFORCING, ssl_context=server_context, handshake_timeout=0.2
    ) as server:
        assert server.port is not None
        stream = await trio.open_tcp_stream("127.0.0.1", server.port)
        await stream.send_all(b"\x16\x03\x01")  # the start of a ClientHello, then nothing
        with trio.fail_after(3):
            try:
                assert await stream.receive_some() == b""
            except trio.BrokenResourceError:
                pass
        await stream.aclose()
