"""The seam between rmq.remoting and the packages that serve requests.

Broker, name-server and client processors implement `RequestProcessor` (or are plain
`async def (ctx, request)` functions) and are registered on a `Dispatcher`. Each call
gets a `RequestContext`, which names the Connection the request came in on, so a
processor can read the peer's address, keep per-connection state in `conn.attrs`, or
send requests back to the peer (`await ctx.connection.invoke(...)`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from rmq.protocol import RemotingCommand


class Peer(Protocol):
    """What a processor may do with the connection a request came in on (a
    ``rmq.remoting.Connection``): read the peer's address, keep per-connection state, and
    send requests back over it. Declared here so that this seam does not import the
    connection that implements it."""

    attrs: dict[str, Any]

    def __hash__(self) -> int: ...  # held in tables of who is connected

    @property
    def remote_address(self) -> str: ...

    @property
    def closed(self) -> bool: ...

    async def invoke(
        self, request: RemotingCommand, timeout: float, on_answer: Callable[[RemotingCommand], None] | None = None
    ) -> RemotingCommand: ...

    async def invoke_oneway(self, request: RemotingCommand, timeout: float = ...) -> None: ...


class RequestContext:
    """Where and when a request arrived.

    Attributes:
      connection: the connection the request came in on (and the response goes out on).
      received_at: trio.current_time() when the reader decoded it; a processor can
        compare it with the current time to shed requests that queued too long
        (RocketMQ's BrokerFastFailure).
      suspended: set by a processor that parked the request (a long-polling pull), as
        RocketMQ's RemotingCommand.suspended; the metrics' is_long_polling label.
    """

    __slots__ = ("connection", "queued", "received_at", "suspended")

    def __init__(self, connection: Peer, received_at: float) -> None:
        self.connection = connection
        self.received_at = received_at
        self.queued = False  # set by the dispatcher: waits for a processor slot
        self.suspended = False

    @property
    def remote_address(self) -> str:
        """The peer, "ip:port"."""
        return self.connection.remote_address

    def __repr__(self) -> str:
        return f"<RequestContext from {self.connection.remote_address}>"


@runtime_checkable
class RequestProcessor(Protocol):
    """Serves requests of the codes it is registered for.

    A processor may also define `reject_request(self) -> bool`; when it returns True the
    request is answered SYSTEM_BUSY "[REJECTREQUEST]..." without being processed
    (RocketMQ's NettyRequestProcessor.rejectRequest, e.g. the page cache is busy).
    """

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        """Handle `request`.

        Returns:
          The response (usually `request.make_response(...)`; opaque, flag and serialize
          type are set from the request in any case), or None to send nothing. Responses
          to oneway requests are never sent.

        Raises:
          rmq.protocol.HeaderError (or any ProtocolError): answered SYSTEM_ERROR with the
            message as remark. Any other Exception: logged with its traceback, answered
            SYSTEM_ERROR with a one-line remark.

        Cancellation: happens when the connection closes or the server shuts down; no
        response is sent.
        """
        ...


ProcessFunction = Callable[["RequestContext", "RemotingCommand"], Awaitable["RemotingCommand | None"]]
"""A bare `async def process(ctx, request)`, accepted wherever a RequestProcessor is."""
