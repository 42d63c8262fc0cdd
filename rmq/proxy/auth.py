"""ACL 1.0 on the gRPC port (`enableACL`): each call's signature and permissions checked
against plain_acl.yml, as Java's proxy 5.2 (AuthenticationInterceptor over
PlainAccessValidator), with the broker's reading of the file and its rules
(rmq.broker.acl: `authenticate`, `authorize`).

The 5.x clients sign every call in its metadata (rocketmq-clients' Signature):

    x-mq-date-time: 20250102T030405Z       the client's clock, yyyyMMdd'T'HHmmss'Z'
    authorization:  MQv2-HMAC-SHA1 Credential=<AccessKey>, SignedHeaders=x-mq-date-time,
                    Signature=<hex of HMAC-SHA1(SecretKey, the x-mq-date-time value)>

so a signature proves the caller holds the secret, nothing about the request: as in Java
it does not expire and covers no field of the message (TLS keeps it from being captured).

Each request message is checked, a Telemetry stream's commands one by one, for the
permissions PlainAccessResource.parse(GeneratedMessageV3) asks: PUB on the topic to send,
end a transaction or announce a producer's topics; SUB on the group (as its retry topic)
and the topic to receive, ack, change an invisible time, forward to the DLQ, query an
assignment or announce a consumer's subscriptions; SUB on a consumer's group to heartbeat
or end; PUB or SUB on the topic to query its route. rmq's PullMessage and offset RPCs,
which Java 5.2 has not, need SUB on the group and the topic as the broker's pulls do.

A refused call is answered in its response's Status, UNAUTHORIZED (40100) with the reason,
as Java's 5.3 proxy answers an authentication or authorization failure (ResponseBuilder);
the call itself ends OK. 5.2's interceptor ended it with gRPC PERMISSION_DENIED instead.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import trio
from google.protobuf.message import Message as Proto

from rmq.broker.acl import AclDenied, PlainAcl, authenticate, authorize
from rmq.broker.acl.addresses import client_ip
from rmq.broker.acl.model import ANY, PUB, SUB
from rmq.protocol.constants import RETRY_PREFIX

from .convert import Code, status
from .grpc import Call, Method, Send
from .v2 import definition_pb2 as d
from .v2 import service_pb2 as s

log = logging.getLogger("rmq.proxy.auth")

AUTHORIZATION = "authorization"
DATE_TIME = "x-mq-date-time"


def signature(date_time: str, secret_key: str) -> str:
    """The hex HMAC-SHA1 of the date-time with the secret key, as the 5.x clients sign."""
    return hmac.new(secret_key.encode("utf-8"), date_time.encode("utf-8"), hashlib.sha1).hexdigest()


def parse_authorization(value: str) -> tuple[str, str]:
    """(access key, signature) of an `authorization` value (AuthorizationHeader's reading:
    "<method> k=v, k=v"; Credential's access key before any '/'). AclDenied when malformed."""
    method, _, rest = value.partition(" ")
    if not method or not rest:
        raise AclDenied("authorization header is incorrect")
    access_key = signed = ""
    for item in rest.split(","):
        key, eq, val = item.strip().partition("=")
        if not eq:
            raise AclDenied("authorization keyValues length is incorrect")
        if key == "Credential":
            access_key = val.split("/", 1)[0]
        elif key == "Signature":
            signed = val
    return access_key, signed


def _group(needed: dict[str, int], resource: d.Resource, perm: int) -> None:
    if resource.name:
        needed[RETRY_PREFIX + resource.name] = perm


def _topic(needed: dict[str, int], resource: d.Resource, perm: int) -> None:
    if resource.name:
        needed[resource.name] = perm


def needed_resources(request: Proto) -> dict[str, int]:
    """The topics and groups (as retry topics) a request names, each with the permission it
    needs (PlainAccessResource.parse(GeneratedMessageV3)). AclDenied for a request Java refuses."""
    needed: dict[str, int] = {}
    if isinstance(request, s.SendMessageRequest):
        if request.messages:
            _topic(needed, request.messages[0].topic, PUB)
    elif isinstance(request, s.EndTransactionRequest | s.RecallMessageRequest):
        _topic(needed, request.topic, PUB)
    elif isinstance(request, s.HeartbeatRequest):
        if request.client_type in (d.PUSH_CONSUMER, d.SIMPLE_CONSUMER):
            if not request.HasField("group"):
                raise AclDenied("Consumer heartbeat doesn't have group")
            _group(needed, request.group, SUB)
    elif isinstance(
        request, s.ReceiveMessageRequest | s.PullMessageRequest | s.GetOffsetRequest | s.UpdateOffsetRequest
    ):
        _group(needed, request.group, SUB)
        _topic(needed, request.message_queue.topic, SUB)
    elif isinstance(request, s.QueryOffsetRequest):
        _topic(needed, request.message_queue.topic, SUB)
    elif isinstance(
        request,
        s.AckMessageRequest
        | s.ForwardMessageToDeadLetterQueueRequest
        | s.ChangeInvisibleDurationRequest
        | s.QueryAssignmentRequest,
    ):
        _group(needed, request.group, SUB)
        _topic(needed, request.topic, SUB)
    elif isinstance(request, s.NotifyClientTerminationRequest):
        _group(needed, request.group, SUB)
    elif isinstance(request, s.QueryRouteRequest):
        _topic(needed, request.topic, ANY)
    elif isinstance(request, s.TelemetryCommand) and request.WhichOneof("command") == "settings":
        settings = request.settings
        if not settings.HasField("publishing") and not settings.HasField("subscription"):
            raise AclDenied("settings command doesn't have publishing or subscription")
        for topic in settings.publishing.topics:
            _topic(needed, topic, PUB)
        if settings.HasField("subscription"):
            _group(needed, settings.subscription.group, SUB)
            for entry in settings.subscription.subscriptions:
                _topic(needed, entry.topic, SUB)
    return needed


def _response_type(method: Method) -> type[Proto]:
    name = method.request_type.__name__
    if name == "TelemetryCommand":
        return s.TelemetryCommand
    response: type[Proto] = getattr(s, name.removesuffix("Request") + "Response")
    return response


class GrpcAcl:
    """The check of every call (`guard` wraps the service's methods with it) over a
    PlainAcl of the file, which `watch` re-reads when it changes."""

    def __init__(self, path: Path) -> None:
        if not path.is_file():  # the broker's PlainAcl would create it; the proxy only reads
            raise ValueError(f"enableACL: the ACL file {path} does not exist")
        self.acl = PlainAcl(path)  # AclConfigError (a ValueError) when unusable

    async def watch(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        await self.acl.watch(task_status=task_status)

    def check(self, call: Call, request: Proto) -> None:
        """Raise AclDenied unless the call's signer may send `request`."""
        header = call.metadata(AUTHORIZATION)
        access_key, signed = parse_authorization(header) if header else ("", "")
        date_time = call.metadata(DATE_TIME)

        def matches(secret_key: str) -> bool:
            return hmac.compare_digest(signature(date_time, secret_key), signed.lower())

        ip = client_ip(f"[{call.peer[0]}]:{call.peer[1]}")  # IPv4-mapped IPv6 as IPv4
        account = authenticate(self.acl.model, ip, access_key, matches)
        if account is not None:
            authorize(account, needed_resources(request))

    def refusal(self, call: Call, request: Proto) -> d.Status | None:
        """None when the call may go on, else the Status that refuses it (logged once per
        address and reason)."""
        try:
            self.check(call, request)
        except AclDenied as exc:
            self.acl.log_refusal(call.peer[0], call.method, str(exc))
            return status(Code.UNAUTHORIZED, str(exc))
        return None

    def guard(self, methods: dict[str, Method]) -> dict[str, Method]:
        """`methods` with each request checked before its handler sees it."""
        return {path: dataclasses.replace(m, handler=self._guarded(m)) for path, m in methods.items()}

    def _guarded(self, method: Method) -> Callable[..., Awaitable[Any]]:
        inner, response = method.handler, _response_type(method)
        if method.kind == "unary":

            async def unary(call: Call, request: Proto) -> Proto:
                refused = self.refusal(call, request)
                return response(status=refused) if refused is not None else await inner(call, request)

            return unary
        if method.kind == "server_stream":

            async def server_stream(call: Call, request: Proto, send: Send) -> None:
                refused = self.refusal(call, request)
                if refused is not None:
                    await send(response(status=refused))
                else:
                    await inner(call, request, send)

            return server_stream

        async def bidi(call: Call, requests: trio.MemoryReceiveChannel[Proto], send: Send) -> None:
            # a refused command is answered with its Status and the stream goes on, as Java's telemetry
            checked, to_handler = trio.open_memory_channel[Proto](0)

            async def relay() -> None:
                async with checked:
                    async for request in requests:
                        refused = self.refusal(call, request)
                        if refused is not None:
                            await send(response(status=refused))
                        else:
                            await checked.send(request)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(relay)
                await inner(call, to_handler, send)
                nursery.cancel_scope.cancel()

        return bidi
