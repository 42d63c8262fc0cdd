"""Protocol errors: what the sans-IO core raises on bytes it cannot accept.

LocalProtocolError: we were asked to produce something the protocol cannot carry.
RemoteProtocolError: the peer sent something malformed; the connection should close.
Each carries the response code a server would answer with where one applies.
"""

from __future__ import annotations

from .codes import ResponseCode


class ProtocolError(Exception):
    """Base of every error raised by rmq.protocol on bad input."""

    response_code: int = ResponseCode.SYSTEM_ERROR


class LocalProtocolError(ProtocolError):
    """Something we tried to encode does not fit the wire format."""


class RemoteProtocolError(ProtocolError):
    """The peer sent bytes that do not parse."""


class BodyError(RemoteProtocolError, ValueError):
    """A JSON body lacks a field, or a field has a value of the wrong kind.

    Also a ValueError: readers of files and admin answers take it as a bad value."""


class FrameTooLarge(RemoteProtocolError):
    """A frame announced a length above the configured maximum."""

    def __init__(self, length: int, limit: int) -> None:
        super().__init__(f"frame of {length} bytes exceeds the limit of {limit} bytes")
        self.length = length
        self.limit = limit


class HeaderError(RemoteProtocolError):
    """A custom header (extFields) lacks a required field or has a bad value.

    Servers answer it with SYSTEM_ERROR and the message as remark; the connection stays open.
    """
