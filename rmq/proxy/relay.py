"""GET_CONSUMER_RUNNING_INFO and CONSUME_MESSAGE_DIRECTLY from brokers, answered by 5.x clients.

The brokers see one client per consumer group the proxy serves, the proxy's client instance
(consumers.py), so `mqadmin consumerStatus` and `consumeMessageDirectly` name the proxy's
client id, and the broker sends the request to the proxy. As Java's proxy does (ProxyChannel,
GrpcClientChannel, ClientActivity), the proxy turns it into a Telemetry command to the group's
clients (channels.py) and answers the broker with what they reply:

- GET_CONSUMER_RUNNING_INFO with jstackEnable: a PrintThreadStackTraceCommand to each client of
  the group (at most MAX_ASKED, at once), answered with a ThreadStackTrace. The running info
  answered is the group's (its subscriptions and clients, consumers.py) with the stacks in
  `jstack`, a section per client. Without jstackEnable it is answered at once (Java's proxy
  sends nothing then, and the broker's call times out).
- CONSUME_MESSAGE_DIRECTLY: a VerifyMessageCommand with the message to one client of the group
  (a push consumer when there is one: only it has a listener to run the message through),
  whose VerifyMessageResult status becomes the ConsumeMessageDirectlyResult as
  ClientActivity.buildConsumeMessageDirectlyResult maps it: OK CR_SUCCESS,
  FAILED_TO_CONSUME_MESSAGE CR_LATER, MESSAGE_CORRUPTED CR_RETURN_NULL. Any other status (a
  client that does not verify messages answers NOT_IMPLEMENTED) is answered as SYSTEM_ERROR
  naming it, where Java answers a result without a consumeResult.

A client that does not answer within grpcProxyRelayRequestTimeoutInSeconds (5 s, well inside
the broker's 10 s) is answered SYSTEM_BUSY "call remote timeout", as Java's GrpcChannelManager
answers an expired nonce; for the running info only when no client of the group answered
(the others' sections say that they did not).
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from typing import Any

import trio

from rmq.client.instance import ClientInstance
from rmq.protocol import RemotingCommand, ResponseCode
from rmq.protocol import body as B
from rmq.protocol.errors import ProtocolError
from rmq.protocol.headers import ConsumeMessageDirectlyRequestHeader, GetConsumerRunningInfoRequestHeader
from rmq.protocol.message import decompress_body, iter_records
from rmq.remoting import RequestContext

from .channels import Channels, RelayError
from .consumers import Consumers
from .convert import received
from .v2 import definition_pb2 as d
from .v2 import service_pb2 as s

log = logging.getLogger("rmq.proxy.relay")

MAX_ASKED = 16  # clients of one group asked for their thread stacks at once
_VERIFIED = {d.OK: "CR_SUCCESS", d.FAILED_TO_CONSUME_MESSAGE: "CR_LATER", d.MESSAGE_CORRUPTED: "CR_RETURN_NULL"}


def _code_name(code: int) -> str:
    try:
        return str(d.Code.Name(code))
    except ValueError:
        return str(code)


def _not_here(group: str) -> str:
    return f"The Consumer Group <{group}> not exist in this consumer"


class Relay:
    def __init__(self, consumers: Consumers, channels: Channels, timeout: float) -> None:
        self.consumers = consumers
        self.channels = channels
        self.timeout = timeout  # seconds a client has to answer

    def _clients(self, group: str) -> list[str]:
        member = self.consumers.groups.get(group)
        return sorted(c for c in member.clients if c in self.channels.clients) if member is not None else []

    async def _ask(self, client_id: str, command: Callable[[str], s.TelemetryCommand]) -> s.TelemetryCommand:
        with trio.move_on_after(self.timeout):
            return await self.channels.ask(client_id, command)
        raise RelayError(True, f"call remote timeout: client {client_id} did not answer within {self.timeout:g} s")

    async def running_info(self, namesrv: tuple[str, ...], request: RemotingCommand) -> RemotingCommand:
        try:
            header = GetConsumerRunningInfoRequestHeader.from_ext(request.ext_fields)
        except ProtocolError as exc:
            return request.make_response(ResponseCode.SYSTEM_ERROR, f"bad GET_CONSUMER_RUNNING_INFO header: {exc}")
        member = self.consumers.groups.get(header.consumer_group)
        if member is None:
            return request.make_response(ResponseCode.SYSTEM_ERROR, _not_here(header.consumer_group))
        info = member.running_info(namesrv)
        if header.jstack_enable:
            clients = self._clients(header.consumer_group)[:MAX_ASKED]
            if not clients:
                return request.make_response(
                    ResponseCode.SYSTEM_ERROR, f"no client of group {header.consumer_group} has a Telemetry stream"
                )
            stacks = await self._stacks(clients)
            failed = [v for v in stacks.values() if isinstance(v, RelayError)]
            if len(failed) == len(stacks):  # nothing to show: the error, as Java's
                code = ResponseCode.SYSTEM_BUSY if any(e.timed_out for e in failed) else ResponseCode.SYSTEM_ERROR
                return request.make_response(code, "; ".join(str(e) for e in failed))
            info["jstack"] = "\n\n".join(self._section(c, v) for c, v in stacks.items())
        return request.make_response(body=B.dumps(info))

    async def _stacks(self, clients: list[str]) -> dict[str, str | RelayError]:
        """Each client's thread stack trace, or why there is none, asked all at once."""
        out: dict[str, str | RelayError] = {}

        def command(nonce: str) -> s.TelemetryCommand:
            return s.TelemetryCommand(print_thread_stack_trace_command=s.PrintThreadStackTraceCommand(nonce=nonce))

        async def ask(client_id: str) -> None:
            try:
                reply = await self._ask(client_id, command)
            except RelayError as exc:
                out[client_id] = exc
                return
            if reply.status.code != d.OK or not reply.HasField("thread_stack_trace"):
                status = f"{_code_name(reply.status.code)} {reply.status.message}".strip()
                out[client_id] = RelayError(False, f"client {client_id} answered {status}")
            else:
                out[client_id] = reply.thread_stack_trace.thread_stack_trace

        async with trio.open_nursery() as nursery:
            for client_id in clients:
                nursery.start_soon(ask, client_id)
        return {c: out[c] for c in clients}

    def _section(self, client_id: str, stack: str | RelayError) -> str:
        channel = self.channels.clients.get(client_id)
        who = f"{client_id} ({channel.language} {channel.version})" if channel is not None else client_id
        if isinstance(stack, RelayError):
            return f"client {who}: no thread stack trace: {stack}"
        return f"client {who}:\n{stack}"

    async def consume_directly(self, request: RemotingCommand) -> RemotingCommand:
        try:
            header = ConsumeMessageDirectlyRequestHeader.from_ext(request.ext_fields)
            msg = next(iter_records(request.body))
            msg.body = decompress_body(msg.body, msg.sys_flag)
        except (ProtocolError, StopIteration) as exc:
            return request.make_response(ResponseCode.SYSTEM_ERROR, f"bad CONSUME_MESSAGE_DIRECTLY request: {exc!r}")
        group = header.consumer_group
        if group not in self.consumers.groups:
            return request.make_response(ResponseCode.SYSTEM_ERROR, _not_here(group))
        clients = self._clients(group)
        if not clients:
            why = f"no client of group {group} has a Telemetry stream"
            return request.make_response(ResponseCode.SYSTEM_ERROR, why)
        pushing = [c for c in clients if self.channels.clients[c].client_type == d.PUSH_CONSUMER]
        client_id = random.choice(pushing or clients)
        message = received(msg)

        def command(nonce: str) -> s.TelemetryCommand:
            return s.TelemetryCommand(verify_message_command=s.VerifyMessageCommand(nonce=nonce, message=message))

        start = time.monotonic()
        try:
            reply = await self._ask(client_id, command)
        except RelayError as exc:
            code = ResponseCode.SYSTEM_BUSY if exc.timed_out else ResponseCode.SYSTEM_ERROR
            return request.make_response(code, str(exc))
        spent = int((time.monotonic() - start) * 1000)
        status = reply.status.code
        if status == d.VERIFY_FIFO_MESSAGE_UNSUPPORTED:
            return request.make_response(ResponseCode.NO_PERMISSION, "forbidden to verify message")
        result = _VERIFIED.get(status)
        if result is None or not reply.HasField("verify_message_result"):
            answer = f"{_code_name(status)} {reply.status.message}".strip()
            return request.make_response(
                ResponseCode.SYSTEM_ERROR, f"client {client_id} did not verify the message: it answered {answer}"
            )
        body: dict[str, Any] = {
            "autoCommit": True,
            "consumeResult": result,
            "order": False,
            "remark": "from gRPC client",
            "spentTimeMills": spent,
        }
        return request.make_response(body=B.dumps(body))


class ProxyInstance(ClientInstance):
    """The proxy's client instance: a broker's GET_CONSUMER_RUNNING_INFO and
    CONSUME_MESSAGE_DIRECTLY go to the relay (Java's proxy has its own remoting processor
    for the requests brokers send it, ProxyClientRemotingProcessor)."""

    relay: Relay | None = None

    async def _running_info(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        if self.relay is None:
            return await super()._running_info(ctx, request)
        return await self.relay.running_info(self.namesrv, request)

    async def _consume_directly(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        if self.relay is None:
            return await super()._consume_directly(ctx, request)
        return await self.relay.consume_directly(request)
