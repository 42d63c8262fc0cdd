"""The sans-IO decoders as fuzz targets: one function per decoder taking arbitrary bytes.

The contract every target checks is the one the servers rely on: on bytes it cannot accept, a
decoder raises ``ProtocolError`` (or a subclass) and nothing else. Each target returns
normally or lets a ``ProtocolError`` out; any other exception is a decoder bug. Targets also
assert a few cheap invariants (a decoder that failed once keeps failing, a decoded command's
fields are of the declared types), which raise ``AssertionError``: a bug too.

``SEEDS[name]`` holds well-formed inputs to start mutating from. Used by
``bench/fuzz_decoders.py`` (atheris, coverage-guided) and ``tests/protocol/test_decoder_fuzz.py``
(hypothesis). Standard library only; nothing here does I/O.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

from rmq.protocol import body as json_body
from rmq.protocol import dledger, ha, header_codec, headers, javaprops, message
from rmq.protocol import properties as props
from rmq.protocol.codes import LanguageCode, SerializeType
from rmq.protocol.command import RemotingCommand
from rmq.protocol.errors import ProtocolError
from rmq.protocol.frame import FrameDecoder

# Bound on what a target makes a decoder allocate, so a fuzzer's input cannot exhaust memory
# through a legitimate size field: frames and chunks up to 64 KiB, bodies inflated to 1 MiB.
MAX_FRAME = 64 * 1024
MAX_INFLATE = 1024 * 1024

Target = Callable[[bytes], None]


def _chunks(data: bytes) -> list[bytes]:
    """Split ``data[1:]`` into pieces of ``data[0]`` bytes (at least 1): the same bytes
    arriving in reads of different sizes."""
    if not data:
        return []
    step = data[0] or 1
    rest = data[1:]
    return [rest[i : i + step] for i in range(0, len(rest), step)]


def _check_command(cmd: RemotingCommand) -> None:
    assert type(cmd.code) is int and type(cmd.opaque) is int and type(cmd.flag) is int
    assert type(cmd.version) is int and isinstance(cmd.language, LanguageCode)
    assert cmd.remark is None or type(cmd.remark) is str
    ext = cmd.ext_fields
    assert all(type(k) is str and type(v) is str for k, v in ext.items())
    repr(cmd)


def frame(data: bytes) -> None:
    """FrameDecoder fed in reads of ``data[0]`` bytes; each frame decoded as a command."""
    dec = FrameDecoder(MAX_FRAME)
    try:
        for piece in _chunks(data):
            dec.feed(piece)
            for content in dec:
                assert type(content) is bytes and len(content) + 4 <= MAX_FRAME
                try:
                    _check_command(RemotingCommand.decode(content))
                except ProtocolError:
                    pass
    except ProtocolError as exc:
        # a broken decoder stays broken: the stream cannot be trusted any more
        for again in (lambda: dec.feed(b"x"), lambda: next(dec)):
            try:
                again()
            except ProtocolError as exc2:
                assert exc2 is exc
            else:
                raise AssertionError("FrameDecoder usable after an error") from None
        raise


def command(data: bytes) -> None:
    """RemotingCommand.decode on one frame's content (header-length word first)."""
    _check_command(RemotingCommand.decode(data))


def _header_frame(stype: int, data: bytes) -> bytes:
    """``data`` as the header of a frame in ``stype``; a header longer than 24 bits is cut."""
    header = data[:0xFFFFFF]
    return struct.pack(">i", (stype << 24) | len(header)) + header


def command_json(data: bytes) -> None:
    """A JSON header: RemotingCommand.decode, extFields included."""
    _check_command(RemotingCommand.decode(_header_frame(SerializeType.JSON, data)))


def command_rocketmq(data: bytes) -> None:
    """A ROCKETMQ (binary) header: RemotingCommand.decode, extFields block included."""
    _check_command(RemotingCommand.decode(_header_frame(SerializeType.ROCKETMQ, data)))


def record(data: bytes) -> None:
    """Stored message records: decode_record (with CRC check), decode_record_meta,
    iter_records, then the body inflated as its sysFlag says."""
    meta = message.decode_record_meta(data, 0, check_crc=True)
    assert 0 <= meta.body_start <= meta.body_start + meta.body_len <= len(data)
    msg, size = message.decode_record(data, 0, check_crc=True)
    assert size == meta.size and msg.topic == meta.topic
    for m in message.iter_records(data):
        assert all(type(k) is str and type(v) is str for k, v in m.properties.items())
    try:
        message.decompress_body(msg.body, msg.sys_flag, max_size=MAX_INFLATE)
    except message.CompressionUnavailable:
        pass


def batch(data: bytes) -> None:
    """SEND_BATCH_MESSAGE bodies."""
    for m in message.decode_batch_body(data, "T"):
        assert type(m.body) is bytes and type(m.flag) is int


def properties_string(data: bytes) -> None:
    """The ``name\\x01value\\x02`` properties string, from bytes and from text."""
    out = props.decode_properties(data)
    assert all(type(k) is str and type(v) is str for k, v in out.items())
    props.decode_properties(data.decode("utf-8", "replace"))
    props.java_string_hash(data.decode("utf-8", "replace"))


def body_json(data: bytes) -> None:
    """fastjson-dialect bodies (body.loads), written back with body.dumps."""
    value = json_body.loads(data)
    try:
        json_body.dumps(value)
        json_body.dumps(value, legacy=True)
    except (ValueError, RecursionError):  # NaN/Infinity read leniently; or nested at the limit
        pass


def java_properties(data: bytes) -> None:
    """Java .properties text (config request bodies), parsed and rendered back."""
    parsed = javaprops.parse(data.decode("utf-8", "replace"))
    assert all(type(k) is str and type(v) is str for k, v in parsed.items())
    javaprops.render(parsed)


def ha_chunks(data: bytes) -> None:
    """The slave's ChunkDecoder, fed in reads of ``data[0]`` bytes."""
    dec = ha.ChunkDecoder(MAX_FRAME)
    for piece in _chunks(data):
        dec.feed(piece)
        for offset, chunk in dec:
            assert offset >= 0 and len(chunk) <= MAX_FRAME


def ha_reports(data: bytes) -> None:
    """The master's ReportDecoder, fed in reads of ``data[0]`` bytes."""
    dec = ha.ReportDecoder()
    last = -1
    for piece in _chunks(data):
        got = dec.feed(piece)
        if got is not None:
            assert got >= last
            last = got


_HEADER_CLASSES = sorted(
    (
        c
        for c in vars(headers).values()
        if isinstance(c, type) and issubclass(c, headers.Header) and c.__dict__.get("__dataclass_fields__")
    ),
    key=lambda c: c.__name__,
)


def custom_headers(data: bytes) -> None:
    """A binary extFields block read into the typed header ``data[0]`` picks (HeaderError is
    a ProtocolError), and the SEND V2 key mapping."""
    if not data:
        return
    ext = header_codec.decode_binary_ext(data[1:])
    cls = _HEADER_CLASSES[data[0] % len(_HEADER_CLASSES)]
    h = cls.from_ext(ext)
    h.to_ext()
    if cls is headers.SendMessageRequestHeader:
        headers.SendMessageRequestHeader.from_v2_ext(ext)


def dledger_entry(data: bytes) -> None:
    """DLedger entry headers and index units."""
    h = dledger.decode_entry_header(data, 0)
    assert h.size == dledger.BODY_OFFSET + h.body_length
    dledger.decode_index(data, 0)


TARGETS: dict[str, Target] = {
    "frame": frame,
    "command": command,
    "command_json": command_json,
    "command_rocketmq": command_rocketmq,
    "record": record,
    "batch": batch,
    "properties": properties_string,
    "body_json": body_json,
    "javaprops": java_properties,
    "ha_chunks": ha_chunks,
    "ha_reports": ha_reports,
    "headers": custom_headers,
    "dledger": dledger_entry,
}


def run(name: str, data: bytes) -> BaseException | None:
    """Run target ``name`` on ``data``; the exception that breaks the contract, or None."""
    try:
        TARGETS[name](data)
    except ProtocolError:
        return None
    except Exception as exc:  # noqa: BLE001 - anything else is what we are looking for
        return exc
    return None


# -- seeds -------------------------------------------------------------------------------------


def _deep_header(depth: int) -> bytes:
    return b'{"code":10,"extFields":{"a":' + b"[" * depth + b"]" * depth + b"}}"


def _seeds() -> dict[str, list[bytes]]:
    send = headers.SendMessageRequestHeader("PG", "TopicTest", properties="TAGS\x01a\x02KEYS\x01k1 k2")
    ext = send.to_ext()
    req_json = RemotingCommand.request(10, ext, b"hello")
    req_bin = RemotingCommand.request(310, send.to_v2_ext(), b"x" * 40, serialize_type=SerializeType.ROCKETMQ)
    resp = req_json.make_response(0, "ok", {"msgId": "AC", "queueId": "1", "queueOffset": "7"})
    frames = [c.encode() for c in (req_json, req_bin, resp)]
    json_header = header_codec.encode_json(10, LanguageCode.JAVA, 409, 7, 0, "remark", ext)
    cpp_header = b'{"code":34,"extFields":{"queueId":0,"flag":1.5,"b":true},"language":"CPP","version":"409"}\n'
    bin_header = header_codec.encode_binary(11, 0, 409, 1, 2, "r", {"topic": "T", "queueId": "0"})
    rec_props = {"TAGS": "a", "KEYS": "k", "UNIQ_KEY": "0A0B"}
    rec = message.encode_record(topic="TopicTest", body=b"body", properties=rec_props, queue_offset=3)
    rec6 = message.encode_record(
        topic="T6", body=b"", sys_flag=message.BORNHOST_V6_FLAG | message.STOREHOST_V6_FLAG,
        born_host=("::1", 1), store_host=("::1", 10911),
    )  # fmt: skip
    zbody, zflag = message.compress(b"z" * 2000)
    recz = message.encode_record(topic="Z", body=zbody, sys_flag=zflag)
    msgs = [message.Message("T", b"one", 0, {"TAGS": "t"}), message.Message("T", b"", 3, {})]
    heartbeat = {
        "clientID": "127.0.0.1@1",
        "consumerDataSet": [
            {
                "groupName": "G",
                "consumeType": "CONSUME_PASSIVELY",
                "messageModel": "CLUSTERING",
                "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                "subscriptionDataSet": [{"topic": "T", "subString": "a || b", "codeSet": [97], "subVersion": 1}],
                "unitMode": False,
            }
        ],
        "producerDataSet": [{"groupName": "PG"}],
    }
    offsets = {json_body.MessageQueue("T", "b", 0): 5, json_body.MessageQueue("T", "b", 1): -1}
    header_seeds = []
    for i, cls in enumerate(_HEADER_CLASSES):
        sample = {wire: ("1" if kind != "str" else "v") for _, wire, kind, _ in cls._fields()}
        block = header_codec.encode_binary(0, 0, 0, 0, 0, None, sample)[21:]  # the ext block only
        header_seeds.append(bytes([i]) + block)
    return {
        "frame": [bytes([n]) + b"".join(frames) for n in (1, 7, 200)],
        "command": [f[4:] for f in frames],
        "command_json": [json_header, cpp_header, b'{"code":0}', _deep_header(900)],
        "command_rocketmq": [bin_header, header_codec.encode_binary(0, 3, 0, 0, 1, None, None)],
        "record": [rec, rec + rec, rec6, recz],
        "batch": [message.encode_batch_body(msgs), b""],
        "properties": [props.encode_properties(rec_props).encode(), b"A\x01b\x02\x02\x01c\x02"],
        "body_json": [
            json_body.dumps(heartbeat),
            # just inside the limits (nesting, digits): a mutation or two crosses them
            b"[" * 900 + b"]" * 900,
            b"{1:" + b"9" * 4200 + b"}",
            json_body.dumps({"offsetTable": offsets}),
            json_body.dumps({"brokerAddrs": {0: "127.0.0.1:10911", 1: "127.0.0.1:10921"}}, legacy=True),
        ],
        "javaprops": [b"a=b\nc : d\n# comment\n! too\nkey\\\n   cont=\\u0041\\t\\\\\n  e f\n"],
        "ha_chunks": [bytes([5]) + ha.encode_chunk(0, b"abc") + ha.encode_chunk(3) + ha.encode_chunk(3, b"d")],
        "ha_reports": [bytes([3]) + ha.encode_report(0) + ha.encode_report(9) + ha.encode_report(9)],
        "headers": header_seeds,
        "dledger": [dledger.encode_entry(0, 1, 0, rec), dledger.encode_index(0, 48, 0, 1) + bytes(16)],
    }


SEEDS: dict[str, list[bytes]] = _seeds()
