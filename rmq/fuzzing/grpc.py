"""Hostile gRPC over HTTP/2 for `rmq fuzz --grpc`: the cases and a lenient reader of the
server's answers; no I/O.

A case is a pure function of (seed, case number, the methods table, unsafe): ``make_case``
builds the same steps again, which ``rmq fuzz --grpc ... --replay SEED:CASE`` relies on. The
methods table (one ``GrpcMethod`` per path: its kind and valid serialized requests) comes
from the caller, who knows the service's protobuf classes; mutations here work on the
protobuf wire format and need no schema. Each case runs on a connection of its own and
breaks one thing (its category):

    valid           a well-formed call of a method
    protobuf        the request message broken at the wire level: flipped, truncated or
                    appended bytes, wrong wire types, overlong varints, lengths past the end,
                    deep group nesting, invalid UTF-8, floods of unknown fields, random bytes
    unknown-method  paths the server does not serve: other services, odd and huge names
    prefix          the 5-byte message prefix: compressed flag (with and without
                    grpc-encoding), flags other than 0 and 1, truncated, lengths above or
                    below the data, no message or two for a unary method
    oversized       a declared length beyond the server's limit (and, --unsafe, a real body
                    just above maxMessageSize)
    headers         request headers: no :path, wrong :method or content-type, invalid UTF-8,
                    huge or many headers, bad grpc-timeout values
    streams         calls opened and abandoned (no message, half a message), many calls and
                    the client never reads, a call reset by the client beside one answered,
                    a zero flow-control window with a deadline
    preface         garbage, HTTP/1.1 or a TLS hello instead of the HTTP/2 preface
    frames          malformed HTTP/2 frames: sizes, stream 0, padding, SETTINGS values, PINGs,
                    CONTINUATION out of place, unknown frame types, HPACK errors

What the server owes a case: each stream in ``owed`` a complete answer (final headers with
grpc-status, or RST_STREAM), unless ``may_close`` and it closed the connection instead; with
``must_close``, to close the connection (it may send a GOAWAY first). Then a fresh
connection's QueryRoute (``probe``) must still be answered.

Without --unsafe only methods the table marks safe are called: against a production proxy,
leave it off.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field

import hpack

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DEFAULT_MAX_MESSAGE = 4 * 1024 * 1024  # the proxy's maxMessageSize

# frame types and flags (RFC 9113)
DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = range(10)
END_STREAM, ACK, END_HEADERS, PADDED, PRIORITY_FLAG = 0x1, 0x1, 0x4, 0x8, 0x20
MAX_FRAME = 16384  # what a server accepts until its SETTINGS say more

CATEGORIES: tuple[tuple[str, int], ...] = (
    ("valid", 6),
    ("protobuf", 18),
    ("unknown-method", 7),
    ("prefix", 12),
    ("oversized", 5),
    ("headers", 12),
    ("streams", 8),
    ("preface", 6),
    ("frames", 12),
)
CATEGORY_NAMES = tuple(name for name, _ in CATEGORIES)
PAUSE = 1.0  # seconds an abandoned call or an unread connection is held before the client closes


@dataclass(frozen=True, slots=True)
class GrpcMethod:
    path: str  # "/apache.rocketmq.v2.MessagingService/QueryRoute"
    kind: str  # unary, server_stream or bidi
    requests: tuple[bytes, ...]  # valid serialized requests (at least one)
    safe: bool  # calling it leaves the server's state alone


@dataclass(frozen=True, slots=True)
class Send:
    """Bytes as they are (the preface, frames, garbage)."""

    data: bytes


@dataclass(frozen=True, slots=True)
class Data:
    """DATA frames on a stream, cut as the server's frame size and windows allow."""

    stream_id: int
    data: bytes
    end_stream: bool = True


@dataclass(frozen=True, slots=True)
class Pause:
    """Keep the connection open, sending nothing, this many seconds."""

    seconds: float


Step = Send | Data | Pause


@dataclass(frozen=True, slots=True)
class GrpcCase:
    seed: int
    number: int
    category: str
    detail: str  # what was broken, for the report
    path: str  # the method called ("" for cases that call none)
    steps: tuple[Step, ...]
    owed: frozenset[int] = frozenset()  # streams owed a complete answer
    may_close: bool = False  # closing the connection also pays what is owed
    must_close: bool = False  # the server must close the connection
    reads: bool = True  # False: the client does not read until it closes
    eof: bool = False  # half-close (TCP FIN) after the steps

    @property
    def replay(self) -> str:
        return f"{self.seed}:{self.number}"

    def describe(self) -> str:
        method = f" {self.path.rsplit('/', 1)[-1]}" if self.path else ""
        return f"case {self.number} [{self.category}]{method}: {self.detail}"


# -- framing ------------------------------------------------------------------------------------


def frame(kind: int, flags: int, stream_id: int, payload: bytes = b"", length: int | None = None) -> bytes:
    """One HTTP/2 frame; `length` other than the payload's makes a lying header."""
    size = len(payload) if length is None else length
    return struct.pack(">I", size)[1:] + bytes((kind, flags)) + struct.pack(">I", stream_id & 0x7FFFFFFF) + payload


def settings(*pairs: tuple[int, int], ack: bool = False) -> bytes:
    return frame(SETTINGS, ACK if ack else 0, 0, b"".join(struct.pack(">HI", k, v) for k, v in pairs))


def message(body: bytes, flag: int = 0, length: int | None = None) -> bytes:
    """A gRPC length-prefixed message."""
    return struct.pack(">BI", flag, len(body) if length is None else length) + body


def request_headers(path: str, client_id: str, extra: Mapping[str, str] | None = None) -> list[tuple[bytes, bytes]]:
    headers = [
        (b":method", b"POST"),
        (b":scheme", b"http"),
        (b":path", path.encode()),
        (b":authority", b"rmq-fuzz"),
        (b"content-type", b"application/grpc"),
        (b"te", b"trailers"),
        (b"grpc-timeout", b"5S"),
        (b"x-mq-client-id", client_id.encode()),
        (b"x-mq-language", b"PYTHON"),
        (b"x-mq-client-version", b"rmq-fuzz"),
    ]
    headers += [(k.encode(), v.encode()) for k, v in (extra or {}).items()]
    return headers


def headers_frames(
    encoder: hpack.Encoder, stream_id: int, headers: list[tuple[bytes, bytes]], end_stream: bool = False
) -> bytes:
    """HEADERS (and CONTINUATION frames when the block is bigger than a frame)."""
    block = encoder.encode(headers, huffman=False)  # hpack's Huffman coder takes seconds on 200 KB
    chunks = [block[i : i + MAX_FRAME] for i in range(0, len(block), MAX_FRAME)] or [b""]
    out = frame(
        HEADERS, (END_STREAM if end_stream else 0) | (END_HEADERS if len(chunks) == 1 else 0), stream_id, chunks[0]
    )
    for i, chunk in enumerate(chunks[1:], 2):
        out += frame(CONTINUATION, END_HEADERS if i == len(chunks) else 0, stream_id, chunk)
    return out


def opening() -> bytes:
    """The client's preface and SETTINGS (no server push)."""
    return PREFACE + settings((2, 0))


def call_steps(
    path: str, body: bytes, client_id: str, *, encoder: hpack.Encoder | None = None, stream_id: int = 1
) -> list[Step]:
    """A whole call: HEADERS, then the message in DATA with END_STREAM."""
    encoder = encoder or hpack.Encoder()
    return [Send(headers_frames(encoder, stream_id, request_headers(path, client_id))), Data(stream_id, message(body))]


def probe(path: str, body: bytes) -> tuple[Step, ...]:
    """A valid unary call on a fresh connection: owed an answer on stream 1."""
    return (Send(opening()), *call_steps(path, body, "rmq-fuzz-probe"))


# -- protobuf wire mutations ------------------------------------------------------------------------


def varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _tag(field_no: int, wire_type: int) -> bytes:
    return varint((field_no << 3) | wire_type)


def _fields(data: bytes) -> list[tuple[int, int, int]] | None:
    """(start, end, wire type) of each top-level field, None when it does not parse."""
    out, pos = [], 0
    while pos < len(data):
        start = pos
        key, pos = _read_varint(data, pos)
        if key is None:
            return None
        wire = key & 7
        if wire == 0:
            _, pos = _read_varint(data, pos)
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        elif wire == 2:
            size, pos = _read_varint(data, pos)
            if size is None:
                return None
            pos += size
        else:
            return None
        if pos > len(data):
            return None
        out.append((start, pos, wire))
    return out


def _read_varint(data: bytes, pos: int) -> tuple[int | None, int]:
    value = shift = 0
    while pos < len(data) and shift < 70:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
    return None, pos


def mutate(rng: random.Random, body: bytes) -> tuple[str, bytes]:
    """One wire-level break of a serialized message: (what, the bytes)."""
    choice = rng.randrange(16)
    fields = _fields(body) or []
    if choice == 0 and body:
        out = bytearray(body)
        for _ in range(rng.randint(1, 8)):
            out[rng.randrange(len(out))] = rng.randrange(256)
        return "bytes flipped", bytes(out)
    if choice == 1 and body:
        return "truncated", body[: rng.randrange(len(body))]
    if choice == 2:
        return "junk appended", body + rng.randbytes(rng.randint(1, 64))
    if choice == 3:
        wire = rng.choice((0, 1, 2, 3, 4, 5, 6, 7))
        return f"unknown field of wire type {wire}", body + _tag(rng.randint(1000, 536870911), wire) + b"\x05abcde"
    if choice == 4 and fields:
        start, end, wire = rng.choice(fields)
        key, pos = _read_varint(body, start)
        assert key is not None
        other = rng.choice([w for w in (0, 1, 2, 5) if w != wire])
        return f"a field's wire type {wire} → {other}", body[:start] + varint((key & ~7) | other) + body[pos:]
    if choice == 5:
        over = b"\xff" * rng.randint(10, 12) + b"\x01"
        return "an overlong varint", _tag(rng.randint(1, 20), 0) + over + body
    if choice == 6:
        size = rng.choice((len(body) + 1, 2**31 - 1, 2**31, 2**32, 2**63 - 1, 2**64 - 1))
        return f"a length of {size} past the end", body + _tag(rng.randint(1, 20), 2) + varint(size) + b"ab"
    if choice == 7:
        depth = rng.choice((200, 5000, 50_000))
        return f"groups nested {depth} deep", body + _tag(99, 3) * depth + _tag(99, 4) * depth
    if choice == 8 and fields:
        nests = [f for f in fields if f[2] == 2]
        if nests:  # the field's inner message nested into itself
            start, end, _ = rng.choice(nests)
            key, pos = _read_varint(body, start)
            length, inner = _read_varint(body, pos)
            assert key is not None and length is not None
            payload = body[inner:end]
            for _ in range(rng.choice((120, 1000))):
                payload = _tag(key >> 3, 2) + varint(len(payload)) + payload
            return "a message field nested into itself", body[:start] + payload + body[end:]
    if choice == 9:
        bad = rng.choice((b"\xff\xfe", b"\xc0\x80", b"\xed\xa0\x80", b"a\x80b", b"\xf4\x90\x80\x80"))
        field_no = rng.choice((1, 2, 3, 4, 5, 6))
        return "invalid UTF-8 in a length-delimited field", body + _tag(field_no, 2) + varint(len(bad)) + bad
    if choice == 10:
        return "an unknown-field flood", body + (_tag(rng.randint(100, 200), 0) + b"\x01") * rng.choice(
            (10_000, 100_000)
        )
    if choice == 11:
        return "a huge varint in every small field", body + b"".join(_tag(n, 0) + varint(-1) for n in range(1, 16))
    if choice == 12:
        return "random bytes", rng.randbytes(rng.choice((1, 7, 64, 1000, 4096)))
    if choice == 13:
        return "an empty message", b""
    if choice == 14 and fields:
        start, end, _ = rng.choice(fields)
        return "a field repeated 1000 times", body + body[start:end] * 1000
    return "a zero field number", body + b"\x00\x01" + b"\x02\x00"


# -- the cases --------------------------------------------------------------------------------------


@dataclass
class _Gen:
    rng: random.Random
    methods: Mapping[str, GrpcMethod]
    unsafe: bool
    max_message: int
    client_id: str
    encoder: hpack.Encoder = field(default_factory=hpack.Encoder)

    def method(self, *, unary: bool = False) -> GrpcMethod:
        pool = [m for m in self.methods.values() if (self.unsafe or m.safe) and (not unary or m.kind == "unary")]
        if not pool:
            pool = [m for m in self.methods.values() if m.safe]
        return self.rng.choice(sorted(pool, key=lambda m: m.path))

    def body(self, method: GrpcMethod) -> bytes:
        return self.rng.choice(method.requests)

    def head(
        self, path: str, stream_id: int = 1, end_stream: bool = False, extra: Mapping[str, str] | None = None
    ) -> Send:
        headers = request_headers(path, self.client_id, extra)
        return Send(headers_frames(self.encoder, stream_id, headers, end_stream))

    def call(self, method: GrpcMethod, body: bytes, stream_id: int = 1) -> list[Step]:
        return [self.head(method.path, stream_id), Data(stream_id, message(body))]


def make_case(
    seed: int,
    number: int,
    methods: Mapping[str, GrpcMethod],
    *,
    unsafe: bool = False,
    max_message: int = DEFAULT_MAX_MESSAGE,
    category: str | None = None,
) -> GrpcCase:
    """Case `number` of the run `seed` (the same inputs give the same case)."""
    rng = random.Random(f"grpc:{seed}:{number}:{unsafe}:{category}")
    if category is None:
        names, weights = zip(*CATEGORIES, strict=True)
        category = rng.choices(names, weights)[0]
    g = _Gen(rng, methods, unsafe, max_message, f"rmq-fuzz-{seed}-{number}")
    detail, path, steps, extra = _BUILDERS[category](g)
    if category != "preface":  # those replace the opening
        steps = [Send(opening()), *steps]
    return GrpcCase(seed, number, category, detail, path, tuple(steps), **extra)  # type: ignore[arg-type]


Built = tuple[str, str, list[Step], dict[str, object]]
DUE: dict[str, object] = {"owed": frozenset({1})}
DUE_OR_CLOSE: dict[str, object] = {"owed": frozenset({1}), "may_close": True}
CLOSE: dict[str, object] = {"must_close": True}


def _valid(g: _Gen) -> Built:
    m = g.method()
    return "a well-formed call", m.path, g.call(m, g.body(m)), DUE


def _protobuf(g: _Gen) -> Built:
    m = g.method()
    what, body = mutate(g.rng, g.body(m))
    return what, m.path, g.call(m, body), DUE


def _unknown_method(g: _Gen) -> Built:
    m = g.method()
    service = m.path.rsplit("/", 1)[0]
    path = g.rng.choice(
        (
            f"{service}/NoSuchMethod",
            "/grpc.health.v1.Health/Check",
            "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
            f"{service}/{'A' * 10_000}",
            f"{service}/",
            "/",
            f"{m.path}/extra",
            f"{m.path}?x=1",
            f"{service}/%00%ff",
            f"{service}/\u00e9t\u00e9",
            m.path.lower(),
        )
    )
    return f"path {path[:60]!r}", m.path, [g.head(path), Data(1, message(g.body(m)))], DUE


def _prefix(g: _Gen) -> Built:
    m = g.method(unary=True)
    body = g.body(m)
    choice = g.rng.randrange(8)
    if choice == 0:
        return "compressed flag without grpc-encoding", m.path, [g.head(m.path), Data(1, message(body, 1))], DUE
    if choice == 1:
        steps: list[Step] = [g.head(m.path, extra={"grpc-encoding": "gzip"}), Data(1, message(body, 1))]
        return "compressed flag with grpc-encoding gzip", m.path, steps, DUE
    if choice == 2:
        flag = g.rng.randint(2, 255)
        return f"prefix flag {flag}", m.path, [g.head(m.path), Data(1, message(body, flag))], DUE
    if choice == 3:
        cut = g.rng.randint(1, 4)
        return f"a prefix of {cut} bytes", m.path, [g.head(m.path), Data(1, message(body)[:cut])], DUE
    if choice == 4:
        more = len(body) + g.rng.choice((1, 100, 65_536))
        return f"length {more} above the data", m.path, [g.head(m.path), Data(1, message(body, 0, more))], DUE
    if choice == 5:
        data = message(body, 0, max(0, len(body) - 1)) + b"\x00\x00"
        return "length below the data, junk after", m.path, [g.head(m.path), Data(1, data)], DUE
    if choice == 6:
        return "no message", m.path, [g.head(m.path, end_stream=True)], DUE
    return "two messages for a unary method", m.path, [g.head(m.path), Data(1, message(body) + message(body))], DUE


def _oversized(g: _Gen) -> Built:
    m = g.method(unary=True)
    body = g.body(m)
    if g.unsafe and g.rng.random() < 0.3:
        big = body + b"\x9a\x06" + varint(g.max_message + 1) + bytes(g.max_message + 1)  # field 99
        return f"a {len(big)}-byte message", m.path, [g.head(m.path), Data(1, message(big))], DUE
    size = g.rng.choice((2**31 - 1, 2**32 - 1, 200 * 1024 * 1024, 131 * 1024 * 1024))
    return f"declared length {size}", m.path, [g.head(m.path), Data(1, message(body, 0, size))], DUE


def _headers(g: _Gen) -> Built:
    m = g.method(unary=True)
    body = g.body(m)
    base = request_headers(m.path, g.client_id)
    choice = g.rng.randrange(14)
    if choice == 0:
        what, headers = "no :path", [h for h in base if h[0] != b":path"]
    elif choice == 1:
        what, headers = ":method GET", [(b":method", b"GET")] + base[1:]
    elif choice == 2:
        what, headers = "no :method, :scheme, :authority", base[3:]
    elif choice == 3:
        what, headers = (
            "content-type text/plain",
            [h if h[0] != b"content-type" else (h[0], b"text/plain") for h in base],
        )
    elif choice == 4:
        what, headers = "no content-type, no te", [h for h in base if h[0] not in (b"content-type", b"te")]
    elif choice == 5:
        bad = g.rng.choice((b"\xff\xfe", b"\xc3(", b"\xed\xa0\x80"))
        what, headers = "invalid UTF-8 in a header value", [*base, (b"x-mq-client-id", b"fuzz" + bad)]
    elif choice == 6:
        what, headers = "invalid UTF-8 in :path", [h if h[0] != b":path" else (h[0], h[1] + b"\xff") for h in base]
    elif choice == 7:
        what, headers = "an upper-case header name", [*base, (b"X-Upper", b"1")]
    elif choice == 8:
        what, headers = "a pseudo-header after the others", [*base, (b":status", b"200")]
    elif choice == 9:
        what, headers = "a connection-specific header", [*base, (b"connection", b"keep-alive")]
    elif choice == 10:
        size = g.rng.choice((8_000, 60_000, 200_000))
        what, headers = f"a {size}-byte header value", [*base, (b"x-mq-namespace", b"n" * size)]
    elif choice == 11:
        what, headers = "2000 headers", base + [(f"x-fuzz-{i}".encode(), b"v") for i in range(2000)]
    elif choice == 12:
        value = g.rng.choice((b"-5S", b"99999999999H", b"1x", b"S", b"0n", b"1" * 300 + b"S", b"\xff"))
        what, headers = f"grpc-timeout {value[:20]!r}", [h if h[0] != b"grpc-timeout" else (h[0], value) for h in base]
    else:
        what, headers = "an empty x-mq-client-id", [h if h[0] != b"x-mq-client-id" else (h[0], b"") for h in base]
    steps: list[Step] = [Send(headers_frames(g.encoder, 1, headers)), Data(1, message(body))]
    return what, m.path, steps, DUE_OR_CLOSE


def _streams(g: _Gen) -> Built:
    m = g.method(unary=True)
    body = g.body(m)
    choice = g.rng.randrange(6)
    if choice == 0:
        return "a call opened and abandoned", m.path, [g.head(m.path), Pause(PAUSE)], {}
    if choice == 1:
        return (
            "half a message, then abandoned",
            m.path,
            [g.head(m.path), Data(1, message(body)[:3], False), Pause(PAUSE)],
            {},
        )
    if choice == 2:
        n = g.rng.choice((20, 90, 150))
        steps: list[Step] = []
        for i in range(n):
            steps += g.call(m, body, 1 + 2 * i)
        return f"{n} calls, and the client never reads", m.path, [*steps, Pause(2 * PAUSE)], {"reads": False}
    if choice == 3:  # the client cancels one call; another on the connection is answered
        steps = [*g.call(m, body, 1), Send(frame(RST_STREAM, 0, 1, struct.pack(">I", 8))), *g.call(m, body, 3)]
        return "a call reset by the client beside another", m.path, steps, {"owed": frozenset({3})}
    if choice == 4:  # no window for the answer; the call's deadline still ends it
        steps = [Send(settings((4, 0))), g.head(m.path, extra={"grpc-timeout": "1S"}), Data(1, message(body))]
        return "a zero flow-control window", m.path, steps, DUE
    steps = [*g.call(m, body)]
    return "the call, then the client's TCP half-close", m.path, steps, {**DUE_OR_CLOSE, "eof": True}


def _preface(g: _Gen) -> Built:
    choice = g.rng.randrange(6)
    garbage = {
        0: ("garbage", g.rng.randbytes(g.rng.choice((1, 24, 100, 70_000)))),
        1: ("an HTTP/1.1 request", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
        2: ("a TLS ClientHello", bytes.fromhex("16030100a5010000a10303") + bytes(32) + b"\x00\x00\x02\x13\x01\x01\x00"),
        3: ("a truncated preface", PREFACE[: g.rng.randint(1, len(PREFACE) - 1)]),
        4: ("a preface then garbage", PREFACE + g.rng.randbytes(64)),
        5: ("the remoting protocol", struct.pack(">ii", 20, 16) + b'{"code":105,"a":1}'),
    }
    what, data = garbage[choice]
    # then the client's FIN: a server may wait for the rest of a frame, but not past the end
    return what, "", [Send(data)], {**CLOSE, "eof": True}


def _frames(g: _Gen) -> Built:
    m = g.method(unary=True)
    body = g.body(m)
    choice = g.rng.randrange(14)
    call = g.call(m, body, 1)
    if choice == 0:
        return "an unknown frame type (ignored)", m.path, [Send(frame(0xEE, 0xFF, 0, b"x" * 8)), *call], DUE
    if choice == 1:
        return "a 20000-byte frame", m.path, [Send(frame(PING, 0, 0, bytes(20_000)))], CLOSE
    if choice == 2:
        return "DATA on stream 0", m.path, [Send(frame(DATA, 0, 0, b"abc"))], CLOSE
    if choice == 3:
        return (
            "padding longer than the frame",
            m.path,
            [Send(frame(HEADERS, PADDED | END_HEADERS, 1, b"\xff" + b"x"))],
            CLOSE,
        )
    if choice == 4:
        return "a SETTINGS frame of 7 bytes", m.path, [Send(frame(SETTINGS, 0, 0, bytes(7)))], CLOSE
    if choice == 5:
        pair = g.rng.choice(((2, 2), (5, 100), (4, 2**31), (5, 2**24)))
        return f"SETTINGS {pair}", m.path, [Send(settings(pair))], CLOSE
    if choice == 6:
        return "a PING of 3 bytes", m.path, [Send(frame(PING, 0, 0, b"abc"))], CLOSE
    if choice == 7:
        pings = frame(PING, 0, 0, bytes(8)) * 500
        return "500 PINGs, then a call", m.path, [Send(pings), *call], DUE_OR_CLOSE
    if choice == 8:
        return "CONTINUATION without HEADERS", m.path, [Send(frame(CONTINUATION, END_HEADERS, 1, b"\x82"))], CLOSE
    if choice == 9:
        head = frame(HEADERS, 0, 1, g.encoder.encode(request_headers(m.path, g.client_id), huffman=False))
        return "HEADERS without END_HEADERS, then DATA", m.path, [Send(head + frame(DATA, 0, 1, b"x"))], CLOSE
    if choice == 10:
        return "an HPACK index out of range", m.path, [Send(frame(HEADERS, END_HEADERS, 1, b"\xff\xff\x7f"))], CLOSE
    if choice == 11:
        return (
            "WINDOW_UPDATE past 2^31-1",
            m.path,
            [Send(frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", 2**31 - 1)))],
            CLOSE,
        )
    if choice == 12:
        return "a call on an even stream id", m.path, g.call(m, body, 2), {"may_close": True, "must_close": True}
    steps = [*call, *g.call(m, body, 1)]  # stream 1 again
    return "a stream id used twice", m.path, steps, {"owed": frozenset({1}), "may_close": True}


_BUILDERS = {
    "valid": _valid,
    "protobuf": _protobuf,
    "unknown-method": _unknown_method,
    "prefix": _prefix,
    "oversized": _oversized,
    "headers": _headers,
    "streams": _streams,
    "preface": _preface,
    "frames": _frames,
}


# -- the server's side, read leniently --------------------------------------------------------------


@dataclass
class Answer:
    """What came back on one stream."""

    headers: list[list[tuple[str, str]]] = field(default_factory=list)  # each header block
    data: bytearray = field(default_factory=bytearray)
    ended: bool = False  # END_STREAM came
    reset: int | None = None  # RST_STREAM's error code

    @property
    def done(self) -> bool:
        return self.ended or self.reset is not None

    def trailer(self, name: str) -> str | None:
        for block in reversed(self.headers):
            for key, value in block:
                if key == name:
                    return value
        return None

    def messages(self) -> list[bytes] | None:
        """The gRPC messages of the DATA, None when the framing is broken."""
        out, pos, data = [], 0, bytes(self.data)
        while pos < len(data):
            if len(data) - pos < 5:
                return None
            flag, size = struct.unpack_from(">BI", data, pos)
            if flag or pos + 5 + size > len(data):
                return None
            out.append(data[pos + 5 : pos + 5 + size])
            pos += 5 + size
        return out


class Reader:
    """The server's frames, read without a state machine: what came on each stream, the
    GOAWAY, the flow-control windows the client may send into, and what did not parse."""

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.decoder = hpack.Decoder()
        self.decoder.max_header_list_size = 1 << 20
        self.streams: dict[int, Answer] = {}
        self.goaway: int | None = None
        self.errors: list[str] = []
        self.settings_seen = False
        self.max_frame = MAX_FRAME  # the server's SETTINGS_MAX_FRAME_SIZE
        self.initial_window = 65_535
        self.connection_window = 65_535
        self.windows: dict[int, int] = {}  # stream → window (for DATA the client sends)
        self.pings = 0
        self._block: tuple[int, int, bytearray] | None = None  # (stream, flags, fragments) until END_HEADERS

    def window(self, stream_id: int) -> int:
        return min(self.connection_window, self.windows.get(stream_id, self.initial_window))

    def sent(self, stream_id: int, size: int) -> None:
        self.connection_window -= size
        self.windows[stream_id] = self.windows.get(stream_id, self.initial_window) - size

    def feed(self, data: bytes) -> None:
        self.buffer += data
        while len(self.buffer) >= 9 and not self.errors:
            size = int.from_bytes(self.buffer[:3], "big")
            if size > MAX_FRAME:  # the client's SETTINGS leave its limit at the default
                self.errors.append(f"a frame of {size} bytes, above the client's {MAX_FRAME}")
                return
            if len(self.buffer) < 9 + size:
                return
            kind, flags = self.buffer[3], self.buffer[4]
            stream_id = int.from_bytes(self.buffer[5:9], "big") & 0x7FFFFFFF
            payload = bytes(self.buffer[9 : 9 + size])
            del self.buffer[: 9 + size]
            self._frame(kind, flags, stream_id, payload)

    def _frame(self, kind: int, flags: int, stream_id: int, payload: bytes) -> None:
        if self._block is not None and kind != CONTINUATION:
            self.errors.append(f"frame type {kind} inside a header block")
            return
        if kind == DATA:
            if stream_id == 0:
                self.errors.append("DATA on stream 0")
                return
            answer = self.streams.setdefault(stream_id, Answer())
            if answer.ended:
                self.errors.append(f"DATA on stream {stream_id} after its END_STREAM")
            answer.data += _unpad(payload, flags)
            answer.ended = answer.ended or bool(flags & END_STREAM)
        elif kind in (HEADERS, CONTINUATION):
            if kind == HEADERS:
                fragment = _unpad(payload, flags)
                if flags & PRIORITY_FLAG:
                    fragment = fragment[5:]
                self._block = (stream_id, flags, bytearray(fragment))
            elif self._block is None or self._block[0] != stream_id:
                self.errors.append(f"CONTINUATION out of place on stream {stream_id}")
                return
            else:
                self._block[2].extend(payload)
            if flags & END_HEADERS:
                first_stream, first_flags, block = self._block
                self._block = None
                try:
                    headers = self.decoder.decode(bytes(block), raw=True)
                except Exception as exc:  # hpack's errors have no common base but Exception
                    self.errors.append(f"undecodable header block on stream {first_stream}: {exc!r}")
                    return
                answer = self.streams.setdefault(first_stream, Answer())
                answer.headers.append([(bytes(k).decode("latin-1"), bytes(v).decode("latin-1")) for k, v in headers])
                answer.ended = answer.ended or bool(first_flags & END_STREAM)
        elif kind == RST_STREAM:
            if len(payload) != 4:
                self.errors.append("RST_STREAM not of 4 bytes")
                return
            self.streams.setdefault(stream_id, Answer()).reset = int.from_bytes(payload, "big")
        elif kind == SETTINGS:
            if flags & ACK:
                return
            self.settings_seen = True
            for i in range(0, len(payload) - len(payload) % 6, 6):
                key, value = struct.unpack_from(">HI", payload, i)
                if key == 5:
                    self.max_frame = value
                elif key == 4:
                    delta = value - self.initial_window
                    self.initial_window = value
                    self.windows = {s: w + delta for s, w in self.windows.items()}
        elif kind == WINDOW_UPDATE and len(payload) == 4:
            increment = int.from_bytes(payload, "big") & 0x7FFFFFFF
            if stream_id == 0:
                self.connection_window += increment
            else:
                self.windows[stream_id] = self.windows.get(stream_id, self.initial_window) + increment
        elif kind == GOAWAY:
            self.goaway = int.from_bytes(payload[4:8], "big") if len(payload) >= 8 else -1
        elif kind == PING:
            self.pings += 1
        elif kind == PUSH_PROMISE:
            self.errors.append("PUSH_PROMISE though the client's SETTINGS disabled push")


def _unpad(payload: bytes, flags: int) -> bytes:
    if flags & PADDED and payload:
        pad = payload[0]
        return payload[1 : max(1, len(payload) - pad)]
    return payload
