"""GET_CONSUMER_RUNNING_INFO (307) and CONSUME_MESSAGE_DIRECTLY (309): the broker asks a client.

An admin names a consumer group and a client id; the broker finds that client's
connection and sends it the same request (AdminBrokerProcessor.callConsumer,
Broker2Client.callClient), answering the admin with whatever the client answered: a
Java, C++ or our own client's ConsumerRunningInfo or ConsumeMessageDirectlyResult
passes through untouched. For 309 the broker first puts the stored message (found by
its offset message id) in the body and its own name in `brokerName`.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from rmq.protocol import LanguageCode, ProtocolError, RemotingCommand, RequestCode, ResponseCode
from rmq.protocol.headers import ConsumeMessageDirectlyRequestHeader, GetConsumerRunningInfoRequestHeader
from rmq.protocol.message import parse_offset_msg_id
from rmq.remoting import RemotingError
from rmq.remoting.errors import RemotingTimeoutError

from .common import fail

if TYPE_CHECKING:
    from ..parts import BrokerParts

log = logging.getLogger("rmq.broker.client_call")

CLIENT_CALLS = (RequestCode.GET_CONSUMER_RUNNING_INFO, RequestCode.CONSUME_MESSAGE_DIRECTLY)
CALL_TIMEOUT = 10.0  # seconds: Broker2Client.callClient's limit


async def call_client(broker: BrokerParts, request: RemotingCommand) -> RemotingCommand:
    ext = dict(request.ext_fields)
    body = request.body
    if request.code == RequestCode.GET_CONSUMER_RUNNING_INFO:
        h = GetConsumerRunningInfoRequestHeader.from_ext(ext)
        group, client_id = h.consumer_group, h.client_id
    else:
        d = ConsumeMessageDirectlyRequestHeader.from_ext(ext)
        group, client_id = d.consumer_group, d.client_id
        ext["brokerName"] = broker.config.broker_name
        try:
            offset = parse_offset_msg_id(d.msg_id)[2]
        except ProtocolError as exc:
            return fail(request, ResponseCode.SYSTEM_ERROR, f"bad msgId {d.msg_id!r}: {exc}")
        record = broker.message_store.select_one_message_by_offset(offset)
        if record is None:
            return fail(request, ResponseCode.SYSTEM_ERROR, f"no message with msgId {d.msg_id} in this broker")
        body = record
    channel = next((ch for ch in broker.clients.consumer_channels(group) if ch.client_id == client_id), None)
    if channel is None:
        return fail(request, ResponseCode.SYSTEM_ERROR, f"The Consumer <{group}> <{client_id}> not online")
    command = RemotingCommand(request.code, ext, body, language=LanguageCode.JAVA)
    try:
        answer = await channel.conn.invoke(command, CALL_TIMEOUT)  # type: ignore[attr-defined]
    except RemotingTimeoutError as exc:
        return fail(request, ResponseCode.CONSUME_MSG_TIMEOUT, f"consumer <{group}> <{client_id}> Timeout: {exc}")
    except RemotingError as exc:
        return fail(request, ResponseCode.SYSTEM_ERROR, f"invoke consumer <{group}> <{client_id}> Exception: {exc}")
    response = request.make_response(answer.code, answer.remark, answer.ext_fields, answer.body)
    return response
