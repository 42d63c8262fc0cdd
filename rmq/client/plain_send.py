"""A plain send's request and answer, written and read without the typed header.

A plain `Producer.send` (no queue or selector, no tracing, batching or signing, a body under
the compression threshold, not a reply nor a resend to a retry topic) sends SEND_MESSAGE_V2
with a header whose fields differ per message in born timestamp, flag and properties only.
`SendTemplate` holds the rest for one (group, topic, queue), written once; `SendRequest`
writes the frame from it: the bytes `HeaderCommand.make(code, header, body,
writers=V2_WRITERS).encode()` gives (tests/client/test_plain_send.py proves it), at a
fraction of the cost of a header object, its writer and the generic frame assembly.
`send_result` reads the answer as `ClientAPI.send_message` does, with the same errors.
"""

from __future__ import annotations

from typing import Any

from rmq.protocol import ProtocolError, RemotingCommand, RequestCode, ResponseCode
from rmq.protocol.codes import CURRENT_VERSION, LanguageCode, SerializeType
from rmq.protocol.frame import encode_frame
from rmq.protocol.header_codec import _encode_basestring as _enc  # the escaper encode_ext_json uses
from rmq.protocol.headers import SendMessageResponseHeader

from .errors import MQBrokerError, MQClientError
from .message import MessageQueue, SendResult, SendStatus

_SEND_STATUS = {
    ResponseCode.SUCCESS: SendStatus.SEND_OK,
    ResponseCode.FLUSH_DISK_TIMEOUT: SendStatus.FLUSH_DISK_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: SendStatus.FLUSH_SLAVE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: SendStatus.SLAVE_NOT_AVAILABLE,
}
_INT = (-(2**31), 2**31 - 1)  # queueId is a Java int, queueOffset a long (headers.py)
_LONG = (-(2**63), 2**63 - 1)
_new, _set = object.__new__, object.__setattr__


def _json_value(value: int | str) -> str:
    """A field's JSON value as the generated V2 writer (headers._compile_write_json) writes it."""
    return f'"{value}"' if type(value) is int else _enc(str(value))


class SendTemplate:
    """The SEND_MESSAGE_V2 header of one (group, topic, queue) up to its per-message fields."""

    __slots__ = ("fields", "head", "queue")

    def __init__(self, group: str, queue: MessageQueue, default_topic: str, default_queue_nums: int) -> None:
        self.queue = queue
        # SendMessageRequestHeader's fields a..f in V2_WRITERS' order (sysFlag 0: not compressed)
        fields: dict[str, Any] = {
            "a": group,
            "b": queue.topic,
            "c": default_topic,
            "d": default_queue_nums,
            "e": queue.queue_id,
            "f": 0,
        }
        members = ",".join(f'"{k}":{_json_value(v)}' for k, v in fields.items())
        self.head = f'{{"code":{RequestCode.SEND_MESSAGE_V2:d},"extFields":{{{members},"g":"'
        self.fields = {k: v if type(v) is str else str(v) for k, v in fields.items()}


# after the properties: reconsumeTimes 0, unitMode and batch false, then the command's fields
_MIDDLE = '"j":"0","k":"false","m":"false"},"flag":'
_LANGUAGE = f',"language":"{LanguageCode.PYTHON.name}","opaque":'
_TAIL = f',"serializeTypeCurrentRPC":"JSON","version":{CURRENT_VERSION:d}}}'


class SendRequest(RemotingCommand):
    """SEND_MESSAGE_V2 for a plain message, its header written from a `SendTemplate`.

    `ext_fields` makes the header's dict when asked for; from then on the command encodes
    from that dict (whoever asked may have changed it), as any command does."""

    __slots__ = ("_born", "_props", "_template", "_uflag")

    def __init__(self, template: SendTemplate, born: int, flag: int, properties: str, body: bytes) -> None:
        # RemotingCommand's fields, set directly: this runs once per message
        self.code = RequestCode.SEND_MESSAGE_V2
        self.language = LanguageCode.PYTHON
        self.version = CURRENT_VERSION
        self.opaque = 0
        self.flag = 0
        self.remark = None
        self.body = body
        self.serialize_type = SerializeType.JSON
        self._ext = None
        self._ext_raw = None
        self._template = template
        self._born = born
        self._uflag = flag  # the message's flag (the header's h), not the command's
        self._props = properties

    @property
    def ext_fields(self) -> dict[str, str]:
        ext = self._ext
        if ext is None:
            ext = self._ext = {
                **self._template.fields,
                "g": str(self._born),
                "h": str(self._uflag),
                "i": self._props,
                "j": "0",
                "k": "false",
                "m": "false",
            }
        return ext

    @ext_fields.setter
    def ext_fields(self, value: dict[str, Any]) -> None:
        RemotingCommand.ext_fields.fset(self, value)  # type: ignore[attr-defined]

    def encode(self) -> bytes:
        if self._ext is not None or self.serialize_type != SerializeType.JSON or self.remark is not None:
            return super().encode()
        header = (
            f'{self._template.head}{self._born}","h":"{self._uflag}","i":{_enc(self._props)},'
            f"{_MIDDLE}{self.flag:d}{_LANGUAGE}{self.opaque:d}{_TAIL}"
        )
        return encode_frame(SerializeType.JSON, header.encode(), self.body)


def send_result(response: RemotingCommand, addr: str, mq: MessageQueue, msg_id: str) -> SendResult:
    """The SendResult of a SEND_MESSAGE_V2 answer, as `ClientAPI.send_message` makes it.

    Raises MQBrokerError for a code other than SUCCESS or a flush/slave trouble, MQClientError
    for a malformed header."""
    status = _SEND_STATUS.get(response.code)  # type: ignore[call-overload]
    if status is None:
        raise MQBrokerError(response.code, response.remark, address=addr)
    try:
        ext = response.ext_fields
        offset_msg_id, queue_id, queue_offset = ext["msgId"], int(ext["queueId"]), int(ext["queueOffset"])
        fits = _INT[0] <= queue_id <= _INT[1] and _LONG[0] <= queue_offset <= _LONG[1]
    except (KeyError, ValueError, ProtocolError):
        fits = False
    if not fits:  # read by the typed header, which raises what the general path raises
        try:
            h = SendMessageResponseHeader.from_ext(response.ext_fields)
        except ProtocolError as exc:
            raise MQClientError(f"malformed response from {addr}: {exc}") from None
        offset_msg_id, queue_id, queue_offset = h.msg_id, h.queue_id, h.queue_offset
    # SendResult's fields set as its generated __init__ sets them (it is frozen), without
    # the call: this runs once per message
    result = _new(SendResult)
    _set(result, "status", status)
    _set(result, "msg_id", msg_id)
    _set(result, "offset_msg_id", offset_msg_id)
    _set(result, "message_queue", mq if queue_id == mq.queue_id else MessageQueue(mq.topic, mq.broker_name, queue_id))
    _set(result, "queue_offset", queue_offset)
    _set(result, "transaction_id", ext.get("transactionId"))
    _set(result, "region_id", ext.get("MSG_REGION") or "DefaultRegion")
    _set(result, "trace_on", ext.get("TRACE_ON") != "false")
    return result
