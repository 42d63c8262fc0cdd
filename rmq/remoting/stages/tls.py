"""TLS stage: RocketMQ's TlsModeHandler + SslHandler as two plain async functions.

Server side, `negotiate()` reads the first chunk a client sends. A TLS connection always
starts with a handshake record, whose first byte is 0x16; a RocketMQ frame starts with a
big-endian length, whose first byte is 0 for any frame below 16 MiB. So one byte decides,
and the chunk is handed back to the next stage through a PrefixedStream:

    mode         first byte 0x16                 anything else
    DISABLED     rejected                        plain stream
    PERMISSIVE   SSLStream after the handshake   plain stream
    ENFORCING    SSLStream after the handshake   rejected

Client side, `wrap_client()` wraps a connected stream and completes the handshake.
Rejections raise RemotingConnectError, which the server logs in one line before closing.
"""

from __future__ import annotations

import enum
import ssl
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import trio

from ..errors import RemotingConnectError
from .prefixed import PrefixedStream

_TLS_HANDSHAKE = 0x16
_PEEK_SIZE = 4096

DEFAULT_HANDSHAKE_TIMEOUT = 10.0


class TlsMode(enum.Enum):
    """RocketMQ's tls.server.mode."""

    DISABLED = "disabled"  # plain only; a TLS client is refused
    PERMISSIVE = "permissive"  # both, on the same port
    ENFORCING = "enforcing"  # TLS only; a plain client is refused


async def negotiate(
    stream: trio.abc.Stream,
    mode: TlsMode,
    ssl_context: ssl.SSLContext | None,
    *,
    address: str = "",
    handshake_timeout: float = DEFAULT_HANDSHAKE_TIMEOUT,
) -> trio.abc.Stream:
    """Server side: look at the first bytes, then return the stream to speak over.

    Args:
      stream: the accepted transport stream.
      mode: what the server accepts (table in the module docstring).
      ssl_context: server context; required unless mode is DISABLED.
      address: the peer, for error messages.
      handshake_timeout: limit on the TLS handshake (not on waiting for the first byte,
        which the caller bounds, normally with the idle timeout).

    Returns:
      A PrefixedStream (plain) or a trio.SSLStream over one, handshake done. Either way
      the bytes peeked are not lost.

    Raises:
      RemotingConnectError: the peer closed before sending anything, the mode refuses
        the connection, or the handshake failed or timed out.

    Cancellation leaves the stream half-negotiated; the caller closes it.
    """
    try:
        first = await stream.receive_some(_PEEK_SIZE)
    except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
        raise RemotingConnectError(address, f"connection lost before the first byte ({exc})", probe=True) from None
    if not first:
        raise RemotingConnectError(address, "closed before sending anything", probe=True)
    prefixed = PrefixedStream(stream, first)
    if first[0] != _TLS_HANDSHAKE:
        if mode is TlsMode.ENFORCING:
            raise RemotingConnectError(address, "plain connection refused: the server enforces TLS")
        return prefixed
    if mode is TlsMode.DISABLED or ssl_context is None:
        raise RemotingConnectError(address, "TLS connection refused: TLS is disabled on this server")
    tls = trio.SSLStream(prefixed, ssl_context, server_side=True)
    with _handshake_limit(address, handshake_timeout):
        await _handshake(tls, address)
    return tls


async def wrap_client(
    stream: trio.abc.Stream,
    ssl_context: ssl.SSLContext,
    *,
    server_hostname: str | None,
    address: str = "",
    handshake_timeout: float = DEFAULT_HANDSHAKE_TIMEOUT,
) -> trio.SSLStream[trio.abc.Stream]:
    """Client side: wrap `stream` in TLS and complete the handshake.

    Raises RemotingConnectError if the handshake fails or takes longer than
    `handshake_timeout`. Cancellation leaves `stream` open; the caller closes it.
    """
    tls = trio.SSLStream(stream, ssl_context, server_hostname=server_hostname)
    with _handshake_limit(address, handshake_timeout):
        await _handshake(tls, address)
    return tls


@contextmanager
def _handshake_limit(address: str, seconds: float) -> Iterator[None]:
    """The deadline `_handshake` runs under, its expiry a RemotingConnectError."""
    try:
        with trio.fail_after(seconds):
            yield
    except trio.TooSlowError:
        raise RemotingConnectError(address, f"TLS handshake timed out after {seconds:g} s") from None


async def _handshake(tls: trio.SSLStream[Any], address: str) -> None:
    try:
        await tls.do_handshake()
    except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
        cause = exc.__cause__ or exc
        raise RemotingConnectError(address, f"TLS handshake failed: {cause}") from None
