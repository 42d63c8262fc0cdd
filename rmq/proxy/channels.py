"""Each 5.x client's Telemetry stream, by client id: the only way the proxy reaches a client.

As Java's GrpcChannelManager and GrpcClientChannel: a client's Telemetry stream is its
channel, and commands go down it: RecoverOrphanedTransactionCommand for a broker's
transaction check (transaction.py; nothing comes back on the stream), PrintThreadStackTraceCommand
and VerifyMessageCommand for an admin's consumerStatus and consumeMessageDirectly (relay.py),
which the client answers on the same stream with a ThreadStackTrace or VerifyMessageResult
carrying the command's nonce. A reply is taken only from the client that was asked and only
while the asker waits (the relay's timeout); a later one is dropped, as Java drops the reply
to a nonce it expired.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

import trio

from .v2 import definition_pb2 as d
from .v2 import service_pb2 as s

log = logging.getLogger("rmq.proxy")

Commands = trio.MemorySendChannel[s.TelemetryCommand]


@dataclass(slots=True, eq=False)
class ClientChannel:
    """One client's Telemetry stream and what the proxy knows of the client."""

    client_id: str
    language: str  # x-mq-language, e.g. "PYTHON"
    version: str  # x-mq-client-version, e.g. "5.1.2"
    commands: Commands
    settings: d.Settings | None = None  # the client's own, from its last Settings command

    @property
    def client_type(self) -> int:
        return self.settings.client_type if self.settings is not None else d.CLIENT_TYPE_UNSPECIFIED

    @property
    def group(self) -> str:
        """The consumer group of a consumer's settings, else ""."""
        if self.settings is None or not self.settings.HasField("subscription"):
            return ""
        return str(self.settings.subscription.group.name)


class RelayError(Exception):
    """A command could not be answered by the client: why, for the broker's answer."""

    def __init__(self, timed_out: bool, message: str) -> None:
        super().__init__(message)
        self.timed_out = timed_out


@dataclass(slots=True, eq=False)
class _Waiter:
    client_id: str
    done: trio.Event = field(default_factory=trio.Event)
    reply: s.TelemetryCommand | None = None


class Channels:
    def __init__(self) -> None:
        self.clients: dict[str, ClientChannel] = {}
        self._nonces = itertools.count(1)
        self._waiting: dict[str, _Waiter] = {}  # nonce → who was asked, and the reply

    def open(self, client_id: str, language: str, version: str, commands: Commands) -> ClientChannel:
        """A client's Telemetry stream began: it replaces an older stream of the same client."""
        channel = ClientChannel(client_id, language, version, commands)
        self.clients[client_id] = channel
        return channel

    def close(self, channel: ClientChannel) -> bool:
        """The stream ended; False when a newer stream of the client took its place."""
        if self.clients.get(channel.client_id) is not channel:
            return False
        del self.clients[channel.client_id]
        return True

    def push(self, client_id: str, command: s.TelemetryCommand) -> bool:
        """Queue a command on the client's stream; False when it has none or it is full."""
        channel = self.clients.get(client_id)
        if channel is None:
            return False
        try:
            channel.commands.send_nowait(command)
        except (trio.WouldBlock, trio.ClosedResourceError, trio.BrokenResourceError):
            return False
        return True

    async def ask(self, client_id: str, command_for: Callable[[str], s.TelemetryCommand]) -> s.TelemetryCommand:
        """Send the command `command_for(nonce)` to the client and wait (in the caller's
        cancel scope) for its reply with the same nonce. RelayError when the command cannot
        be sent."""
        nonce = str(next(self._nonces))
        waiter = self._waiting[nonce] = _Waiter(client_id)
        try:
            if not self.push(client_id, command_for(nonce)):
                raise RelayError(False, f"client {client_id} has no Telemetry stream to send the command on")
            await waiter.done.wait()
        finally:
            del self._waiting[nonce]
        assert waiter.reply is not None
        return waiter.reply

    def reply(self, client_id: str, nonce: str, command: s.TelemetryCommand) -> bool:
        """A client's ThreadStackTrace or VerifyMessageResult: False when nobody waits for it
        (an unknown or expired nonce, or one another client was asked with)."""
        waiter = self._waiting.get(nonce)
        if waiter is None or waiter.client_id != client_id or waiter.reply is not None:
            log.info("telemetry reply of client %s with nonce %r: nobody waits for it", client_id, nonce[:64])
            return False
        waiter.reply = command
        waiter.done.set()
        return True
