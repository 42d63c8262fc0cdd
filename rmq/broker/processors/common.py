"""Small helpers every broker processor uses."""

from __future__ import annotations

from typing import Any

from rmq.protocol import RemoteProtocolError, RemotingCommand, ResponseCode
from rmq.protocol import body as json_body


def ok(request: RemotingCommand, ext: dict[str, Any] | None = None, body: bytes = b"") -> RemotingCommand:
    return request.make_response(ResponseCode.SUCCESS, None, ext, body)


def fail(request: RemotingCommand, code: int, remark: str, ext: dict[str, Any] | None = None) -> RemotingCommand:
    return request.make_response(code, remark, ext)


def json_of(request: RemotingCommand, what: str) -> Any:
    """The request body parsed as JSON (either dialect); RemoteProtocolError names `what`."""
    if not request.body:
        raise RemoteProtocolError(f"the {what} body is missing")
    try:
        return json_body.loads(request.body)
    except RemoteProtocolError as exc:
        raise RemoteProtocolError(f"bad {what} body: {exc}") from None


def host_port(address: str) -> tuple[str, int]:
    """ "ip:port" → (ip, port); IPv6 literals may come bracketed."""
    host, _, port = address.rpartition(":")
    return host.strip("[]") or "0.0.0.0", int(port) if port.isdigit() else 0
