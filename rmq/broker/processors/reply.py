"""SEND_REPLY_MESSAGE (324) and SEND_REPLY_MESSAGE_V2 (325): request-reply's way back.

A requester sends a message with CORRELATION_ID and REPLY_TO_CLIENT (its client id); a
replier answers it with a reply message to `<cluster>_REPLY_TOPIC` sent with one of these
codes. As RocketMQ's ReplyMessageProcessor, the broker checks the send as any other
(SendProcessor.check), pushes the reply to the requester's connection with
PUSH_REPLY_MESSAGE_TO_CLIENT (326), then stores it when storeReplyMessageEnable (default).
The requester is found among the producers by client id: it heartbeats as one.

The replier's answer says whether the push worked: SUCCESS, else SYSTEM_ERROR with
RocketMQ's remark (requester not connected, or it refused), even when the reply was
stored. A push that worked with a store that failed is still SUCCESS, with msgId "0"
(what RocketMQ answers there).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from rmq.protocol import LanguageCode, RemotingCommand, RequestCode, ResponseCode
from rmq.protocol import properties as P
from rmq.protocol.headers import (
    HeaderCommand,
    ReplyMessageRequestHeader,
    SendMessageRequestHeader,
    SendMessageResponseHeader,
)
from rmq.protocol.message import MessageDraft
from rmq.remoting import RemotingError

from .client_call import CALL_TIMEOUT
from .common import fail, host_port
from .send import Refused, SendProcessor

if TYPE_CHECKING:
    from rmq.remoting.abc import RequestContext
    from rmq.store.results import PutMessageResult

    from ..parts import BrokerParts

log = logging.getLogger("rmq.broker.reply")


class ReplyProcessor:
    CODES = (RequestCode.SEND_REPLY_MESSAGE, RequestCode.SEND_REPLY_MESSAGE_V2)

    def __init__(self, broker: BrokerParts) -> None:
        self.broker = broker
        self._send = SendProcessor(broker)  # msgCheck and the queue choice are the send's

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        if request.code == RequestCode.SEND_REPLY_MESSAGE:
            header = SendMessageRequestHeader.from_ext(request.ext_fields)
        else:
            header = SendMessageRequestHeader.from_v2_ext(request.ext_fields)
        try:
            tc = self._send.check(ctx, request, header)
            queue_id = self._send.choose_queue(tc, header.queue_id)
        except Refused as refused:
            return fail(request, refused.code, refused.remark)
        props = P.decode_properties(header.properties or "")
        pushed, remark = await self._push(ctx, request, header, props)
        config = self.broker.config
        answer = SendMessageResponseHeader(
            msg_id="0",
            queue_id=queue_id,
            queue_offset=0,
            msg_region=config.region_id,
            trace_on=str(config.trace_on).lower(),
        )
        if config.store_reply_message_enable:
            result = await self.broker.store.put(self._draft(ctx, request, header, queue_id, props))
            self._stored(result, header.topic, answer, len(request.body))
        code = ResponseCode.SUCCESS if pushed else ResponseCode.SYSTEM_ERROR
        return HeaderCommand.response_to(request, code, answer, None if pushed else remark)

    async def _push(
        self, ctx: RequestContext, request: RemotingCommand, header: SendMessageRequestHeader, props: dict[str, str]
    ) -> tuple[bool, str]:
        """PUSH_REPLY_MESSAGE_TO_CLIENT to the requester: (pushed, RocketMQ's remark if not)."""
        requester = props.get(P.REPLY_TO_CLIENT)
        if requester is None:
            log.warning("%s is null, can not reply message", P.REPLY_TO_CLIENT)
            return False, f"reply message properties[{P.REPLY_TO_CLIENT}] is null"
        channel = self.broker.clients.producer_channel(requester)
        if channel is None:
            remark = f"push reply message fail, channel of <{requester}> not found."
            log.warning(remark)
            return False, remark
        store_ip, store_port = self.broker.store_host
        push = ReplyMessageRequestHeader(
            producer_group=header.producer_group,
            topic=header.topic,
            default_topic=header.default_topic,
            default_topic_queue_nums=header.default_topic_queue_nums,
            queue_id=header.queue_id,
            sys_flag=header.sys_flag,
            born_timestamp=header.born_timestamp,
            flag=header.flag,
            born_host=ctx.remote_address,
            store_host=f"{store_ip}:{store_port}",
            store_timestamp=self.broker.clock_ms(),
            properties=P.encode_properties({**props, P.PUSH_REPLY_TIME: str(self.broker.clock_ms())}),
            reconsume_times=header.reconsume_times,
            unit_mode=bool(header.unit_mode),
        )
        command = RemotingCommand(
            RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, push.to_ext(), request.body, language=LanguageCode.JAVA
        )
        failed = f"push reply message to {requester}fail."  # sic: RocketMQ's remark
        try:
            answer = await channel.conn.invoke(command, CALL_TIMEOUT)  # type: ignore[attr-defined]
        except RemotingError as exc:
            log.warning("push reply message to <%s> fail: %s", requester, exc)
            return False, failed
        if answer.code != ResponseCode.SUCCESS:
            log.warning("push reply message to <%s> return fail, response remark: %s", requester, answer.remark)
            return False, failed
        return True, ""

    def _draft(
        self,
        ctx: RequestContext,
        request: RemotingCommand,
        header: SendMessageRequestHeader,
        queue_id: int,
        props: dict[str, str],
    ) -> MessageDraft:
        return MessageDraft(
            header.topic,
            queue_id,
            request.body,
            flag=header.flag,
            properties=props,
            sys_flag=header.sys_flag,
            born_timestamp=header.born_timestamp,
            born_host=host_port(ctx.remote_address),
            store_host=self.broker.store_host,
            reconsume_times=header.reconsume_times or 0,
        )

    def _stored(self, result: PutMessageResult, topic: str, answer: SendMessageResponseHeader, size: int) -> None:
        """A stored reply's place goes into the answer; a failed store is only logged (RocketMQ)."""
        if not result.ok:
            log.warning("reply message to %s not stored: %s %s", topic, result.status.value, result.remark or "")
            return
        self.broker.stats.count_in(topic, 1, size)
        answer.msg_id = result.msg_id
        answer.queue_offset = result.queue_offset
