"""Errors raised by rmq.remoting, mirroring RocketMQ's remoting/exception/ package.

Every error names the remote address it concerns (`.address`, "ip:port" or a ws:// URL),
so a caller juggling many brokers can tell which one failed. Trio's stream errors and
OSError never leave this package: they are translated here, at the boundary.

    RemotingError
    ├── RemotingConnectError        no usable connection (connect failed, refused, closed)
    ├── RemotingSendRequestError    the request was never written (connection already closed)
    ├── RemotingTimeoutError        no response within the timeout
    └── RemotingTooMuchRequestError too many requests outstanding on one connection
"""

from __future__ import annotations

from rmq.protocol import code_name


class RemotingError(Exception):
    """Base of every rmq.remoting error; `address` is the peer concerned."""

    def __init__(self, message: str, address: str = "") -> None:
        super().__init__(message)
        self.address = address


class RemotingConnectError(RemotingError):
    """No connection to `address`: connect failed or timed out, TLS or WebSocket
    handshake failed, or the connection closed while a request waited for its response
    (then the request may or may not have reached the peer).

    `probe` is true on a server when the peer closed before sending a byte: a port check
    (a readiness probe, a load balancer), nothing to report."""

    def __init__(self, address: str, reason: str = "connect failed", *, probe: bool = False) -> None:
        super().__init__(f"connection to {address}: {reason}", address)
        self.reason = reason
        self.probe = probe


class RemotingSendRequestError(RemotingError):
    """The request could not be handed to the connection, which was closed or closing.

    The request was certainly not written, so it is safe to retry elsewhere.
    """

    def __init__(self, address: str, code: int, reason: str = "connection closed") -> None:
        super().__init__(f"send {code_name(code, response=False)} to {address} failed: {reason}", address)
        self.code = code
        self.reason = reason


class RemotingTimeoutError(RemotingError):
    """No response to request `code` from `address` within `timeout` seconds."""

    def __init__(self, address: str, code: int, timeout: float) -> None:
        super().__init__(
            f"wait response to {code_name(code, response=False)} on the channel <{address}> "
            f"timed out after {timeout * 1000:.0f} ms",
            address,
        )
        self.code = code
        self.timeout = timeout


class RemotingTooMuchRequestError(RemotingError):
    """Too many requests are outstanding on the connection to `address`
    (the pending-response table is full, or a oneway request found the outbox full
    for its whole timeout)."""

    def __init__(self, address: str, code: int, reason: str) -> None:
        super().__init__(f"{code_name(code, response=False)} to {address} refused: {reason}", address)
        self.code = code
        self.reason = reason
