"""Small helpers every broker processor uses."""

from __future__ import annotations

from typing import Any

from rmq.protocol import RemoteProtocolError, RemotingCommand, ResponseCode
from rmq.protocol import body as json_body
from rmq.protocol.message import host_port as host_port  # the processors import it from here


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
