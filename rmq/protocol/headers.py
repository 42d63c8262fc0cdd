"""Typed custom headers: declared once, read from and written to extFields.

Each header is a dataclass whose snake_case fields map to RocketMQ's camelCase wire
names (`consumer_group` ⇄ `consumerGroup`; irregular names via `_WIRE`). Fields
without a default are required. Reading is strict where Java is lenient: a missing
required field or a bad number raises HeaderError, which a server turns into a
SYSTEM_ERROR answer naming the field instead of failing later with a null.

Values arrive as text (the command codec already stringified JSON numbers); booleans
accept "true" and "1" (the C++ client sends "1"), case-insensitively. Numbers must fit the
Java type of the field, as in RocketMQ: a long for offsets, timestamps, millisecond
durations (POP's times too, the controller's ``...Mills``), broker ids, subVersion and
invokeTime, an int for everything else.
"""

from __future__ import annotations

import dataclasses
import struct
import typing
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from .codes import CURRENT_VERSION, RPC_TYPE, LanguageCode, SerializeType
from .command import RemotingCommand
from .constants import AUTO_CREATE_TOPIC
from .errors import HeaderError
from .header_codec import _LANG_NAME
from .header_codec import _encode_basestring as _enc  # the C escaper encode_ext_json uses

H = TypeVar("H", bound="Header")


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def parse_bool(text: str) -> bool:
    return text.strip().lower() in ("true", "1")


_RANGES = {"int": (-(2**31), 2**31 - 1), "long": (-(2**63), 2**63 - 1)}
_LONG_MARKS = (
    "offset",
    "timestamp",
    "millis",
    "mills",  # the controller's ...Mills (RocketMQ's spelling)
    "broker_id",
    "sub_version",
    "invoke_time",
    # POP (RocketMQ 5.x): epoch and duration milliseconds, the rest of a queue
    "pop_time",
    "born_time",
    "poll_time",
    "invisible_time",
    "rest_num",
)


def _int_kind(attr: str) -> str:
    """The Java type of an integer field: long where RocketMQ declares Long (see above), else int."""
    return "long" if any(mark in attr for mark in _LONG_MARKS) else "int"


class Header:
    """Base of every custom header; subclasses are dataclasses."""

    _WIRE: ClassVar[dict[str, str]] = {}
    # (attribute, wire name, kind, required) with kind one of "str", "int" (a Java int),
    # "long" (a Java long), "bool"; built once per class
    _spec: ClassVar[tuple[tuple[str, str, str, bool], ...]]

    @classmethod
    def _fields(cls) -> tuple[tuple[str, str, str, bool], ...]:
        spec = cls.__dict__.get("_spec")
        if spec is None:
            hints = typing.get_type_hints(cls)
            out = []
            for f in dataclasses.fields(cls):  # type: ignore[arg-type]
                hint = hints[f.name]
                args = typing.get_args(hint) or (hint,)
                kind = "bool" if bool in args else _int_kind(f.name) if int in args else "str"
                required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
                out.append((f.name, cls._WIRE.get(f.name, _camel(f.name)), kind, required))
            spec = tuple(out)
            cls._spec = spec
        return spec

    @classmethod
    def from_ext(cls: type[H], ext: dict[str, str]) -> H:
        """Read the header from extFields; HeaderError names a missing or bad field."""
        read = cls.__dict__.get("_read")
        if read is None:
            read = cls._read = _compile_read(cls, {})  # type: ignore[attr-defined]
        return read(ext)  # type: ignore[no-any-return]

    @classmethod
    def _writers(cls) -> tuple[Any, Any]:
        """(to_ext's writer, the JSON writer of the same fields) for HeaderCommand."""
        writers = cls.__dict__.get("_writer_pair")
        if writers is None:
            writers = cls._writer_pair = (_compile_write(cls, {}), _compile_write_json(cls, {}))  # type: ignore[attr-defined]
        return writers

    def to_ext(self) -> dict[str, str]:
        """The header as extFields: every value a string, None fields left out."""
        cls = type(self)
        write = cls.__dict__.get("_write")
        if write is None:
            write = cls._write = _compile_write(cls, {})  # type: ignore[attr-defined]
        return write(self)  # type: ignore[no-any-return]


# Header codecs are generated per class (and per wire naming) on first use: this runs for
# every request and response, and the generic loop over the field table cost 2-3 times more.


def _int_value(raw: str, wire: str, kind: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise HeaderError(f"the header field {wire!r} is not an integer: {raw!r}") from None
    low, high = _RANGES[kind]
    if not low <= value <= high:
        raise HeaderError(f"the header field {wire!r} does not fit a Java {kind}: {raw!r}")
    return value


def _compile_read(cls: type[Header], rename: dict[str, str]) -> Any:
    """`ext -> cls(...)`; `rename` maps a wire name to the key read instead (V2's letters).

    Straight-line code: each field read into a local (parsed inline, its default where it is
    missing) and the dataclass called with them in field order. `_int_value` and `parse_bool`
    say what a field's value means; the inline parse is theirs (tests/protocol/test_headers.py
    holds the readers to a loop over the field table)."""
    defaults = {f.name: f.default for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    lines = ["def read(ext):", "    get = ext.get"]
    args = []
    scope: dict[str, Any] = {"cls": cls, "_int_value": _int_value, "HeaderError": HeaderError}
    for n, (attr, wire, kind, required) in enumerate(cls._fields()):
        key = rename.get(wire, wire)
        value = f"v{n}"
        args.append(value)
        lines.append(f"    raw = get({key!r})")
        if required:
            message = f"the header field {wire!r} is missing in {cls.__name__}"
            lines.append(f"    if raw is None: raise HeaderError({message!r})")
            pad = "    "
        else:
            default = defaults[attr]
            if default is dataclasses.MISSING:  # a default_factory: let the class make it
                return _compile_read_kw(cls, rename)
            scope[f"d{n}"] = default
            lines += [f"    if raw is None: {value} = d{n}", "    else:"]
            pad = "        "
        if kind in ("int", "long"):
            low, high = _RANGES[kind]
            lines += [
                f"{pad}try: {value} = int(raw)",
                f"{pad}except ValueError: _int_value(raw, {wire!r}, {kind!r})  # raises",
                f"{pad}if not {low} <= {value} <= {high}: _int_value(raw, {wire!r}, {kind!r})  # raises",
            ]
        elif kind == "bool":
            lines.append(f"{pad}{value} = raw.strip().lower() in ('true', '1')  # parse_bool")
        else:
            lines.append(f"{pad}{value} = raw")
    lines.append(f"    return cls({', '.join(args)})")
    exec("\n".join(lines), scope)  # noqa: S102 - code built above from the class's own field table
    return scope["read"]


def _compile_read_kw(cls: type[Header], rename: dict[str, str]) -> Any:
    """`_compile_read` for a class with a default_factory field: keywords, the class fills in
    what is missing."""
    lines = ["def read(ext):", "    get = ext.get", "    kw = {}"]
    for attr, wire, kind, required in cls._fields():
        key = rename.get(wire, wire)
        lines.append(f"    raw = get({key!r})")
        if kind in ("int", "long"):
            value = f"_int_value(raw, {wire!r}, {kind!r})"
        elif kind == "bool":
            value = "parse_bool(raw)"
        else:
            value = "raw"
        lines.append(f"    if raw is not None: kw[{attr!r}] = {value}")
        if required:
            message = f"the header field {wire!r} is missing in {cls.__name__}"
            lines.append(f"    else: raise HeaderError({message!r})")
    lines.append("    return cls(**kw)")
    scope: dict[str, Any] = {"cls": cls, "_int_value": _int_value, "parse_bool": parse_bool, "HeaderError": HeaderError}
    exec("\n".join(lines), scope)  # noqa: S102 - as above
    return scope["read"]


def _compile_write(cls: type[Header], rename: dict[str, str]) -> Any:
    """`header -> extFields`, None fields left out; `rename` as for `_compile_read`."""
    lines = ["def write(self):", "    out = {}"]
    for attr, wire, kind, _ in cls._fields():
        key = rename.get(wire, wire)
        lines.append(f"    v = self.{attr}")
        if kind == "bool":
            lines.append(f"    if v is not None: out[{key!r}] = 'true' if v else 'false'")
        else:
            lines.append(f"    if v is not None: out[{key!r}] = v if type(v) is str else str(v)")
    lines.append("    return out")
    scope: dict[str, Any] = {}
    exec("\n".join(lines), scope)  # noqa: S102 - as above
    return scope["write"]


def _compile_write_json(cls: type[Header], rename: dict[str, str]) -> Any:
    """`header -> extFields as JSON members` (header_codec.encode_ext_json's text for what
    `_compile_write` makes, without making the dict)."""
    lines = ["def write_json(self):", "    out = []"]
    for attr, wire, kind, _ in cls._fields():
        member = _enc(rename.get(wire, wire)) + ":"
        lines.append(f"    v = self.{attr}")
        if kind == "bool":
            true, false = repr(member + '"true"'), repr(member + '"false"')
            lines.append(f"    if v is not None: out.append({true} if v else {false})")
        else:  # an int needs no escaping; anything else as the dict writer and encode_ext_json do it
            value = "f'\"{v}\"' if type(v) is int else enc(v if type(v) is str else str(v))"
            lines.append(f"    if v is not None: out.append({member!r} + ({value}))")
    lines.append('    return ",".join(out)')
    scope: dict[str, Any] = {"enc": _enc}
    exec("\n".join(lines), scope)  # noqa: S102 - as above
    return scope["write_json"]


class HeaderCommand(RemotingCommand):
    """A command whose extFields are a typed header's.

    Nothing makes them a dict unless someone asks (to read, change or sign them): a JSON
    header is written straight from the header's fields by a generated writer, the bytes the
    dict would give at about half the cost. Sends and their answers go this way (one each per
    message); ``writers`` picks a wire naming, e.g. ``V2_WRITERS`` for SEND_MESSAGE_V2.
    """

    __slots__ = ("header", "_writers")
    header: Header
    _writers: tuple[Any, Any]  # (header -> extFields dict, header -> JSON members)

    @classmethod
    def make(
        cls, code: int, header: Header, body: bytes = b"", *, writers: tuple[Any, Any] | None = None
    ) -> HeaderCommand:
        """A request (the connection assigns its opaque)."""
        return cls(code, None, body)._holding(header, writers)

    @classmethod
    def response_to(
        cls, request: RemotingCommand, code: int, header: Header, remark: str | None = None
    ) -> HeaderCommand:
        """The answer to ``request``, as ``request.make_response`` makes it."""
        cmd = cls(
            code, None, remark=remark, opaque=request.opaque, flag=RPC_TYPE, serialize_type=request.serialize_type
        )
        return cmd._holding(header, None)

    def _holding(self, header: Header, writers: tuple[Any, Any] | None) -> HeaderCommand:
        self._ext = None  # made from the header when asked for
        self.header = header
        self._writers = writers or type(header)._writers()
        return self

    @property
    def ext_fields(self) -> dict[str, str]:
        ext = self._ext
        if ext is None:
            ext = self._ext = self._writers[0](self.header)
        return ext

    @ext_fields.setter
    def ext_fields(self, value: dict[str, Any]) -> None:
        RemotingCommand.ext_fields.fset(self, value)  # type: ignore[attr-defined]

    def _ext_json(self) -> str:
        if self._ext is None:
            return self._writers[1](self.header)  # type: ignore[no-any-return]
        return super()._ext_json()


# --- send ----------------------------------------------------------------------------


@dataclass(slots=True)
class SendMessageRequestHeader(Header):
    producer_group: str
    topic: str
    default_topic: str = AUTO_CREATE_TOPIC
    default_topic_queue_nums: int = 4
    queue_id: int = -1
    sys_flag: int = 0
    born_timestamp: int = 0
    flag: int = 0
    properties: str | None = None
    reconsume_times: int | None = None
    unit_mode: bool | None = None
    max_reconsume_times: int | None = None
    batch: bool | None = None
    bname: str | None = None

    @classmethod
    def from_v2_ext(cls, ext: dict[str, str]) -> SendMessageRequestHeader:
        """Read SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE's one-letter keys."""
        return _READ_V2(ext)  # type: ignore[no-any-return]

    def to_v2_ext(self) -> dict[str, str]:
        return _WRITE_V2(self)  # type: ignore[no-any-return]


# SendMessageRequestHeaderV2's short keys (a..n) and the V1 names they stand for.
V2_TO_V1 = {
    "a": "producerGroup",
    "b": "topic",
    "c": "defaultTopic",
    "d": "defaultTopicQueueNums",
    "e": "queueId",
    "f": "sysFlag",
    "g": "bornTimestamp",
    "h": "flag",
    "i": "properties",
    "j": "reconsumeTimes",
    "k": "unitMode",
    "l": "maxReconsumeTimes",
    "m": "batch",
    "n": "bname",
}
V1_TO_V2 = {v: k for k, v in V2_TO_V1.items()}
_READ_V2 = _compile_read(SendMessageRequestHeader, V1_TO_V2)
_WRITE_V2 = _compile_write(SendMessageRequestHeader, V1_TO_V2)
V2_WRITERS = (_WRITE_V2, _compile_write_json(SendMessageRequestHeader, V1_TO_V2))  # see HeaderCommand


@dataclass(slots=True)
class SendMessageResponseHeader(Header):
    msg_id: str
    queue_id: int
    queue_offset: int
    transaction_id: str | None = None
    msg_region: str | None = None
    trace_on: str | None = None

    _WIRE = {"msg_region": "MSG_REGION", "trace_on": "TRACE_ON"}


@dataclass(slots=True)
class ReplyMessageRequestHeader(Header):
    """PUSH_REPLY_MESSAGE_TO_CLIENT (326): a reply as the broker pushes it to its requester.

    The replier's send header, plus where and when the broker took it; the body is the
    reply's body as sent (compressed when `sys_flag` says so)."""

    producer_group: str
    topic: str
    default_topic: str
    default_topic_queue_nums: int
    queue_id: int
    sys_flag: int
    born_timestamp: int
    flag: int
    born_host: str
    store_host: str
    store_timestamp: int
    properties: str | None = None
    reconsume_times: int | None = None
    unit_mode: bool = False


_FRAME_HEAD = struct.Struct(">ii")  # frame length, serialize type and header length


class SendAnswer(HeaderCommand):
    """The answer to a stored send: a HeaderCommand of a SendMessageResponseHeader with no
    body, made without the general constructor and, in JSON, encoded by one format string:
    every send is answered with one, and the general way (dict-free as it is) cost several
    times more. The bytes are the general codec's (tests/protocol/test_send_answer.py holds
    them to it); whatever else is asked of it (its extFields, the ROCKETMQ serialization, a
    field of another type) goes the general way."""

    __slots__ = ()
    header: SendMessageResponseHeader

    @classmethod
    def to(
        cls, request: RemotingCommand, code: int, header: SendMessageResponseHeader, remark: str | None = None
    ) -> SendAnswer:
        """As ``HeaderCommand.response_to(request, code, header, remark)``."""
        cmd = cls.__new__(cls)
        cmd.code = code
        cmd.language = LanguageCode.PYTHON
        cmd.version = CURRENT_VERSION
        cmd.opaque = request.opaque
        cmd.flag = RPC_TYPE
        cmd.remark = remark
        cmd.body = b""
        cmd.serialize_type = request.serialize_type
        cmd._ext = None
        cmd._ext_raw = None
        cmd.header = header
        cmd._writers = _ANSWER_WRITERS
        return cmd

    def encode(self) -> bytes:
        h = self.header
        msg_id, queue_id, queue_offset, region, trace_on = (
            h.msg_id, h.queue_id, h.queue_offset, h.msg_region, h.trace_on
        )  # fmt: skip
        if (
            self.serialize_type != SerializeType.JSON
            or self._ext is not None
            or self.body
            or h.transaction_id is not None
            or not (type(msg_id) is type(region) is type(trace_on) is str)
            or not (type(queue_id) is type(queue_offset) is int)
        ):
            return super().encode()
        remark = "" if self.remark is None else ',"remark":' + _enc(self.remark)
        key = (region, trace_on, self.flag, self.language)
        middle = _ANSWER_MIDDLES.get(key)  # from the queue offset's end to the opaque: the broker's constants
        if middle is None:
            if len(_ANSWER_MIDDLES) >= 64:
                _ANSWER_MIDDLES.clear()
            middle = _ANSWER_MIDDLES[key] = (
                f'","MSG_REGION":{_enc(region)},"TRACE_ON":{_enc(trace_on)}}},"flag":{int(self.flag)},'
                f'"language":"{_LANG_NAME.get(self.language, "OTHER")}","opaque":'
            )
        header = (
            f'{{"code":{int(self.code)},"extFields":{{"msgId":{_enc(msg_id)},"queueId":"{queue_id}",'
            f'"queueOffset":"{queue_offset}{middle}{int(self.opaque)}{remark},"serializeTypeCurrentRPC":"JSON",'
            f'"version":{int(self.version)}}}'
        ).encode()
        size = len(header)
        if size > 0xFFFFFF:
            return super().encode()  # raises as the general way does
        return _FRAME_HEAD.pack(4 + size, size) + header  # serialize type JSON: 0 in the top byte


_ANSWER_WRITERS = SendMessageResponseHeader._writers()
_ANSWER_MIDDLES: dict[tuple[str, str, int, int], str] = {}


# --- pull and offsets ----------------------------------------------------------------


@dataclass(slots=True)
class PullMessageRequestHeader(Header):
    consumer_group: str
    topic: str
    queue_id: int
    queue_offset: int
    max_msg_nums: int = 32
    sys_flag: int = 0
    commit_offset: int = 0
    suspend_timeout_millis: int = 15000
    sub_version: int = 0
    subscription: str | None = None
    expression_type: str | None = None
    bname: str | None = None
    max_msg_bytes: int | None = None


@dataclass(slots=True)
class PullMessageResponseHeader(Header):
    suggest_which_broker_id: int
    next_begin_offset: int
    min_offset: int
    max_offset: int


@dataclass(slots=True)
class QueryConsumerOffsetRequestHeader(Header):
    consumer_group: str
    topic: str
    queue_id: int
    set_zero_if_not_found: bool | None = None


@dataclass(slots=True)
class UpdateConsumerOffsetRequestHeader(Header):
    consumer_group: str
    topic: str
    queue_id: int
    commit_offset: int


@dataclass(slots=True)
class QueueRequestHeader(Header):
    """GET_MAX_OFFSET, GET_MIN_OFFSET and GET_EARLIEST_MSG_STORETIME share this shape."""

    topic: str
    queue_id: int


@dataclass(slots=True)
class OffsetResponseHeader(Header):
    offset: int


@dataclass(slots=True)
class SearchOffsetRequestHeader(Header):
    topic: str
    queue_id: int
    timestamp: int


@dataclass(slots=True)
class EarliestMsgStoretimeResponseHeader(Header):
    timestamp: int


@dataclass(slots=True)
class ViewMessageRequestHeader(Header):
    offset: int


@dataclass(slots=True)
class QueryMessageRequestHeader(Header):
    topic: str
    key: str
    max_num: int
    begin_timestamp: int
    end_timestamp: int


@dataclass(slots=True)
class QueryMessageResponseHeader(Header):
    index_last_update_timestamp: int
    index_last_update_phyoffset: int


# --- clients -------------------------------------------------------------------------


@dataclass(slots=True)
class UnregisterClientRequestHeader(Header):
    client_id: str
    producer_group: str | None = None
    consumer_group: str | None = None

    _WIRE = {"client_id": "clientID"}


@dataclass(slots=True)
class ConsumerSendMsgBackRequestHeader(Header):
    offset: int
    group: str
    delay_level: int = 0
    origin_msg_id: str | None = None
    origin_topic: str | None = None
    unit_mode: bool | None = None
    max_reconsume_times: int | None = None
    bname: str | None = None


@dataclass(slots=True)
class GroupRequestHeader(Header):
    """GET_CONSUMER_LIST_BY_GROUP, NOTIFY_CONSUMER_IDS_CHANGED, GET_CONSUMER_CONNECTION_LIST."""

    consumer_group: str


@dataclass(slots=True)
class EndTransactionRequestHeader(Header):
    producer_group: str
    tran_state_table_offset: int
    commit_log_offset: int
    commit_or_rollback: int
    msg_id: str
    from_transaction_check: bool = False
    transaction_id: str | None = None
    bname: str | None = None


@dataclass(slots=True)
class CheckTransactionStateRequestHeader(Header):
    tran_state_table_offset: int
    commit_log_offset: int
    msg_id: str | None = None
    transaction_id: str | None = None
    offset_msg_id: str | None = None
    bname: str | None = None


@dataclass(slots=True)
class ResetOffsetRequestHeader(Header):
    topic: str
    group: str
    timestamp: int
    is_force: bool = True


@dataclass(slots=True)
class GetConsumerRunningInfoRequestHeader(Header):
    consumer_group: str
    client_id: str
    jstack_enable: bool | None = None


@dataclass(slots=True)
class ConsumeMessageDirectlyRequestHeader(Header):
    """CONSUME_MESSAGE_DIRECTLY (309); the broker fills in brokerName before relaying."""

    consumer_group: str
    client_id: str
    msg_id: str
    broker_name: str | None = None
    topic: str | None = None
    topic_sys_flag: int | None = None
    group_sys_flag: int | None = None


# --- admin ---------------------------------------------------------------------------


@dataclass(slots=True)
class CreateTopicRequestHeader(Header):
    topic: str
    default_topic: str = AUTO_CREATE_TOPIC
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = 6
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int | None = None
    order: bool = False


@dataclass(slots=True)
class TopicRequestHeader(Header):
    """DELETE_TOPIC_IN_BROKER, GET_TOPIC_STATS_INFO, QUERY_TOPIC_CONSUME_BY_WHO."""

    topic: str


@dataclass(slots=True)
class GetConsumeStatsRequestHeader(Header):
    consumer_group: str
    topic: str | None = None


@dataclass(slots=True)
class DeleteSubscriptionGroupRequestHeader(Header):
    group_name: str


@dataclass(slots=True)
class GetSubscriptionGroupConfigRequestHeader(Header):
    """GET_SUBSCRIPTIONGROUP_CONFIG (RocketMQ 5.x)."""

    group: str


@dataclass(slots=True)
class CloneGroupOffsetRequestHeader(Header):
    """CLONE_GROUP_OFFSET (314): no topic means every topic the source group has offsets in."""

    src_group: str
    dest_group: str
    topic: str | None = None
    offline: bool = False


@dataclass(slots=True)
class QueryConsumeQueueRequestHeader(Header):
    """QUERY_CONSUME_QUEUE (321)."""

    topic: str
    queue_id: int
    index: int
    count: int
    consumer_group: str | None = None


@dataclass(slots=True)
class ViewBrokerStatsDataRequestHeader(Header):
    """VIEW_BROKER_STATS_DATA (315): one of BrokerStatsManager's items, e.g. TOPIC_PUT_NUMS
    keyed by topic or GROUP_GET_NUMS keyed by "topic@group"."""

    stats_name: str
    stats_key: str


@dataclass(slots=True)
class GetConsumeStatsInBrokerHeader(Header):
    """GET_BROKER_CONSUME_STATS (317)."""

    is_order: bool = False


# --- name server ---------------------------------------------------------------------


@dataclass(slots=True)
class RegisterBrokerRequestHeader(Header):
    broker_name: str
    broker_addr: str
    cluster_name: str
    ha_server_addr: str
    broker_id: int
    compressed: bool = False
    body_crc32: int = 0


@dataclass(slots=True)
class RegisterBrokerResponseHeader(Header):
    ha_server_addr: str | None = None
    master_addr: str | None = None


@dataclass(slots=True)
class UnregisterBrokerRequestHeader(Header):
    broker_name: str
    broker_addr: str
    cluster_name: str
    broker_id: int


@dataclass(slots=True)
class GetRouteInfoRequestHeader(Header):
    topic: str
    accept_standard_json_only: bool | None = None


@dataclass(slots=True)
class DeleteTopicFromNamesrvRequestHeader(Header):
    topic: str
    cluster_name: str | None = None


@dataclass(slots=True)
class KVConfigRequestHeader(Header):
    """PUT_KV_CONFIG (value required there), GET_KV_CONFIG and DELETE_KV_CONFIG."""

    namespace: str
    key: str
    value: str | None = None


@dataclass(slots=True)
class KVConfigResponseHeader(Header):
    value: str


@dataclass(slots=True)
class NamespaceRequestHeader(Header):
    namespace: str


@dataclass(slots=True)
class BrokerNameRequestHeader(Header):
    """WIPE_WRITE_PERM_OF_BROKER and ADD_WRITE_PERM_OF_BROKER."""

    broker_name: str


@dataclass(slots=True)
class ClusterRequestHeader(Header):
    cluster: str


# --- controller (RocketMQ 5.x, RIP-44) ---------------------------------------------------


@dataclass(slots=True)
class AlterSyncStateSetRequestHeader(Header):
    """CONTROLLER_ALTER_SYNC_STATE_SET; the body is the SyncStateSet asked for."""

    broker_name: str
    master_broker_id: int
    master_epoch: int
    invoke_time: int | None = None


@dataclass(slots=True)
class AlterSyncStateSetResponseHeader(Header):
    new_sync_state_set_epoch: int | None = None


@dataclass(slots=True)
class ElectMasterRequestHeader(Header):
    """CONTROLLER_ELECT_MASTER; brokerId -1: the controller's own trigger (no broker asks)."""

    broker_name: str
    cluster_name: str = ""
    broker_id: int = -1
    designate_elect: bool = False
    invoke_time: int | None = None


@dataclass(slots=True)
class ElectMasterResponseHeader(Header):
    master_broker_id: int | None = None
    master_address: str | None = None
    master_epoch: int | None = None
    sync_state_set_epoch: int | None = None


@dataclass(slots=True)
class GetReplicaInfoRequestHeader(Header):
    broker_name: str


@dataclass(slots=True)
class GetReplicaInfoResponseHeader(Header):
    master_broker_id: int | None = None
    master_address: str | None = None
    master_epoch: int | None = None


@dataclass(slots=True)
class GetMetaDataResponseHeader(Header):
    """CONTROLLER_GET_METADATA_INFO: the controller group, its leader and peers ("id:addr;")."""

    _WIRE: ClassVar[dict[str, str]] = {"is_leader": "isLeader"}

    group: str | None = None
    controller_leader_id: str | None = None
    controller_leader_address: str | None = None
    is_leader: bool = False
    peers: str | None = None


@dataclass(slots=True)
class CleanControllerBrokerDataRequestHeader(Header):
    """CLEAN_BROKER_DATA: brokerControllerIdsToClean is ids joined by ";" (none: the group)."""

    _WIRE: ClassVar[dict[str, str]] = {"is_clean_living_broker": "isCleanLivingBroker"}

    broker_name: str
    cluster_name: str | None = None
    broker_controller_ids_to_clean: str | None = None
    is_clean_living_broker: bool = False
    invoke_time: int | None = None


@dataclass(slots=True)
class GetNextBrokerIdRequestHeader(Header):
    cluster_name: str
    broker_name: str


@dataclass(slots=True)
class GetNextBrokerIdResponseHeader(Header):
    cluster_name: str | None = None
    broker_name: str | None = None
    next_broker_id: int | None = None


@dataclass(slots=True)
class ApplyBrokerIdRequestHeader(Header):
    """CONTROLLER_APPLY_BROKER_ID; registerCheckCode is "address;timestamp"."""

    cluster_name: str
    broker_name: str
    applied_broker_id: int
    register_check_code: str


@dataclass(slots=True)
class ClusterBrokerResponseHeader(Header):
    """ApplyBrokerIdResponseHeader."""

    cluster_name: str | None = None
    broker_name: str | None = None


@dataclass(slots=True)
class RegisterBrokerToControllerRequestHeader(Header):
    cluster_name: str
    broker_name: str
    broker_id: int
    broker_address: str
    invoke_time: int | None = None


@dataclass(slots=True)
class RegisterBrokerToControllerResponseHeader(Header):
    cluster_name: str | None = None
    broker_name: str | None = None
    master_broker_id: int | None = None
    master_address: str | None = None
    master_epoch: int | None = None
    sync_state_set_epoch: int | None = None


@dataclass(slots=True)
class BrokerHeartbeatRequestHeader(Header):
    """BROKER_HEARTBEAT (to a controller)."""

    cluster_name: str
    broker_addr: str
    broker_name: str
    broker_id: int | None = None
    epoch: int | None = None
    max_offset: int | None = None
    confirm_offset: int | None = None
    heartbeat_timeout_mills: int | None = None
    election_priority: int | None = None


@dataclass(slots=True)
class NotifyBrokerRoleChangedRequestHeader(Header):
    """NOTIFY_BROKER_ROLE_CHANGED (controller to broker, oneway); the body is the SyncStateSet."""

    master_address: str | None = None
    master_epoch: int | None = None
    sync_state_set_epoch: int | None = None
    master_broker_id: int | None = None
