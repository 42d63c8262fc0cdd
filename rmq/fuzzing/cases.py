"""Hostile RemotingCommands for `rmq fuzz`, generated from the protocol's own schemas; no I/O.

Every case is a pure function of (seed, case number, server kind, options): ``make_case``
builds the same bytes again from the same inputs, which is what ``rmq fuzz --replay
SEED:CASE`` relies on. The request codes, their typed headers (headers.py) and body shapes
come from the table below; a case takes a well-formed request of one code and breaks it one
way (its category):

    valid         a well-formed request with plausible values (the baseline)
    wrong-type    text where the header has a number or a boolean
    missing       required header fields left out
    extra         unknown fields, thousands of fields, huge or odd keys, V1 and V2 keys mixed
    number        extreme integers: -1, int32/int64 edges and beyond, 400-digit numbers
    string        hostile text: empty, huge, control characters, lone surrogates, system topics
    properties    broken ``name\\x01value\\x02`` strings and reserved keys with bad values
    body          garbage, oversized, deeply nested, wrongly typed, truncated or compressed bodies
    unknown-code  codes no server of this kind handles
    header        the command header itself broken: wrong JSON types, unknown serialize
                  type, malformed binary header, response or oneway flags
    framing       the byte stream broken: bad lengths, truncated frames, garbage, TLS or HTTP

What the server owes each case (``Case.answer``):

    due       a response with the request's opaque, whatever its code (a well-framed request
              with a decodable header, not oneway)
    optional  the server may answer or close the connection (a header it cannot parse), or
              hold the request (a long poll that may park, an unknown code on a name server,
              which RocketMQ's name server never answers)
    none      framing cases: sent on a connection of their own, then half-closed; the server
              must close it, and whatever it sends before must be valid responses

Codes that change server state (sends, offsets, topics, groups, registrations, configuration)
are used only with ``unsafe=True``: against a production server, leave it off.
"""

from __future__ import annotations

import functools
import json
import random
import re
import struct
import zlib
from dataclasses import dataclass
from typing import Any

from rmq.protocol import header_codec
from rmq.protocol import headers as H
from rmq.protocol import properties as P
from rmq.protocol.codes import CURRENT_VERSION, RPC_ONEWAY, RPC_TYPE, RequestCode, ResponseCode, SerializeType
from rmq.protocol.constants import PULL_COMMIT_OFFSET, PULL_SUBSCRIPTION, PULL_SUSPEND
from rmq.protocol.frame import DEFAULT_MAX_FRAME_SIZE
from rmq.protocol.message import COMPRESSED_FLAG, Message, encode_batch_body
from rmq.protocol.pop import PeekMessageRequestHeader, PollingInfoRequestHeader
from rmq.raft import messages as DL  # DLedger's peer messages: JSON bodies, sans-IO as this module

BROKER = "broker"
NAMESRV = "namesrv"
DLEDGER = "dledger"  # a DLedger member's port (a broker's listenPort + 2 in conf/dledger, or bare)
KINDS = (BROKER, NAMESRV, DLEDGER)

# A body just above RocketMQ's default maxMessageSize (4 MiB): the largest a case sends.
DEFAULT_MAX_BODY = 4 * 1024 * 1024 + 1

DUE = "due"
OPTIONAL = "optional"
NONE = "none"

CATEGORIES: tuple[tuple[str, int], ...] = (
    ("valid", 8),
    ("wrong-type", 10),
    ("missing", 8),
    ("extra", 7),
    ("number", 12),
    ("string", 9),
    ("properties", 6),
    ("body", 12),
    ("unknown-code", 6),
    ("header", 11),
    ("framing", 11),
)
CATEGORY_NAMES = tuple(name for name, _ in CATEGORIES)

# The longest long poll waited for as an answer due; Java's hold service looks every 5 s.
_MAX_WAITED_SUSPEND_MS = 3000
_HOLD_SERVICE_PERIOD = 5.5

# Requests a server sends its clients on their connection (not answers, not protocol breaks).
SERVER_REQUESTS = frozenset(
    {
        RequestCode.CHECK_TRANSACTION_STATE,
        RequestCode.NOTIFY_CONSUMER_IDS_CHANGED,
        RequestCode.RESET_CONSUMER_CLIENT_OFFSET,
        RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT,
        RequestCode.GET_CONSUMER_RUNNING_INFO,
        RequestCode.CONSUME_MESSAGE_DIRECTLY,
        RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT,
    }
)


# -- the request table --------------------------------------------------------------------------


@dataclass(slots=True)
class QueryDataVersionRequestHeader(H.Header):
    broker_name: str
    broker_addr: str
    cluster_name: str
    broker_id: int


@dataclass(slots=True)
class ProducerGroupRequestHeader(H.Header):
    producer_group: str


@dataclass(frozen=True, slots=True)
class CodeSpec:
    """One request code: its header class, body shape, and whether it changes server state."""

    code: int
    header: type[H.Header] | None = None
    body: str = ""  # "", message, batch, heartbeat, lock, register, dataversion, group, clientconfig, javaprops
    mutates: bool = False
    v2: bool = False  # SendMessageRequestHeaderV2's one-letter keys
    answer: str = DUE


R = RequestCode
BROKER_CODES: tuple[CodeSpec, ...] = (
    CodeSpec(R.SEND_MESSAGE, H.SendMessageRequestHeader, "message", mutates=True),
    CodeSpec(R.SEND_MESSAGE_V2, H.SendMessageRequestHeader, "message", mutates=True, v2=True),
    CodeSpec(R.SEND_BATCH_MESSAGE, H.SendMessageRequestHeader, "batch", mutates=True, v2=True),
    CodeSpec(R.CONSUMER_SEND_MSG_BACK, H.ConsumerSendMsgBackRequestHeader, mutates=True),
    CodeSpec(R.PULL_MESSAGE, H.PullMessageRequestHeader),
    CodeSpec(R.HEART_BEAT, None, "heartbeat", mutates=True),
    CodeSpec(R.UNREGISTER_CLIENT, H.UnregisterClientRequestHeader, mutates=True),
    CodeSpec(R.CHECK_CLIENT_CONFIG, None, "clientconfig"),
    CodeSpec(R.GET_CONSUMER_LIST_BY_GROUP, H.GroupRequestHeader),
    CodeSpec(R.QUERY_CONSUMER_OFFSET, H.QueryConsumerOffsetRequestHeader),
    CodeSpec(R.UPDATE_CONSUMER_OFFSET, H.UpdateConsumerOffsetRequestHeader, mutates=True),
    CodeSpec(R.LOCK_BATCH_MQ, None, "lock", mutates=True),
    CodeSpec(R.UNLOCK_BATCH_MQ, None, "lock", mutates=True),
    # Java's EndTransactionProcessor answers nothing for some requests
    CodeSpec(R.END_TRANSACTION, H.EndTransactionRequestHeader, mutates=True, answer=OPTIONAL),
    CodeSpec(R.INVOKE_BROKER_TO_RESET_OFFSET, H.ResetOffsetRequestHeader, mutates=True),
    CodeSpec(R.GET_MAX_OFFSET, H.QueueRequestHeader),
    CodeSpec(R.GET_MIN_OFFSET, H.QueueRequestHeader),
    CodeSpec(R.GET_EARLIEST_MSG_STORETIME, H.QueueRequestHeader),
    CodeSpec(R.SEARCH_OFFSET_BY_TIMESTAMP, H.SearchOffsetRequestHeader),
    CodeSpec(R.VIEW_MESSAGE_BY_ID, H.ViewMessageRequestHeader),
    CodeSpec(R.QUERY_MESSAGE, H.QueryMessageRequestHeader),
    CodeSpec(R.UPDATE_AND_CREATE_TOPIC, H.CreateTopicRequestHeader, mutates=True),
    CodeSpec(R.DELETE_TOPIC_IN_BROKER, H.TopicRequestHeader, mutates=True),
    CodeSpec(R.GET_ALL_TOPIC_CONFIG),
    CodeSpec(R.GET_TOPIC_STATS_INFO, H.TopicRequestHeader),
    CodeSpec(R.QUERY_TOPIC_CONSUME_BY_WHO, H.TopicRequestHeader),
    CodeSpec(R.GET_CONSUME_STATS, H.GetConsumeStatsRequestHeader),
    CodeSpec(R.GET_CONSUMER_CONNECTION_LIST, H.GroupRequestHeader),
    CodeSpec(R.GET_PRODUCER_CONNECTION_LIST, ProducerGroupRequestHeader),
    CodeSpec(R.GET_ALL_PRODUCER_INFO),
    CodeSpec(R.GET_SYSTEM_TOPIC_LIST_FROM_BROKER),
    CodeSpec(R.GET_ALL_CONSUMER_OFFSET),
    CodeSpec(R.GET_ALL_DELAY_OFFSET),
    CodeSpec(R.GET_ALL_SUBSCRIPTIONGROUP_CONFIG),
    CodeSpec(R.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, "group", mutates=True),
    CodeSpec(R.DELETE_SUBSCRIPTIONGROUP, H.DeleteSubscriptionGroupRequestHeader, mutates=True),
    CodeSpec(R.GET_BROKER_CONFIG),
    CodeSpec(R.UPDATE_BROKER_CONFIG, None, "javaprops", mutates=True),
    CodeSpec(R.GET_BROKER_RUNTIME_INFO),
    # RocketMQ 5.x; each finds or creates the group it names, as Java's does
    CodeSpec(R.GET_SUBSCRIPTIONGROUP_CONFIG, H.GetSubscriptionGroupConfigRequestHeader, mutates=True),
    CodeSpec(R.PEEK_MESSAGE, PeekMessageRequestHeader, mutates=True),
    CodeSpec(R.POLLING_INFO, PollingInfoRequestHeader, mutates=True),
)
NAMESRV_CODES: tuple[CodeSpec, ...] = (
    CodeSpec(R.REGISTER_BROKER, H.RegisterBrokerRequestHeader, "register", mutates=True),
    CodeSpec(R.UNREGISTER_BROKER, H.UnregisterBrokerRequestHeader, mutates=True),
    CodeSpec(R.QUERY_DATA_VERSION, QueryDataVersionRequestHeader, "dataversion"),
    CodeSpec(R.WIPE_WRITE_PERM_OF_BROKER, H.BrokerNameRequestHeader, mutates=True),
    CodeSpec(R.ADD_WRITE_PERM_OF_BROKER, H.BrokerNameRequestHeader, mutates=True),
    CodeSpec(R.GET_ROUTEINFO_BY_TOPIC, H.GetRouteInfoRequestHeader),
    CodeSpec(R.GET_BROKER_CLUSTER_INFO),
    CodeSpec(R.GET_ALL_TOPIC_LIST_FROM_NAMESERVER),
    CodeSpec(R.GET_TOPICS_BY_CLUSTER, H.ClusterRequestHeader),
    CodeSpec(R.GET_SYSTEM_TOPIC_LIST_FROM_NS),
    CodeSpec(R.GET_UNIT_TOPIC_LIST),
    CodeSpec(R.GET_HAS_UNIT_SUB_TOPIC_LIST),
    CodeSpec(R.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST),
    CodeSpec(R.DELETE_TOPIC_IN_NAMESRV, H.DeleteTopicFromNamesrvRequestHeader, mutates=True),
    CodeSpec(R.PUT_KV_CONFIG, H.KVConfigRequestHeader, mutates=True),
    CodeSpec(R.GET_KV_CONFIG, H.KVConfigRequestHeader),
    CodeSpec(R.DELETE_KV_CONFIG, H.KVConfigRequestHeader, mutates=True),
    CodeSpec(R.GET_KVLIST_BY_NAMESPACE, H.NamespaceRequestHeader),
    CodeSpec(R.GET_NAMESRV_CONFIG),
    CodeSpec(R.UPDATE_NAMESRV_CONFIG, None, "javaprops", mutates=True),
)
# A DLedger member: peers' messages (VOTE, HEART_BEAT, PUSH, LEADERSHIP_TRANSFER) change its
# state when they are well formed, and so does APPEND; METADATA, GET and PULL only read.
DLEDGER_CODES: tuple[CodeSpec, ...] = (
    CodeSpec(DL.METADATA),
    CodeSpec(DL.GET, None, "dledger-get"),
    CodeSpec(DL.PULL, None, "dledger-get"),
    CodeSpec(DL.VOTE, None, "dledger-vote", mutates=True),
    CodeSpec(DL.HEART_BEAT, None, "dledger-heartbeat", mutates=True),
    CodeSpec(DL.PUSH, None, "dledger-push", mutates=True),
    CodeSpec(DL.LEADERSHIP_TRANSFER, None, "dledger-transfer", mutates=True),
    CodeSpec(DL.APPEND, None, "message", mutates=True),
)
_TABLES = {BROKER: BROKER_CODES, NAMESRV: NAMESRV_CODES, DLEDGER: DLEDGER_CODES}
_KNOWN_CODES = frozenset(s.code for s in BROKER_CODES + NAMESRV_CODES + DLEDGER_CODES) | SERVER_REQUESTS


def code_specs(kind: str, *, unsafe: bool) -> tuple[CodeSpec, ...]:
    return tuple(s for s in _TABLES[kind] if unsafe or not s.mutates)


# -- cases --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Case:
    """One hostile input and what the server owes it (see the module docstring)."""

    seed: int
    number: int
    kind: str
    category: str
    code: int | None  # the request code, None for a framing case without one
    payload: bytes  # exactly what is written
    opaque: int | None  # the opaque the answer is waited for under (None: framing)
    opaques: frozenset[int]  # every opaque an answer to this case may carry
    answer: str  # DUE, OPTIONAL or NONE
    raw: bool  # a connection of its own, half-closed after the payload
    extra_wait: float  # seconds the server may legitimately hold the answer (long polls)
    note: str
    any_opaque: bool = False  # bits flipped at random: an answer may carry any opaque

    @property
    def replay(self) -> str:
        return f"{self.seed}:{self.number}"

    def describe(self) -> str:
        name = "-" if self.code is None else _code_name(self.code)
        return f"case {self.number} [{self.category}] {name}: {self.note} ({len(self.payload)} bytes)"


def _code_name(code: int) -> str:
    try:
        return f"{RequestCode(code).name}({code})"
    except ValueError:
        return f"code {code}"


def _rng(seed: int, number: int, kind: str, unsafe: bool) -> random.Random:
    return random.Random(f"rmq-fuzz/1:{seed}:{number}:{kind}:{int(unsafe)}")


def make_case(
    seed: int,
    number: int,
    kind: str,
    *,
    opaque: int,
    unsafe: bool = False,
    max_frame: int = DEFAULT_MAX_FRAME_SIZE,
    max_body: int = DEFAULT_MAX_BODY,
    category: str | None = None,
) -> Case:
    """Case ``number`` of run ``seed`` against a server of ``kind``; its request carries ``opaque``
    (framing cases with several requests use opaque, opaque + 1, ...)."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}")
    rng = _rng(seed, number, kind, unsafe)
    if category is None:
        category = rng.choices(CATEGORY_NAMES, weights=[w for _, w in CATEGORIES])[0]
    elif category not in CATEGORY_NAMES:
        raise ValueError(f"unknown category {category!r}")
    spec = rng.choice(code_specs(kind, unsafe=unsafe))
    gen = _Gen(rng, kind, spec, unsafe, opaque, max_frame, max_body)
    if category == "framing":
        payload, opaques, note = gen.framing()
        flipped = note.endswith("flipped bits")
        return Case(seed, number, kind, category, None, payload, None, opaques, NONE, True, 0.0, note, flipped)
    if category == "header":
        payload, note = gen.header_case()
        # a server that reads a broken or missing opaque as some number answers under it
        opaques = frozenset({opaque, 0, *gen.read_opaques})
        return Case(seed, number, kind, category, spec.code, payload, opaque, opaques, OPTIONAL, False, 0.0, note)
    req = gen.request(category)
    payload = req.encode(rng, opaque)
    answer, extra = req.expectation(kind)
    return Case(
        seed, number, kind, req.category, req.code, payload, opaque, frozenset({opaque}), answer, False, extra, req.note
    )


def probe(kind: str, opaque: int) -> bytes:
    """A request every RocketMQ server of ``kind`` answers at once: GET_MAX_OFFSET on a broker,
    GET_KV_CONFIG on a name server, METADATA on a DLedger member."""
    return _probe_request(kind).encode(None, opaque)


def _probe_request(kind: str) -> _Request:
    if kind == BROKER:
        return _Request(R.GET_MAX_OFFSET, {"topic": "TBW102", "queueId": "0"}, b"", "probe")
    if kind == DLEDGER:
        return _Request(DL.METADATA, {}, b"", "probe")
    return _Request(R.GET_KV_CONFIG, {"namespace": "rmq_fuzz", "key": "probe"}, b"", "probe")


def detect_request(opaque: int) -> bytes:
    """GET_ROUTEINFO_BY_TOPIC (opaque) and DLedger's METADATA (opaque + 1): a name server
    answers the first, a DLedger member only the second, a broker neither (both
    REQUEST_CODE_NOT_SUPPORTED)."""
    route = _Request(R.GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"}, b"", "detect").encode(None, opaque)
    return route + _probe_request(DLEDGER).encode(None, wrap_opaque(opaque + 1))


def kind_from_answer(code: int | None, metadata_code: int | None = None) -> str:
    """The kind from the answers to `detect_request`'s two requests."""
    if code != ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
        return NAMESRV
    return DLEDGER if metadata_code == ResponseCode.SUCCESS else BROKER


# A SYSTEM_ERROR remark naming an exception type: an unhandled error inside the server (ours
# writes "<Type>: <message>", Java "<java.class.Name>: ..."). Validation errors are not.
_EXCEPTION_REMARK = re.compile(r"^\s*(?:[a-z_][\w$]*\.)*[A-Z][\w$]*(?:Error|Exception)\b")
_VALIDATION_EXCEPTIONS = ("RemotingCommandException", "NumberFormatException", "HeaderError")


def internal_error(code: int, remark: str | None) -> bool:
    """Whether an answer looks like an unhandled server exception rather than a refusal."""
    if code != ResponseCode.SYSTEM_ERROR or not remark:
        return False
    return bool(_EXCEPTION_REMARK.match(remark)) and not any(v in remark[:200] for v in _VALIDATION_EXCEPTIONS)


# -- value pools ---------------------------------------------------------------------------------

_FIELD_CATEGORIES = ("wrong-type", "missing", "number", "string")

EXTREME_INTS = (
    -1, 0, 1, 127, 128, 255, 256, 32767, 32768, -32768, -32769, 65535, 65536,
    2**31 - 1, 2**31, -(2**31), -(2**31) - 1, 2**32, 2**32 - 1,
    2**53 + 1, 2**63 - 1, 2**63, -(2**63), -(2**63) - 1, 2**64, 10**20, -(10**20),
)  # fmt: skip
WRONG_TYPES = (
    "", " ", "abc", "1.5", "1e3", "0x10", "--1", "+1", " 7 ", "1_000", "\u0663", "\uff11\uff12", "NaN",
    "Infinity", "null", "true", "false", "[1]", "{}", "-", "9" * 30, "\x00", "1\x00", "yes", "TRUE ", "2",
)  # fmt: skip
HOSTILE_STRINGS = (
    "", " ", "\x00", "\n", "\r\n", "\t", "a\x00b", "\x01\x02", "\x7f", "ü" * 7, "\U0001f600", "\u202e",
    "../../../../etc/passwd", "..", "/", "%s%s%s%n", "${jndi:ldap://127.0.0.1:1/a}", "' OR 1=1 --", "<script>",
    "*", "||", "a || b ||", "TBW102", "SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC",
    "rmq_sys_wheel_timer", "%RETRY%rmq_fuzz_G", "%DLQ%rmq_fuzz_G", "DefaultCluster", "OFFSET_MOVED_EVENT",
    "BenchmarkTest", "SELF_TEST_TOPIC", "a b", "a,b", "a;b", "127.0.0.1:-1", "[::1]:0", "0.0.0.0:99999",
)  # fmt: skip
_LONG_STRING_SIZES = (128, 255, 256, 1000, 32768, 65536, 300_000)
_ODD_JSON = (
    b'{"a":' + b"9" * 5000 + b"}", b"[1e999999]", b"[NaN]", b'["\\ud800"]', b'{"a":"\\u00"}', b"\xff\xfe{}",
    b"\xc3\x28", b"{'a':1}", b"{a:1}", b"{1:2}", b'{{"topic":"t"}:1}', b"[" + b"1," * 200_000 + b"1]",
)  # fmt: skip
_OTHER_PROTOCOLS = (
    b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
    b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
    b"GET /ws HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
    b"\r\n\r\n",
    b"SSH-2.0-x\r\n",
)
_SURROGATES = ("\ud800", "a\udfffb", "\udbff\udbff")
RESERVED_PROPERTIES = (
    (P.DELAY, ("0", "1", "18", "19", "-1", "99999999999", "abc", "")),
    (P.TIMER_DELIVER_MS, ("-1", "0", "9" * 20, "abc", "1e3", str(2**63))),
    (P.TIMER_DELAY_SEC, ("-1", "0", "9" * 20, "x", "259201")),
    (P.TIMER_DELAY_MS, ("-1", "1", "9" * 20, "x")),
    (P.START_DELIVER_TIME, ("-1", "9" * 20, "x")),
    (P.TRAN_MSG, ("true", "false", "1", "x")),
    (P.PGROUP, ("", "rmq_fuzz_PG", "x" * 300)),
    (P.REAL_TOPIC, ("", "TBW102", "SCHEDULE_TOPIC_XXXX", "x" * 300)),
    (P.REAL_QID, ("-1", "99999", "x", "")),
    (P.RETRY_TOPIC, ("", "%RETRY%x", "SCHEDULE_TOPIC_XXXX")),
    (P.MAX_RECONSUME_TIMES, ("-1", "0", "x", str(2**31))),
    (P.RECONSUME_TIME, ("-1", "x")),
    (P.UNIQ_KEY, ("", "x", "0" * 1000, "ZZ")),
    (P.KEYS, (" ", " ".join(["k"] * 5000), "\x00")),
    (P.TAGS, ("", "*", "||", "a||b", "x" * 10000)),
    (P.WAIT, ("false", "x")),
    (P.CLUSTER, ("", "x")),
    (P.INSTANCE_ID, ("x",)),
    (P.SHARDING_KEY, ("", "x" * 1000)),
    (P.MSG_TYPE, ("x", "")),
    (P.INNER_MULTI_DISPATCH, ("a,b,c", ",", "")),
    (P.INNER_MULTI_QUEUE_OFFSET, ("x", "1,2", "")),
    (P.TRAN_PREPARED_QUEUE_OFFSET, ("-1", "x")),
    (P.TRANSACTION_CHECK_TIMES, ("-1", "x", str(2**31))),
    (P.CHECK_IMMUNITY_TIME_IN_SECONDS, ("-1", "x", "9" * 20)),
    (P.MIN_OFFSET, ("x",)),
    (P.MAX_OFFSET, ("x",)),
    (P.TRANSACTION_ID, ("", "x")),
)


def _json_header(
    code: Any,
    ext: Any,
    opaque: Any,
    *,
    flag: Any = 0,
    language: Any = "JAVA",
    version: Any = CURRENT_VERSION,
    remark: Any = None,
    ascii_only: bool = False,
    extra: dict[str, Any] | None = None,
    omit: tuple[str, ...] = (),
) -> bytes:
    obj: dict[str, Any] = {"code": code}
    if ext is not None:
        obj["extFields"] = ext
    obj.update(flag=flag, language=language, opaque=opaque)
    if remark is not None:
        obj["remark"] = remark
    obj.update(serializeTypeCurrentRPC="JSON", version=version)
    if extra:
        obj.update(extra)
    for key in omit:
        obj.pop(key, None)
    return json.dumps(obj, ensure_ascii=ascii_only, separators=(",", ":")).encode("utf-8", "surrogatepass")


def _frame(serialize_type: int, header: bytes, body: bytes = b"") -> bytes:
    """A frame with any serialize-type byte (encode_frame's word is signed: types below 128)."""
    return struct.pack(">iI", 4 + len(header) + len(body), (serialize_type << 24) | len(header)) + header + body


def _has_surrogates(text: str) -> bool:
    if text.isascii():
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


class _Request:
    """A request before serialization: code, extFields (all text), body."""

    def __init__(
        self, code: int, ext: dict[str, str], body: bytes, note: str, answer: str = DUE, category: str = "valid"
    ) -> None:
        self.category = category
        self.code = code
        self.ext = ext
        self.body = body
        self.note = note
        self.answer = answer

    def encode(self, rng: random.Random | None, opaque: int) -> bytes:
        """JSON or ROCKETMQ header (picked by ``rng``; JSON without one), always well-formed."""
        surrogates = any(_has_surrogates(k) or _has_surrogates(v) for k, v in self.ext.items())
        binary_ok = (
            -32768 <= self.code <= 32767
            and -(2**31) <= opaque < 2**31
            and not surrogates
            and all(len(k.encode("utf-8")) <= 32767 for k in self.ext)
        )
        language = "JAVA"
        if rng is not None:
            language = rng.choice(("JAVA", "JAVA", "CPP", "GO", "PYTHON", "OTHER", "DOTNET"))
            if binary_ok and rng.random() < 0.5:
                lang = {"JAVA": 0, "CPP": 1, "GO": 9, "PYTHON": 3, "OTHER": 7, "DOTNET": 2}[language]
                header = header_codec.encode_binary(self.code, lang, CURRENT_VERSION, opaque, 0, None, self.ext)
                return _frame(SerializeType.ROCKETMQ, header, self.body)
        ascii_only = surrogates or (rng is not None and rng.random() < 0.3)
        header = _json_header(self.code, self.ext or None, opaque, language=language, ascii_only=ascii_only)
        return _frame(SerializeType.JSON, header, self.body)

    def expectation(self, kind: str) -> tuple[str, float]:
        """(answer, extra wait): a pull that may park is owed an answer only when its
        suspend timeout is short; an unknown code on a name server never is."""
        if self.answer != DUE:
            return self.answer, 0.0
        if self.code == R.PULL_MESSAGE:
            flag = _lenient_int(self.ext.get("sysFlag", "0"))
            if flag is not None and flag & PULL_SUSPEND:
                suspend = _lenient_int(self.ext.get("suspendTimeoutMillis", "15000"))
                if suspend is None:
                    return DUE, 0.0  # the header is refused before anything parks
                if 0 <= suspend <= _MAX_WAITED_SUSPEND_MS:
                    return DUE, suspend / 1000 + _HOLD_SERVICE_PERIOD
                return OPTIONAL, 0.0
        return DUE, 0.0


def _lenient_int(text: str) -> int | None:
    """The value as the most lenient reader (Python's int) would take it."""
    try:
        return int(text)
    except ValueError:
        return None


class _Gen:
    def __init__(
        self,
        rng: random.Random,
        kind: str,
        spec: CodeSpec,
        unsafe: bool,
        opaque: int,
        max_frame: int,
        max_body: int,
    ) -> None:
        self.rng = rng
        self.kind = kind
        self.spec = spec
        self.unsafe = unsafe
        self.opaque = opaque
        self.max_frame = max_frame
        # a body must leave room for the header inside the frame limit
        self.max_body = max(0, min(max_body, max_frame - 64 * 1024))
        self.read_opaques: set[int] = set()  # what a lenient server may read a broken opaque as

    # -- plausible values ----------------------------------------------------------------

    def fields(self) -> list[tuple[str, str, str, bool]]:
        """(attr, wire, kind, required) of the code's header, with V2 keys where the code uses them."""
        if self.spec.header is None:
            return []
        out = []
        for attr, wire, kind, required in self.spec.header._fields():
            if self.spec.v2:
                wire = H.V1_TO_V2.get(wire, wire)
            out.append((attr, wire, kind, required))
        return out

    def plausible(self, attr: str, kind: str) -> str:
        rng = self.rng
        if kind == "bool":
            return rng.choice(("true", "false"))
        if kind == "int":
            if attr == "queue_id":
                return str(rng.randrange(4))
            if attr in ("sys_flag", "flag", "topic_sys_flag", "unit_mode", "commit_or_rollback"):
                if self.spec.code == R.PULL_MESSAGE and attr == "sys_flag":
                    return str(PULL_SUBSCRIPTION | rng.choice((0, PULL_SUSPEND)))
                return "0"
            if attr == "suspend_timeout_millis":
                return str(rng.choice((0, 100, 1000)))
            if attr.endswith("timestamp"):
                return str(1_700_000_000_000 + rng.randrange(10**9))
            if attr == "perm":
                return "6"
            if attr.endswith(("queue_nums", "max_num", "max_msg_nums")):
                return str(rng.randrange(1, 33))
            if attr == "body_crc32":
                return "0"
            return str(rng.randrange(0, 100))
        if attr == "properties":
            return P.encode_properties({P.TAGS: "t", P.KEYS: "k1 k2", P.UNIQ_KEY: "7F0000010001" + "0" * 20})
        if attr in ("subscription",):
            return rng.choice(("*", "a || b"))
        if attr == "expression_type":
            return "TAG"
        if attr == "topic_filter_type":
            return "SINGLE_TAG"
        if attr == "default_topic":
            return "TBW102"
        if "topic" in attr:
            return f"rmq_fuzz_T{rng.randrange(4)}"
        if "group" in attr:
            return f"rmq_fuzz_G{rng.randrange(4)}"
        if attr.endswith("addr"):
            return f"127.0.0.1:{rng.randrange(1, 65536)}"
        if attr in ("broker_name", "bname"):
            return f"rmq_fuzz_broker{rng.randrange(2)}"
        if attr in ("cluster_name", "cluster"):
            return "rmq_fuzz_cluster"
        if attr in ("msg_id", "origin_msg_id", "offset_msg_id", "transaction_id"):
            return "7F00000100002A9F0000000000000000"
        if attr == "namespace":
            return "rmq_fuzz"
        return f"rmq_fuzz_{attr}_{rng.randrange(4)}"

    def valid_ext(self) -> dict[str, str]:
        ext = {}
        for attr, wire, kind, required in self.fields():
            if required or self.rng.random() < 0.4:
                ext[wire] = self.plausible(attr, kind)
        if self.spec.code == R.PULL_MESSAGE and not self.unsafe:
            ext["sysFlag"] = str(int(ext.get("sysFlag", "0")) & ~PULL_COMMIT_OFFSET)
        return ext

    def valid_body(self) -> bytes:
        rng = self.rng
        shape = self.spec.body
        if shape == "message":
            return rng.randbytes(rng.randrange(0, 300))
        if shape == "batch":
            msgs = [Message("", rng.randbytes(rng.randrange(50)), 0, {P.TAGS: "t"}) for _ in range(rng.randrange(1, 4))]
            return encode_batch_body(msgs)
        if shape == "javaprops":
            return b"rmqFuzzUnknownKey=1\n"
        obj = self.valid_body_object()
        return b"" if obj is None else json.dumps(obj, separators=(",", ":")).encode()

    def valid_body_object(self) -> Any:
        shape = self.spec.body
        sub = {"topic": "rmq_fuzz_T0", "subString": "*", "tagsSet": [], "codeSet": [], "subVersion": 1,
               "expressionType": "TAG", "classFilterMode": False}  # fmt: skip
        if shape == "heartbeat":
            return {
                "clientID": "127.0.0.1@rmq_fuzz",
                "consumerDataSet": [
                    {
                        "groupName": "rmq_fuzz_G0",
                        "consumeType": "CONSUME_PASSIVELY",
                        "messageModel": "CLUSTERING",
                        "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                        "subscriptionDataSet": [sub],
                        "unitMode": False,
                    }
                ],
                "producerDataSet": [{"groupName": "rmq_fuzz_PG"}],
            }
        if shape == "clientconfig":
            return {"group": "rmq_fuzz_G0", "subscriptionData": sub}
        if shape == "lock":
            mq = {"topic": "rmq_fuzz_T0", "brokerName": "rmq_fuzz_broker0", "queueId": 0}
            return {"consumerGroup": "rmq_fuzz_G0", "clientId": "127.0.0.1@rmq_fuzz", "mqSet": [mq]}
        if shape == "register":
            tc = {"topicName": "rmq_fuzz_T0", "readQueueNums": 4, "writeQueueNums": 4, "perm": 6,
                  "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False}  # fmt: skip
            wrapper = {"dataVersion": {"counter": 1, "timestamp": 1_700_000_000_000},
                       "topicConfigTable": {"rmq_fuzz_T0": tc}}  # fmt: skip
            return {"topicConfigSerializeWrapper": wrapper, "filterServerList": []}
        if shape == "dataversion":
            return {"counter": 1, "timestamp": 1_700_000_000_000}
        if shape == "group":
            return {"groupName": "rmq_fuzz_G0", "consumeEnable": True, "consumeFromMinEnable": True,
                    "consumeBroadcastEnable": True, "retryQueueNums": 1, "retryMaxTimes": 16, "brokerId": 0,
                    "whichBrokerWhenConsumeSlowly": 1, "notifyConsumerIdsChangedEnable": True}  # fmt: skip
        if shape.startswith("dledger-"):
            return self.dledger_body(shape)
        return None

    def dledger_body(self, shape: str) -> Any:
        """A well-formed body from a sender that is no member (a member ignores its messages,
        whatever their term) in a group of its own, unless the mutation says otherwise."""
        rng = self.rng
        if shape == "dledger-get":
            return {"group": "rmq_fuzz", "remoteId": f"n{rng.randrange(3)}", "beginIndex": rng.randrange(-1, 100)}
        if shape == "dledger-transfer" and rng.random() < 0.5:  # a client's form: hand over to ...
            return {"group": "rmq_fuzz", "transfereeId": "rmq_fuzz_n9", "term": rng.randrange(1, 5)}
        base = ("rmq_fuzz", "rmq_fuzz_n9", f"n{rng.randrange(3)}", rng.randrange(0, 5))
        msg: DL.Message
        if shape == "dledger-vote":
            msg = DL.VoteRequest(*base, ledger_end_index=rng.randrange(-1, 100), ledger_end_term=rng.randrange(5))
        elif shape == "dledger-heartbeat":
            msg = DL.HeartBeatRequest(*base, leader_id="rmq_fuzz_n9", commit_index=rng.randrange(-1, 100))
        elif shape == "dledger-push":
            entries = tuple(DL.Entry(i, base[3], rng.randbytes(rng.randrange(40))) for i in range(rng.randrange(3)))
            msg = DL.PushEntryRequest(*base, leader_id="rmq_fuzz_n9", entries=entries)
        else:
            # (no member as transferee: a body whose "kind" a mutation drops reads as a client asking for that)
            msg = DL.LeadershipTransferRequest(*base, transfer_id="rmq_fuzz_n9", transferee_id="rmq_fuzz_n9")
        return json.loads(DL.encode_message(msg))

    # -- categories ------------------------------------------------------------------------

    def request(self, category: str) -> _Request:
        rng = self.rng
        spec = self.spec
        ext = self.valid_ext()
        body = self.valid_body()
        code = spec.code
        note = "well-formed"
        fields = self.fields()
        if not fields and category in _FIELD_CATEGORIES and spec.body.startswith("dledger-"):
            # DLedger's requests carry their fields in a JSON body: break those instead
            body, note = self.body_fields(category)
            return _Request(code, ext, body, note, spec.answer, category)
        typed = [f for f in fields if f[2] in ("int", "bool")]
        strs = [f for f in fields if f[2] == "str"]
        if category == "missing" and not any(f[3] for f in fields):
            category = "extra"
        if category == "properties" and not any(f[0] == "properties" for f in fields):
            category = "string"
        if category in ("wrong-type", "number") and not typed:
            category = "string"
        if category == "string" and not strs:
            category = "extra"

        if category == "wrong-type":
            picked = rng.sample(typed, rng.randrange(1, len(typed) + 1))
            for _, wire, _, _ in picked:
                ext[wire] = rng.choice(WRONG_TYPES)
            note = "text in " + ", ".join(w for _, w, _, _ in picked)
        elif category == "missing":
            required = [f for f in fields if f[3]]
            picked = required if rng.random() < 0.3 else rng.sample(required, rng.randrange(1, len(required) + 1))
            for _, wire, _, _ in picked:
                ext.pop(wire, None)
            note = "without " + ", ".join(w for _, w, _, _ in picked)
        elif category == "extra":
            ext, note = self.extra_fields(ext)
        elif category == "number":
            ints = [f for f in typed if f[2] == "int"] or typed
            picked = rng.sample(ints, rng.randrange(1, min(3, len(ints)) + 1))
            for _, wire, _, _ in picked:
                ext[wire] = self.extreme_int()
            note = "extreme " + ", ".join(f"{w}={ext[w][:24]}" for _, w, _, _ in picked)
        elif category == "string":
            picked = rng.sample(strs, rng.randrange(1, min(3, len(strs)) + 1))
            for _, wire, _, _ in picked:
                ext[wire] = self.hostile_string()
            note = "hostile " + ", ".join(f"{w}={ext[w][:24]!r}" for _, w, _, _ in picked)
        elif category == "properties":
            wire = "i" if spec.v2 else "properties"
            ext[wire], note = self.hostile_properties()
            if spec.body == "batch":
                body = self.hostile_batch_properties()
        elif category == "body":
            ext, body, note = self.hostile_body(ext, body)
        elif category == "unknown-code":
            code = self.unknown_code()
            note = f"unknown code {code}"
            if rng.random() < 0.5:
                ext["rmq_fuzz"] = "v"
            # a broker and a DLedger member answer REQUEST_CODE_NOT_SUPPORTED; a name server
            # (RocketMQ's) says nothing
            answer = DUE if self.kind != NAMESRV and -(2**31) <= code < 2**31 else OPTIONAL
            return _Request(code, ext, body, note, answer, category)
        return _Request(code, ext, body, note, spec.answer, category)

    def body_fields(self, category: str) -> tuple[bytes, str]:
        """A JSON body (a DLedger message) with fields broken as ``category`` breaks header
        fields: extreme numbers (past a Java long too), text for numbers, hostile strings,
        fields left out. Entries of a push count as fields too."""
        rng = self.rng
        obj = self.valid_body_object()
        slots = [(obj, k) for k in obj if k != "kind"]
        for entry in obj.get("batchEntry") or ([obj["entry"]] if "entry" in obj else []):
            slots += [(entry, k) for k in entry]
        ints = [(o, k) for o, k in slots if type(o[k]) is int]
        strs = [(o, k) for o, k in slots if type(o[k]) is str and k != "body"]
        pool = strs if category == "string" else slots if category == "missing" else ints
        picked = rng.sample(pool, rng.randrange(1, min(3, len(pool)) + 1))
        for o, k in picked:
            if category == "missing":
                del o[k]
            elif category == "number":
                o[k] = rng.choice(EXTREME_INTS) + rng.choice((0, 0, 1, -1))
            elif category == "wrong-type":
                o[k] = rng.choice((*WRONG_TYPES, *_WRONG_VALUES))  # text, or JSON of another type
            else:
                o[k] = self.hostile_string()
        what = "without" if category == "missing" else category
        note = f"body {what} " + ", ".join(k for _, k in picked)
        return json.dumps(obj, ensure_ascii=True).encode(), note

    def extreme_int(self) -> str:
        rng = self.rng
        r = rng.random()
        if r < 0.75:
            value = rng.choice(EXTREME_INTS)
            return str(value + rng.choice((0, 0, 0, -1, 1)))
        if r < 0.9:
            return rng.choice(("-", "")) + "9" * rng.choice((19, 20, 40, 400, 4000, 5000))
        return str(rng.randrange(-(2**70), 2**70))

    def hostile_string(self) -> str:
        rng = self.rng
        r = rng.random()
        if r < 0.6:
            return rng.choice(HOSTILE_STRINGS)
        if r < 0.8:
            return rng.choice(("a", "ü", "\x01", "%", "\\", '"')) * rng.choice(_LONG_STRING_SIZES)
        if r < 0.9:
            return rng.choice(_SURROGATES)
        return "".join(chr(rng.randrange(1, 0xD7FF)) for _ in range(rng.randrange(1, 64)))

    def extra_fields(self, ext: dict[str, str]) -> tuple[dict[str, str], str]:
        rng = self.rng
        r = rng.random()
        if r < 0.25:
            n = rng.choice((100, 1000, 5000))
            ext.update({f"rmq_fuzz_{i}": "v" for i in range(n)})
            return ext, f"{n} unknown fields"
        if r < 0.45:
            key = rng.choice(("", " ", "\x00", "ü", "a.b", "__proto__", "class", "@type", "k" * 40000))
            ext[key] = rng.choice(("v", "", "x" * 1000))
            return ext, f"odd key {key[:16]!r}"
        if r < 0.6 and self.spec.header is not None:
            # the header's own names in the other dialect, or in another case
            for _, wire, _, _ in self.fields():
                other = H.V2_TO_V1.get(wire) or H.V1_TO_V2.get(wire) or wire.upper()
                ext[other] = self.hostile_string()[:64]
            return ext, "fields under other names"
        if r < 0.75:
            ext["rmq_fuzz_value"] = "x" * rng.choice((65536, 1 << 20))
            return ext, "one huge unknown field"
        ext.update({"rmq_fuzz": "1", "serializeTypeCurrentRPC": "ROCKETMQ", "code": "0", "opaque": "-1"})
        return ext, "fields named like the command's own"

    def hostile_properties(self) -> tuple[str, str]:
        rng = self.rng
        r = rng.random()
        if r < 0.3:
            text = rng.choice(
                ("", "\x01", "\x02", "\x01\x02" * 1000, "a\x01", "\x01b", "a\x01b\x01c", "a\x02\x02\x02b\x01c",
                 "\x02" * 10000, "a" * 40000, "TAGS\x01" + "t" * 33000, "\x00\x01\x00")
            )  # fmt: skip
            return text, f"properties {text[:20]!r} ({len(text)} chars)"
        picked = rng.sample(RESERVED_PROPERTIES, rng.randrange(1, 5))
        props = {P.UNIQ_KEY: "7F0000010001" + "0" * 20}
        for key, values in picked:
            props[key] = rng.choice(values)
        text = P.encode_properties(props)
        if rng.random() < 0.2:
            text += "\x02"
        return text, "reserved " + ", ".join(f"{k}={props[k][:16]!r}" for k, _ in picked)

    def hostile_batch_properties(self) -> bytes:
        text, _ = self.hostile_properties()
        raw = text.encode("utf-8", "surrogatepass")[:32767]
        head = struct.pack(">iiiii", 20 + 3 + 2 + len(raw), 0, 0, 0, 3)
        return head + b"abc" + struct.pack(">h", len(raw)) + raw

    def unknown_code(self) -> int:
        rng = self.rng
        other = NAMESRV_CODES if self.kind == BROKER else BROKER_CODES
        r = rng.random()
        if r < 0.2:
            return rng.choice(other).code
        if r < 0.35:
            return rng.choice((0, -1, 32767, -32768, 2**31 - 1, -(2**31), 2**31, 2**40, -(2**63)))
        while True:
            code = rng.randrange(-32768, 32768)
            if code not in _KNOWN_CODES:
                return code

    def hostile_body(self, ext: dict[str, str], body: bytes) -> tuple[dict[str, str], bytes, str]:
        rng = self.rng
        shape = self.spec.body
        r = rng.random()
        if r < 0.08 and self.max_body:
            size = min(self.max_body, rng.choice((64 * 1024, 1 << 20, 4 * 1024 * 1024 + 1)))
            return ext, bytes([rng.randrange(256)]) * size, f"{size}-byte body"
        if r < 0.2:
            data = rng.randbytes(rng.randrange(1, 4096))
            return ext, data, f"{len(data)} random bytes"
        if r < 0.28:
            return ext, b"", "empty body"
        if r < 0.38:
            depth = rng.choice((65, 1000, 100_000))
            opener = rng.choice((b"[", b'{"a":', b"{1:", b'{{"topic":'))
            data = opener * depth
            return ext, data, f"{depth}-deep {opener.decode()!r} nesting"
        if r < 0.45:
            return ext, body[: rng.randrange(len(body) + 1)], "truncated body"
        if r < 0.5:
            return ext, body + rng.choice((b"}", b"garbage", b"\x00", b",")), "body with trailing bytes"
        if r < 0.56:
            text = rng.choice(_ODD_JSON)
            return ext, text, f"odd JSON {text[:24]!r}"
        if shape in ("message", "batch") and r < 0.66:
            blob = rng.choice((_zlib_bomb(), rng.randbytes(200), zlib.compress(b"x" * 100)[:-3]))
            sys_key = "f" if self.spec.v2 else "sysFlag"
            ext[sys_key] = str(COMPRESSED_FLAG | rng.choice((0, 0x100, 0x200, 0x300, 0x400, 0x700)))
            if shape == "batch":
                blob = struct.pack(">iiiii", 20 + len(blob) + 2, 0, 0, 0, len(blob)) + blob + b"\x00\x00"
            return ext, blob, f"compressed flag {ext[sys_key]} with a {len(blob)}-byte stream"
        if shape == "batch" and r < 0.8:
            n = rng.choice((-1, -(2**31), 2**31 - 1, 100_000, 0))
            head = struct.pack(">iiiii", n, 0, 0, 0, rng.choice((n, 5, -1)))
            return ext, head + rng.randbytes(rng.randrange(10)), f"batch item lengths {n}"
        if shape == "register" and r < 0.8:
            ext["compressed"] = "true"
            blob = rng.choice((_zlib_bomb(), rng.randbytes(100), b"\x00\x00\x00\x05"))
            return ext, blob, f"compressed register body of {len(blob)} bytes"
        if shape == "javaprops":
            text = rng.choice(
                (b"\\u", b"a=\\uZZZZ", b"\\\n" * 10000, b"=\n" * 50000, b"\xff\xfe", b"a" * 100000 + b"=b",
                 b"listenPort=-1\n", b"brokerPermission=abc\n", b"flushDiskType=X\n", b"\x00=\x00\n")
            )  # fmt: skip
            return ext, text, f"properties text {text[:24]!r}"
        obj = self.valid_body_object()
        if obj is not None:
            mutated = _mutate_json(rng, obj)
            data = json.dumps(mutated, separators=(",", ":"), ensure_ascii=True).encode()
            return ext, data, f"JSON body with wrong values ({len(data)} bytes)"
        data = rng.randbytes(rng.randrange(1, 512))
        return ext, data, f"{len(data)}-byte body on a code without one"

    # -- whole-command and framing cases -------------------------------------------------------

    def header_case(self) -> tuple[bytes, str]:
        rng = self.rng
        code, ext, opaque = self.spec.code, self.valid_ext() or None, self.opaque
        r = rng.randrange(14)
        bad: Any
        if r == 0:
            bad = rng.choice(("ten", "10", 10.5, None, [], {}, True, 2**70, -(2**70), "", "0x0A"))
            return _frame(0, _json_header(bad, ext, opaque)), f"code {bad!r}"
        if r == 1:
            bad = rng.choice(("x", -1, 2**40, RPC_TYPE, RPC_ONEWAY, RPC_TYPE | RPC_ONEWAY, 0xFF, None, 1.5, []))
            return _frame(0, _json_header(code, ext, opaque, flag=bad)), f"flag {bad!r}"
        if r == 2:
            bad = rng.choice((999, -1, "KLINGON", "", None, [], {}, 1.5, "java", 2**40))
            return _frame(0, _json_header(code, ext, opaque, language=bad)), f"language {bad!r}"
        if r == 3:
            bad = rng.choice(("x", -1, 2**40, None, 1.5, [], "409"))
            return _frame(0, _json_header(code, ext, opaque, version=bad)), f"version {bad!r}"
        if r == 4:
            bad = rng.choice(("x", 1.5, 2**70, None, [], "7", -(2**63)))
            self.read_opaques = {1, 7, 2**70, -(2**63)}
            return _frame(0, _json_header(code, ext, bad)), f"opaque {bad!r}"
        if r == 5:
            bad = rng.choice((123, {}, [], True, "x" * 100_000, "\ud800", "\x00"))
            header = _json_header(code, ext, opaque, remark=bad, ascii_only=True)
            return _frame(0, header), f"remark {str(bad)[:16]!r}"
        if r == 6:
            bad = rng.choice(
                ([], "str", 1, {"a": {"b": [1, 2]}}, {"a": None}, {"a": 1.5, "b": True, "c": 2**70},
                 _nest(rng.choice((10, 500, 5000))), {"": ""})
            )  # fmt: skip
            try:
                header = _json_header(code, bad, opaque)
                note = f"extFields {json.dumps(bad)[:24]!r}"
            except RecursionError:
                header = b'{"code":%d,"extFields":{"a":%s}}' % (code, b"[" * 5000 + b"]" * 5000)
                note = "extFields nested 5000 deep"
            return _frame(0, header), note
        if r == 7:
            stype = rng.choice((2, 3, 0x7F, 0xFF))
            header = _json_header(code, ext, opaque)
            return _frame(stype, header), f"serialize type {stype}"
        if r == 8:
            text = rng.choice(
                (b"", b" ", b"[]", b"1", b'"s"', b"null", b"{}", b'{"code":10}}}', b"\xef\xbb\xbf{}",
                 b'{"code":10,"code":"x"}', b"{\"code\":10,\"opaque\":1\x00}", b"\xff" * 10, b"{" * 5000)
            )  # fmt: skip
            return _frame(0, text), f"JSON header {text[:20]!r}"
        if r == 9:
            flag = rng.choice((RPC_ONEWAY, RPC_TYPE))
            return _frame(0, _json_header(code, ext, opaque, flag=flag)), f"flag {flag} on a valid request"
        if r == 10:
            return self.binary_header(), "malformed binary header"
        if r == 11:
            extra: dict[str, Any] = {
                rng.choice(("serializeTypeCurrentRPC", "extFields", "rmq_fuzz", "body")): rng.choice(
                    ("XML", 1, None, [])
                )
            }
            return _frame(0, _json_header(code, ext, opaque, extra=extra)), f"header field {extra!r}"
        if r == 12:
            omit = tuple(rng.sample(("code", "flag", "language", "opaque", "version", "serializeTypeCurrentRPC"), 2))
            return _frame(0, _json_header(code, ext, opaque, omit=omit)), f"header without {omit}"
        # a valid header whose length word says a different serialization
        header = _json_header(code, ext, opaque)
        return struct.pack(">ii", 4 + len(header), (1 << 24) | len(header)) + header, "JSON header marked ROCKETMQ"

    def binary_header(self) -> bytes:
        rng = self.rng
        code = (self.spec.code + 32768) % 65536 - 32768  # a short, as Java writes it (DLedger's codes wrap)
        prefix = header_codec.BINARY_PREFIX.pack(code, rng.choice((0, 255, 13)), 409, self.opaque, 0)
        r = rng.randrange(6)
        if r == 0:
            body = struct.pack(">i", rng.choice((-1, 2**31 - 1, 1000))) + b"ab" + struct.pack(">i", 0)
        elif r == 1:
            body = struct.pack(">i", 0) + struct.pack(">i", rng.choice((-1, 2**31 - 1, 3, 7)))
        elif r == 2:
            body = struct.pack(">i", 2) + b"\xff\xfe" + struct.pack(">i", 0)
        elif r == 3:
            block = struct.pack(">h", rng.choice((-1, 32767, 5))) + b"key" + struct.pack(">i", -1)
            body = struct.pack(">i", 0) + struct.pack(">i", len(block)) + block
        elif r == 4:
            block = struct.pack(">h", 1) + b"k" + struct.pack(">i", 2) + b"\xc3\x28"
            body = struct.pack(">i", 0) + struct.pack(">i", len(block)) + block
        else:
            body = rng.randbytes(rng.randrange(0, 16))
        return _frame(SerializeType.ROCKETMQ, prefix + body)

    def framing(self) -> tuple[bytes, frozenset[int], str]:
        rng = self.rng
        opaque = self.opaque
        valid = _Request(self.spec.code, self.valid_ext(), self.valid_body(), "")
        frame = valid.encode(rng, opaque)
        r = rng.randrange(12)
        if r == 0:
            n = rng.choice((-1, -(2**31), 0, 1, 2, 3))
            return struct.pack(">i", n) + frame[4:], frozenset(), f"length {n}"
        if r == 1:
            n = rng.choice((self.max_frame - 3, self.max_frame + 1, 2**31 - 1, 2**30))
            tail = rng.randbytes(rng.randrange(0, 4096))
            return struct.pack(">i", n) + tail, frozenset(), f"length {n} beyond the frame limit"
        if r == 2:
            cut = rng.randrange(1, len(frame))
            return frame[:cut], frozenset(), f"frame cut at {cut} of {len(frame)}"
        if r == 3:
            data = rng.randbytes(rng.randrange(1, 4096))
            return data, frozenset(), f"{len(data)} random bytes"
        if r == 4:
            hello = b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + rng.randbytes(rng.randrange(0, 300))
            return hello, frozenset(), "a TLS ClientHello"
        if r == 5:
            text = rng.choice(_OTHER_PROTOCOLS)
            return text, frozenset(), f"text {text[:16]!r}"
        if r == 6:
            # a header-length word larger than the frame
            hlen = rng.choice((len(frame), 0xFFFFFF, len(frame) - 7))
            return struct.pack(">ii", 8, hlen) + b"\x00" * 4, frozenset(), f"header length {hlen} in an 8-byte frame"
        if r == 7:
            garbage = rng.randbytes(rng.randrange(1, 64))
            return frame + garbage, frozenset({opaque}), "a request, then garbage"
        if r == 8:
            n = rng.randrange(2, 64)
            frames = [_probe_request(self.kind).encode(rng, wrap_opaque(opaque + i)) for i in range(n)]
            opaques = frozenset(wrap_opaque(opaque + i) for i in range(n))
            return b"".join(frames) + frames[0][:5], opaques, f"{n} pipelined requests, then a cut frame"
        if r == 9:
            return b"\x00" * rng.choice((4, 8, 100, 4096)), frozenset(), "zero bytes"
        if r == 10:
            # frames of length 4: an empty JSON header, over and over
            n = rng.choice((10, 1000, 20000))
            return b"\x00\x00\x00\x04\x00\x00\x00\x00" * n, frozenset(), f"{n} empty frames"
        # a bit-flipped valid request
        buf = bytearray(frame)
        for _ in range(rng.randrange(1, 6)):
            buf[rng.randrange(len(buf))] ^= 1 << rng.randrange(8)
        return bytes(buf), frozenset({opaque}), "a request with flipped bits"


@functools.cache
def _zlib_bomb() -> bytes:
    """64 MiB of zeros in about 64 KiB of zlib."""
    return zlib.compress(b"\x00" * (64 << 20), 9)


def wrap_opaque(n: int) -> int:
    """As a Java int: opaques wrap around."""
    n &= 0xFFFFFFFF
    return n - (1 << 32) if n & 0x80000000 else n


def _nest(depth: int) -> dict[str, Any]:
    obj: Any = 1
    for _ in range(depth):
        obj = {"a": obj}
    return obj  # type: ignore[no-any-return]


_WRONG_VALUES: tuple[Any, ...] = (None, "", "x", -1, 2**63, 1e308, True, [], {}, [[[]]], {"a": None}, "\ud800", 0.5)


def _mutate_json(rng: random.Random, obj: Any) -> Any:
    """``obj`` with one to three values (or containers) replaced by ones of the wrong type."""
    import copy

    obj = copy.deepcopy(obj)
    for _ in range(rng.randrange(1, 4)):
        parent, key = _pick_slot(rng, obj)
        if parent is None:
            return copy.deepcopy(rng.choice(_WRONG_VALUES))
        if rng.random() < 0.15 and isinstance(parent, dict):
            del parent[key]
        else:
            parent[key] = copy.deepcopy(rng.choice(_WRONG_VALUES))
    return obj


def _pick_slot(rng: random.Random, obj: Any) -> tuple[Any, Any]:
    slots: list[tuple[Any, Any]] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                slots.append((node, k))
                walk(v)
        elif isinstance(node, list):
            for i, v in enumerate(node):
                slots.append((node, i))
                walk(v)

    walk(obj)
    return rng.choice(slots) if slots else (None, None)
