"""The client's requests, one method each (RocketMQ's MQClientAPIImpl).

Each method builds a request with rmq.protocol's typed headers, sends it through the
RemotingClient and turns the response into a value or an MQClientError. Remoting and
protocol errors are translated here, so nothing above this module sees rmq.remoting's
or Trio's exceptions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import trio

from rmq.protocol import ProtocolError, RemotingCommand, RequestCode, ResponseCode, acl
from rmq.protocol import body as B
from rmq.protocol import headers as H
from rmq.protocol import properties as P
from rmq.protocol.bodies.clients import (
    GetConsumerListByGroupResponseBody,
    LockBatchRequestBody,
    LockBatchResponseBody,
    UnlockBatchRequestBody,
)
from rmq.protocol.bodies.heartbeat import HeartbeatData
from rmq.protocol.message import MessageExt, decompress_body, iter_records
from rmq.protocol.pop import (
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    ChangeInvisibleTimeResponseHeader,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
)
from rmq.remoting import RemotingClient, RemotingError, Sent

from .errors import MQBrokerError, MQClientError, translate_remoting_error
from .message import MessageQueue, SendResult, SendStatus
from .route import TopicRoute

T = TypeVar("T")

_SEND_STATUS = {
    ResponseCode.SUCCESS: SendStatus.SEND_OK,
    ResponseCode.FLUSH_DISK_TIMEOUT: SendStatus.FLUSH_DISK_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: SendStatus.FLUSH_SLAVE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: SendStatus.SLAVE_NOT_AVAILABLE,
}


class PullStatus:
    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"


_PULL_STATUS = {
    ResponseCode.SUCCESS: PullStatus.FOUND,
    ResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
    ResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
    ResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL,
}


@dataclass(slots=True)
class PullResult:
    status: str
    next_begin_offset: int
    min_offset: int
    max_offset: int
    suggest_which_broker_id: int
    messages: list[MessageExt]
    next_pull: PullAhead | None = None  # the next pull, sent already (ConsumerBase.pull's `ahead_if`)
    delivered: bool = False  # its messages were handed on in the reader (ConsumerBase.pull's `deliver`)


@dataclass(slots=True)
class PullAhead:
    """A PULL_MESSAGE `ClientAPI.pull_ahead` sent, its answer not taken yet."""

    addr: str
    sent: Sent
    start: float  # when it was sent (trio clock), for a timeout's report


# called with a pull answer's status and header, before its records are decoded
BeforeDecode = Callable[[str, H.PullMessageResponseHeader], None]


@dataclass(slots=True)
class RawPull:
    """A PULL_MESSAGE answer as the broker sent it: its code, offsets and stored records."""

    code: int
    next_begin_offset: int
    min_offset: int
    max_offset: int
    body: bytes


@dataclass(frozen=True)
class PopResult:
    """A POP_MESSAGE answer: SUCCESS with its header and messages, else POLLING_TIMEOUT,
    POLLING_FULL or NO_MESSAGE with no header."""

    code: int
    header: PopMessageResponseHeader | None
    messages: list[MessageExt]


_POP_ANSWERS = (ResponseCode.SUCCESS, ResponseCode.POLLING_TIMEOUT, ResponseCode.POLLING_FULL, ResponseCode.NO_MESSAGE)


class ClientAPI:
    """Typed requests over a RemotingClient; see the module docstring.

    With `credentials` (access key, secret key) every request sent through `invoke` and
    `invoke_oneway` is signed first (ACL 1.0, rmq.protocol.acl), to brokers and name
    servers alike, as RocketMQ's AclClientRPCHook does, its code included (RequestCode,
    which a broker with aclRequireSignedRequestCode=true requires).
    """

    def __init__(
        self, remoting: RemotingClient, *, timeout: float = 3.0, credentials: tuple[str, str] | None = None
    ) -> None:
        self.remoting = remoting
        self.timeout = timeout
        self.credentials = credentials

    def sign(self, request: RemotingCommand) -> RemotingCommand:
        """Add AccessKey, RequestCode and Signature to `request` when the client has credentials."""
        if self.credentials is not None:
            access_key, secret_key = self.credentials
            acl.sign(request.ext_fields, request.body, access_key, secret_key, code=request.code)
        return request

    async def invoke(
        self,
        addr: str,
        request: RemotingCommand,
        timeout: float | None = None,
        on_answer: Callable[[RemotingCommand], None] | None = None,
    ) -> RemotingCommand:
        """Send and wait; MQTimeoutError / MQConnectError / MQClientError on failure.
        `on_answer`: as Connection.invoke."""
        limit = self.timeout if timeout is None else timeout
        self.sign(request)
        start = trio.current_time()
        try:
            return await self.remoting.invoke(addr, request, limit, on_answer)
        except RemotingError as exc:
            raise translate_remoting_error(exc, trio.current_time() - start) from None
        except ProtocolError as exc:
            raise MQClientError(f"cannot send {request.code} to {addr}: {exc}") from None

    async def invoke_oneway(self, addr: str, request: RemotingCommand, timeout: float | None = None) -> None:
        limit = self.timeout if timeout is None else timeout
        self.sign(request)
        start = trio.current_time()
        try:
            await self.remoting.invoke_oneway(addr, request, limit)
        except RemotingError as exc:
            raise translate_remoting_error(exc, trio.current_time() - start) from None
        except ProtocolError as exc:
            raise MQClientError(f"cannot send {request.code} to {addr}: {exc}") from None

    async def _call(
        self,
        addr: str,
        request: RemotingCommand,
        ok: Iterable[int] = (ResponseCode.SUCCESS,),
        timeout: float | None = None,
    ) -> RemotingCommand:
        response = await self.invoke(addr, request, timeout)
        if response.code not in ok:
            raise MQBrokerError(response.code, response.remark, address=addr)
        return response

    @staticmethod
    def _header(header_type: type[H.H], response: RemotingCommand, addr: str) -> H.H:
        try:
            return header_type.from_ext(response.ext_fields)
        except ProtocolError as exc:
            raise MQClientError(f"malformed response from {addr}: {exc}") from None

    @staticmethod
    def _body(response: RemotingCommand, addr: str, read: Callable[[Any], T]) -> T:
        """The answer's JSON body read by `read` (a body's from_json); an empty body is `{}`."""
        try:
            return read(B.loads(response.body) if response.body else {})
        except ProtocolError as exc:
            raise MQClientError(f"malformed response body from {addr}: {exc}") from None

    # -- name server ----------------------------------------------------------------------

    async def get_route(self, namesrv: str, topic: str, timeout: float | None = None) -> TopicRoute | None:
        """GET_ROUTEINFO_BY_TOPIC; None when the name server has no route (17)."""
        request = RemotingCommand.request(
            RequestCode.GET_ROUTEINFO_BY_TOPIC, H.GetRouteInfoRequestHeader(topic).to_ext()
        )
        response = await self._call(namesrv, request, (ResponseCode.SUCCESS, ResponseCode.TOPIC_NOT_EXIST), timeout)
        if response.code == ResponseCode.TOPIC_NOT_EXIST or not response.body:
            return None
        try:
            return TopicRoute.from_json(B.loads(response.body))
        except ProtocolError as exc:
            raise MQClientError(f"malformed route of {topic} from {namesrv}: {exc}") from None

    # -- sending --------------------------------------------------------------------------

    async def send_message(
        self,
        addr: str,
        broker_name: str,
        code: int,
        header: H.SendMessageRequestHeader,
        body: bytes,
        msg_id: str,
        timeout: float,
        *,
        oneway: bool = False,
    ) -> SendResult | None:
        """SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE; None for a oneway send."""
        request = H.HeaderCommand.make(code, header, body, writers=H.V2_WRITERS)
        if oneway:
            await self.invoke_oneway(addr, request, timeout)
            return None
        response = await self.invoke(addr, request, timeout)
        status = _SEND_STATUS.get(response.code)  # type: ignore[call-overload]
        if status is None:
            raise MQBrokerError(response.code, response.remark, address=addr)
        h = self._header(H.SendMessageResponseHeader, response, addr)
        return SendResult(
            status=status,
            msg_id=msg_id,
            offset_msg_id=h.msg_id,
            message_queue=MessageQueue(header.topic, broker_name, h.queue_id),
            queue_offset=h.queue_offset,
            transaction_id=h.transaction_id,
            region_id=h.msg_region or "DefaultRegion",
            trace_on=h.trace_on != "false",
        )

    # -- clients --------------------------------------------------------------------------

    async def heartbeat(self, addr: str, data: HeartbeatData, timeout: float | None = None) -> int:
        """HEART_BEAT; returns the broker's version."""
        request = RemotingCommand.request(RequestCode.HEART_BEAT, None, B.dumps(data.to_json()))
        response = await self._call(addr, request, timeout=timeout)
        return response.version

    async def unregister_client(
        self,
        addr: str,
        client_id: str,
        producer_group: str | None,
        consumer_group: str | None,
        timeout: float | None = None,
    ) -> None:
        header = H.UnregisterClientRequestHeader(client_id, producer_group, consumer_group)
        await self._call(addr, RemotingCommand.request(RequestCode.UNREGISTER_CLIENT, header.to_ext()), timeout=timeout)

    async def get_consumer_ids(self, addr: str, group: str, timeout: float | None = None) -> list[str]:
        request = RemotingCommand.request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, H.GroupRequestHeader(group).to_ext())
        response = await self._call(addr, request, timeout=timeout)
        return list(self._body(response, addr, GetConsumerListByGroupResponseBody.from_json).consumer_ids)

    # -- offsets --------------------------------------------------------------------------

    async def query_consumer_offset(self, addr: str, group: str, mq: MessageQueue, timeout: float | None = None) -> int:
        """The committed offset, or -1 when the broker has none (22 QUERY_NOT_FOUND)."""
        header = H.QueryConsumerOffsetRequestHeader(group, mq.topic, mq.queue_id)
        request = RemotingCommand.request(RequestCode.QUERY_CONSUMER_OFFSET, header.to_ext())
        response = await self._call(addr, request, (ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND), timeout)
        if response.code == ResponseCode.QUERY_NOT_FOUND:
            return -1
        return self._header(H.OffsetResponseHeader, response, addr).offset

    async def update_consumer_offset(
        self,
        addr: str,
        group: str,
        mq: MessageQueue,
        offset: int,
        *,
        oneway: bool = False,
        timeout: float | None = None,
    ) -> None:
        header = H.UpdateConsumerOffsetRequestHeader(group, mq.topic, mq.queue_id, offset)
        request = RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, header.to_ext())
        if oneway:
            await self.invoke_oneway(addr, request, timeout)
        else:
            await self._call(addr, request, timeout=timeout)

    async def _queue_offset(self, code: int, addr: str, header: H.Header, timeout: float | None) -> int:
        response = await self._call(addr, RemotingCommand.request(code, header.to_ext()), timeout=timeout)
        return self._header(H.OffsetResponseHeader, response, addr).offset

    async def get_max_offset(self, addr: str, mq: MessageQueue, timeout: float | None = None) -> int:
        return await self._queue_offset(
            RequestCode.GET_MAX_OFFSET, addr, H.QueueRequestHeader(mq.topic, mq.queue_id), timeout
        )

    async def get_min_offset(self, addr: str, mq: MessageQueue, timeout: float | None = None) -> int:
        return await self._queue_offset(
            RequestCode.GET_MIN_OFFSET, addr, H.QueueRequestHeader(mq.topic, mq.queue_id), timeout
        )

    async def search_offset(self, addr: str, mq: MessageQueue, timestamp_ms: int, timeout: float | None = None) -> int:
        header = H.SearchOffsetRequestHeader(mq.topic, mq.queue_id, timestamp_ms)
        return await self._queue_offset(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, addr, header, timeout)

    # -- pulling --------------------------------------------------------------------------

    async def pull_raw(self, addr: str, header: H.PullMessageRequestHeader, timeout: float) -> RawPull:
        """PULL_MESSAGE, answered as sent: any code, the body's records undecoded."""
        request = RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_ext())
        response = await self.invoke(addr, request, timeout)
        h = self._header(H.PullMessageResponseHeader, response, addr)
        return RawPull(response.code, h.next_begin_offset, h.min_offset, h.max_offset, response.body)

    async def pull(
        self,
        addr: str,
        header: H.PullMessageRequestHeader,
        timeout: float,
        *,
        before_decode: BeforeDecode | None = None,
        on_result: Callable[[PullResult], None] | None = None,
    ) -> PullResult:
        """PULL_MESSAGE; messages decoded, bodies inflated, MIN/MAX_OFFSET set.

        `before_decode(status, header)`, if given, is called once the answer's status and
        header are known, before its records are decoded (to `pull_ahead` the next pull).

        `on_result(result)`, if given, is called with the result before it is returned. The
        answer is then decoded in the connection's reader as it arrives, and `on_result`
        runs there too, before this task is woken: a consumer hands the messages to the
        task polling for them at once, not after the scheduler has come round to this one
        (on a caught-up consumer that is a pass of the event loop per message, about 20 µs
        of its latency). What fails there is raised here."""
        request = RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_ext())
        if on_result is None:
            response = await self.invoke(addr, request, timeout)
            return self._pull_result(response, addr, before_decode)
        done: list[PullResult | Exception] = []

        def decode_in_reader(response: RemotingCommand) -> None:
            try:
                result = self._pull_result(response, addr, before_decode)
                on_result(result)
            except Exception as exc:  # noqa: BLE001 - raised in the caller's task, below
                done.append(exc)
            else:
                done.append(result)

        response = await self.invoke(addr, request, timeout, on_answer=decode_in_reader)
        if not done:  # the reader did not call back (it always does): decode here
            decode_in_reader(response)
        if isinstance(done[0], Exception):
            raise done[0]
        return done[0]

    def pull_ahead(self, addr: str, header: H.PullMessageRequestHeader, timeout: float) -> PullAhead | None:
        """PULL_MESSAGE sent now, without waiting, on the open connection to `addr`; its answer
        is taken with `pull_answer`. None, with nothing sent, when it cannot leave at once."""
        request = RemotingCommand.request(RequestCode.PULL_MESSAGE, header.to_ext())
        self.sign(request)
        try:
            sent = self.remoting.invoke_nowait(addr, request, timeout)
        except ProtocolError as exc:
            raise MQClientError(f"cannot send {request.code} to {addr}: {exc}") from None
        return None if sent is None else PullAhead(addr, sent, trio.current_time())

    async def pull_answer(self, ahead: PullAhead, *, before_decode: BeforeDecode | None = None) -> PullResult:
        """The answer to a `pull_ahead`, as `pull` returns it (raising what it raises)."""
        try:
            response = await ahead.sent.wait()
        except RemotingError as exc:
            raise translate_remoting_error(exc, trio.current_time() - ahead.start) from None
        return self._pull_result(response, ahead.addr, before_decode)

    def _pull_result(self, response: RemotingCommand, addr: str, before_decode: BeforeDecode | None) -> PullResult:
        status = _PULL_STATUS.get(response.code)  # type: ignore[call-overload]
        if status is None:
            raise MQBrokerError(response.code, response.remark, address=addr)
        h = self._header(H.PullMessageResponseHeader, response, addr)
        if before_decode is not None:
            before_decode(status, h)
        messages: list[MessageExt] = []
        if status == PullStatus.FOUND and response.body:
            try:
                for msg in iter_records(response.body):
                    msg.body = decompress_body(msg.body, msg.sys_flag)
                    msg.properties[P.MIN_OFFSET] = str(h.min_offset)
                    msg.properties[P.MAX_OFFSET] = str(h.max_offset)
                    messages.append(msg)
            except ProtocolError as exc:
                raise MQClientError(f"malformed pull body from {addr}: {exc}") from None
        return PullResult(status, h.next_begin_offset, h.min_offset, h.max_offset, h.suggest_which_broker_id, messages)

    async def consumer_send_back(
        self,
        addr: str,
        msg: MessageExt,
        group: str,
        delay_level: int,
        max_reconsume_times: int,
        timeout: float | None = None,
    ) -> None:
        """CONSUMER_SEND_MSG_BACK: the broker re-stores the message for a later retry."""
        header = H.ConsumerSendMsgBackRequestHeader(
            offset=msg.commitlog_offset,
            group=group,
            delay_level=delay_level,
            origin_msg_id=msg.msg_id,
            origin_topic=msg.topic,
            unit_mode=False,
            max_reconsume_times=max_reconsume_times,
        )
        await self._call(
            addr, RemotingCommand.request(RequestCode.CONSUMER_SEND_MSG_BACK, header.to_ext()), timeout=timeout
        )

    # -- POP consumption (RocketMQ 5, docs/pop.md) ---------------------------------------

    async def pop(self, addr: str, header: PopMessageRequestHeader, timeout: float) -> PopResult:
        """POP_MESSAGE; the broker's answer code with the messages (empty unless SUCCESS).
        `timeout` covers the long poll: the header's pollTime plus the network's share."""
        request = RemotingCommand.request(RequestCode.POP_MESSAGE, header.to_ext())
        response = await self.invoke(addr, request, timeout)
        if response.code not in _POP_ANSWERS:
            raise MQBrokerError(response.code, response.remark, address=addr)
        if response.code != ResponseCode.SUCCESS:
            return PopResult(response.code, None, [])
        h = self._header(PopMessageResponseHeader, response, addr)
        messages: list[MessageExt] = []
        try:
            for msg in iter_records(response.body or b""):
                msg.body = decompress_body(msg.body, msg.sys_flag)
                messages.append(msg)
        except ProtocolError as exc:
            raise MQClientError(f"malformed pop body from {addr}: {exc}") from None
        return PopResult(response.code, h, messages)

    async def ack(self, addr: str, header: AckMessageRequestHeader, timeout: float | None = None) -> None:
        """ACK_MESSAGE; MQBrokerError unless SUCCESS."""
        await self._call(addr, RemotingCommand.request(RequestCode.ACK_MESSAGE, header.to_ext()), timeout=timeout)

    async def change_invisible_time(
        self, addr: str, header: ChangeInvisibleTimeRequestHeader, timeout: float | None = None
    ) -> ChangeInvisibleTimeResponseHeader:
        """CHANGE_MESSAGE_INVISIBLETIME: the new handle's popTime, invisibleTime, reviveQid."""
        request = RemotingCommand.request(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, header.to_ext())
        response = await self._call(addr, request, timeout=timeout)
        return self._header(ChangeInvisibleTimeResponseHeader, response, addr)

    # -- orderly locks --------------------------------------------------------------------

    async def lock_batch(
        self, addr: str, group: str, client_id: str, mqs: Sequence[MessageQueue], timeout: float | None = None
    ) -> set[MessageQueue]:
        """LOCK_BATCH_MQ; returns the queues this client now holds."""
        body = LockBatchRequestBody(group, client_id, tuple(mqs)).to_json()
        response = await self._call(
            addr, RemotingCommand.request(RequestCode.LOCK_BATCH_MQ, None, B.dumps(body)), timeout=timeout
        )
        return set(self._body(response, addr, LockBatchResponseBody.from_json).locked)

    async def unlock_batch(
        self, addr: str, group: str, client_id: str, mqs: Sequence[MessageQueue], timeout: float | None = None
    ) -> None:
        body = UnlockBatchRequestBody(group, client_id, tuple(mqs)).to_json()
        await self._call(
            addr, RemotingCommand.request(RequestCode.UNLOCK_BATCH_MQ, None, B.dumps(body)), timeout=timeout
        )
