"""Messages and the stored record codec (PROTOCOL.md 5.1, 5.2, 5.5, 5.6).

One record layout serves the CommitLog, PULL_MESSAGE / QUERY_MESSAGE / VIEW_MESSAGE_BY_ID
bodies and CHECK_TRANSACTION_STATE bodies, so store, broker, client and Spark all use this module.
All integers are big-endian. A v1 record with IPv4 hosts is::

    totalSize i32 | magic i32 | bodyCRC i32 | queueId i32 | flag i32 | queueOffset i64
    | physicalOffset i64 | sysFlag i32 | bornTimestamp i64 | bornHost 4+4 | storeTimestamp i64
    | storeHost 4+4 | reconsumeTimes i32 | preparedTransactionOffset i64
    | bodyLength i32 + body | topicLength i8 + topic | propertiesLength i16 + properties

A host is the raw address (4 bytes, or 16 when the sysFlag has the V6 bit for that host) plus an
int32 port. We always write magic v1 (4.x clients read a 1-byte topic length whatever the magic
says) and read v1 and v2 (2-byte topic length, 5.x).

Decoding is strict about lengths and raises ``RemoteProtocolError`` on malformed bytes; encoding
raises ``LocalProtocolError`` for values the format cannot carry. The construct declarations in
``schema.py`` describe the same bytes and are used by the tests as an oracle.
"""

from __future__ import annotations

import socket
import struct
import zlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from . import properties as P
from .errors import LocalProtocolError, RemoteProtocolError

if TYPE_CHECKING:
    import mmap

    # Anything the codecs read from or write into: pull bodies, mapped CommitLog files.
    Buffer = bytes | bytearray | memoryview | mmap.mmap

__all__ = [
    "BLANK_MAGIC_CODE",
    "BORNHOST_V6_FLAG",
    "COMPRESSED_FLAG",
    "COMPRESSION_LZ4",
    "COMPRESSION_TYPE_MASK",
    "COMPRESSION_ZLIB",
    "COMPRESSION_ZSTD",
    "INNER_BATCH_FLAG",
    "MESSAGE_MAGIC_CODE",
    "MESSAGE_MAGIC_CODE_V2",
    "MULTI_TAGS_FLAG",
    "NEED_UNWRAP_FLAG",
    "STOREHOST_V6_FLAG",
    "TRANSACTION_COMMIT_TYPE",
    "TRANSACTION_NOT_TYPE",
    "TRANSACTION_PREPARED_TYPE",
    "TRANSACTION_ROLLBACK_TYPE",
    "TRANSACTION_TYPE_MASK",
    "BatchItem",
    "Message",
    "MessageDraft",
    "MessageExt",
    "RecordMeta",
    "body_crc",
    "decode_batch_body",
    "decode_batch_items",
    "decode_host",
    "decode_record",
    "decode_record_meta",
    "decompress_body",
    "encode_batch_body",
    "encode_draft",
    "encode_host",
    "encode_message_ext",
    "encode_record",
    "host_port",
    "iter_records",
    "make_offset_msg_id",
    "pack_record_into",
    "parse_offset_msg_id",
    "parse_record",
    "record_size",
    "record_tail",
    "redraft",
    "transaction_type",
]

# sysFlag bits (MessageSysFlag.java)
COMPRESSED_FLAG = 0x1
MULTI_TAGS_FLAG = 0x2
TRANSACTION_NOT_TYPE = 0x0
TRANSACTION_PREPARED_TYPE = 0x4
TRANSACTION_COMMIT_TYPE = 0x8
TRANSACTION_ROLLBACK_TYPE = 0xC
TRANSACTION_TYPE_MASK = 0xC
BORNHOST_V6_FLAG = 0x10
STOREHOST_V6_FLAG = 0x20
NEED_UNWRAP_FLAG = 0x40
INNER_BATCH_FLAG = 0x80
COMPRESSION_TYPE_MASK = 0x700
COMPRESSION_LZ4 = 0x100
COMPRESSION_ZSTD = 0x200
COMPRESSION_ZLIB = 0x300

MESSAGE_MAGIC_CODE = 0xDAA320A7  # v1; Java int -626843481
MESSAGE_MAGIC_CODE_V2 = 0xDAA320AB  # 5.x, 2-byte topic length
BLANK_MAGIC_CODE = 0xCBD43194  # end-of-file filler; Java int -875286124

MAX_TOPIC_LENGTH = 127  # v1 topic length is one signed byte
MAX_PROPERTIES_LENGTH = 32767  # int16
# Limit for inflating a compressed body: a small zlib stream can expand enormously.
DEFAULT_MAX_DECOMPRESSED_SIZE = 64 * 1024 * 1024


def _head(born_len: int, store_len: int) -> struct.Struct:
    return struct.Struct(
        ">"
        "i"  # totalSize
        "I"  # magic code
        "I"  # body CRC (crc32 & 0x7FFFFFFF)
        "i"  # queue id
        "i"  # flag (user flag)
        "q"  # queue offset
        "q"  # physical offset
        "i"  # sysFlag
        "q"  # born timestamp
        f"{born_len + 4}s"  # born host: address + int32 port
        "q"  # store timestamp
        f"{store_len + 4}s"  # store host: address + int32 port
        "i"  # reconsume times
        "q"  # prepared transaction offset
        "i"  # body length
    )


# Fixed part of a record, up to and including bodyLength, by (born V6, store V6).
HEAD_V4 = _head(4, 4)  # 88 bytes: the common case
_HEADS = {
    0: HEAD_V4,
    BORNHOST_V6_FLAG: _head(16, 4),
    STOREHOST_V6_FLAG: _head(4, 16),
    BORNHOST_V6_FLAG | STOREHOST_V6_FLAG: _head(16, 16),
}
_HOST_FLAGS = BORNHOST_V6_FLAG | STOREHOST_V6_FLAG
SYSFLAG_POSITION = struct.calcsize(">iIIiiqq")  # 36
_U16 = struct.Struct(">H")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_MAGIC_AT_4 = struct.Struct(">iI")  # totalSize, magic

# Record length without body, topic and properties, with IPv4 hosts:
# the fixed head plus 1 (topic length) plus 2 (properties length).
RECORD_OVERHEAD_V4 = HEAD_V4.size + 1 + 2  # 91


def record_size(sys_flag: int, body_len: int, topic_len: int, props_len: int) -> int:
    """Byte length of a v1 record with these parts (CommitLog.calMsgLength)."""
    return _HEADS[sys_flag & _HOST_FLAGS].size + 3 + body_len + topic_len + props_len


def transaction_type(sys_flag: int) -> int:
    """The transaction bits of ``sys_flag``: one of the ``TRANSACTION_*_TYPE`` values."""
    return sys_flag & TRANSACTION_TYPE_MASK


def body_crc(body: bytes | bytearray | memoryview) -> int:
    """RocketMQ's body CRC: zlib CRC32 masked to 31 bits (UtilAll.crc32)."""
    return zlib.crc32(body) & 0x7FFFFFFF


# --- hosts ----------------------------------------------------------------------------------

_host_cache: dict[tuple[str, int, bool], bytes] = {}


def encode_host(host: tuple[str, int], v6: bool = False) -> bytes:
    """Address bytes plus int32 port, as stored in a record (4+4, or 16+4 when ``v6``).

    An IPv4 address written as V6 becomes ``::ffff:a.b.c.d``. An IPv6 address that is not
    IPv4-mapped cannot be written as V4 and raises ``LocalProtocolError``.
    """
    key = (host[0], host[1], v6)
    cached = _host_cache.get(key)
    if cached is not None:
        return cached
    ip, port = host
    try:
        if v6:
            if ":" in ip:
                raw = socket.inet_pton(socket.AF_INET6, ip)
            else:
                raw = b"\x00" * 10 + b"\xff\xff" + socket.inet_aton(ip)
        elif ":" in ip:
            raw6 = socket.inet_pton(socket.AF_INET6, ip)
            if raw6[:12] != b"\x00" * 10 + b"\xff\xff":
                raise LocalProtocolError(f"IPv6 host {ip} needs the V6 sysFlag bit")
            raw = raw6[12:]
        else:
            raw = socket.inet_aton(ip)
        encoded = raw + _I32.pack(port)
    except (OSError, struct.error) as exc:
        raise LocalProtocolError(f"bad host {host!r}: {exc}") from None
    if len(_host_cache) > 4096:  # bounded: born hosts come from many clients
        _host_cache.clear()
    _host_cache[key] = encoded
    return encoded


def is_ipv6_host(ip: str) -> bool:
    """True when ``ip`` is an IPv6 address that is not IPv4-mapped (needs a V6 sysFlag bit)."""
    if ":" not in ip:
        return False
    try:
        raw = socket.inet_pton(socket.AF_INET6, ip)
    except OSError:
        return True
    return raw[:12] != b"\x00" * 10 + b"\xff\xff"


def _decode_ip(raw: bytes) -> str:
    if len(raw) == 4:
        return socket.inet_ntoa(raw)
    return socket.inet_ntop(socket.AF_INET6, raw)


_decoded_hosts: dict[bytes, tuple[str, int]] = {}


def decode_host(raw: bytes) -> tuple[str, int]:
    """(ip, port) from address bytes plus int32 port (8 or 20 bytes), as in a record."""
    host = _decoded_hosts.get(raw)
    if host is None:
        host = _decode_ip(raw[:-4]), _I32.unpack_from(raw, len(raw) - 4)[0]
        if len(_decoded_hosts) > 4096:  # bounded: born hosts come from many clients
            _decoded_hosts.clear()
        _decoded_hosts[raw] = host
    return host


def host_port(address: str) -> tuple[str, int]:
    """ "ip:port" → (ip, port); IPv6 literals may come bracketed."""
    host, _, port = address.rpartition(":")
    return host.strip("[]") or "0.0.0.0", int(port) if port.isdigit() else 0


# --- messages -------------------------------------------------------------------------------


@dataclass(slots=True)
class Message:
    """What a producer sends: topic, body, user flag and properties."""

    topic: str
    body: bytes
    flag: int = 0
    properties: dict[str, str] = field(default_factory=dict)

    @property
    def tags(self) -> str | None:
        return self.properties.get(P.TAGS)

    @property
    def keys(self) -> str | None:
        """The raw KEYS property (space-separated keys), or None."""
        return self.properties.get(P.KEYS)

    @property
    def uniq_key(self) -> str | None:
        return self.properties.get(P.UNIQ_KEY)


@dataclass(slots=True)
class MessageExt(Message):
    """A stored message: a decoded CommitLog record."""

    queue_id: int = 0
    queue_offset: int = 0
    commitlog_offset: int = 0
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: tuple[str, int] = ("0.0.0.0", 0)
    store_timestamp: int = 0
    store_host: tuple[str, int] = ("0.0.0.0", 0)
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    store_size: int = 0
    body_crc: int = 0

    @property
    def offset_msg_id(self) -> str:
        """The broker's id for this record: store host plus CommitLog offset, as hex."""
        return make_offset_msg_id(self.store_host[0], self.store_host[1], self.commitlog_offset)

    @property
    def msg_id(self) -> str:
        """What applications see as the message id: UNIQ_KEY when present, else the offset id."""
        uniq = self.properties.get(P.UNIQ_KEY)
        return uniq if uniq else self.offset_msg_id


class MessageDraft(NamedTuple):
    """A message for the store to append: the one thing ``put`` and ``put_many`` take.

    An immutable value; a tuple, because it is built for every message sent and a tuple is
    the cheapest immutable object to build. The store adds the rest of the record: queue
    offset, CommitLog offset, store time and body CRC. The V6 bits of ``sys_flag`` are not
    taken from here: the store sets them from the hosts. ``encode_draft`` gives the record.
    """

    topic: str
    queue_id: int
    body: bytes
    flag: int = 0
    # stored as given: a mapping is encoded; a string or bytes is taken as already encoded
    properties: Mapping[str, str] | str | bytes | None = None
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: tuple[str, int] = ("127.0.0.1", 0)
    store_host: tuple[str, int] = ("127.0.0.1", 10911)
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    # the consume queue tags code instead of the TAGS hash (or, in SCHEDULE_TOPIC_XXXX, the
    # delivery time); recovery replay computes it from the record again
    tags_code: int | None = None
    # whether the append waits for its sync (and slave): None lets the WAIT property decide,
    # absent meaning true
    wait: bool | None = None


def redraft(msg: MessageExt | Buffer, **changes: Any) -> MessageDraft:
    """A draft that stores ``msg`` (a decoded record, or its bytes) again, with the fields
    ``changes`` names (MessageDraft's names) replaced.

    Kept unless named: topic, queue id, body, flag, properties, sys flag, born time and host,
    store host and reconsume times. The prepared transaction offset, tags code and wait start
    from their defaults.

    Raises:
        ValueError: ``changes`` names a field MessageDraft does not have.
        RemoteProtocolError: ``msg`` is bytes that are no record.
    """
    if not isinstance(msg, MessageExt):
        msg = decode_record(msg)[0]
    draft = MessageDraft(
        msg.topic, msg.queue_id, msg.body, msg.flag, msg.properties, msg.sys_flag, msg.born_timestamp,
        msg.born_host, msg.store_host, msg.reconsume_times,
    )  # fmt: skip
    return draft._replace(**changes) if changes else draft


# --- encoding -------------------------------------------------------------------------------


def _props_bytes(props: Mapping[str, str] | str | bytes | None) -> bytes:
    if props is None:
        return b""
    if isinstance(props, bytes):
        return props
    if isinstance(props, str):
        return props.encode("utf-8")
    return P.encode_properties(props).encode("utf-8")


def pack_record_into(
    buf: Buffer,
    pos: int,
    size: int,
    crc: int,
    queue_id: int,
    flag: int,
    queue_offset: int,
    commitlog_offset: int,
    sys_flag: int,
    born_timestamp: int,
    born_host: bytes,
    store_timestamp: int,
    store_host: bytes,
    reconsume_times: int,
    prepared_transaction_offset: int,
    body: bytes,
    tail: bytes,
    /,
) -> None:
    """Write one v1 record of ``size`` bytes at ``buf[pos:]`` (a writable buffer such as an mmap).

    ``tail`` is ``record_tail(topic, properties)``; hosts are ``encode_host`` output matching the
    V6 bits of ``sys_flag``; ``size`` equals ``len(head) + len(body) + len(tail)``. This is the
    store's hot path, so nothing is validated here.
    """
    head = _HEADS[sys_flag & _HOST_FLAGS]
    blen = len(body)
    head.pack_into(
        buf, pos, size, MESSAGE_MAGIC_CODE, crc, queue_id, flag, queue_offset, commitlog_offset,
        sys_flag, born_timestamp, born_host, store_timestamp, store_host, reconsume_times,
        prepared_transaction_offset, blen,
    )  # fmt: skip
    p = pos + head.size
    buf[p : p + blen] = body  # type: ignore[index]
    p += blen
    buf[p : p + len(tail)] = tail  # type: ignore[index]


def record_tail(topic: bytes, props: bytes) -> bytes:
    """The bytes after the body: topic length (1 byte), topic, properties length, properties."""
    return bytes((len(topic),)) + topic + _U16.pack(len(props)) + props


def encode_record(
    *,
    topic: str,
    body: bytes,
    queue_id: int = 0,
    flag: int = 0,
    properties: Mapping[str, str] | str | bytes | None = None,
    queue_offset: int = 0,
    commitlog_offset: int = 0,
    sys_flag: int = 0,
    born_timestamp: int = 0,
    born_host: tuple[str, int] = ("127.0.0.1", 0),
    store_timestamp: int = 0,
    store_host: tuple[str, int] = ("127.0.0.1", 0),
    reconsume_times: int = 0,
    prepared_transaction_offset: int = 0,
    crc: int | None = None,
) -> bytes:
    """Encode one v1 record. ``crc`` defaults to ``body_crc(body)``.

    Hosts are IPv4 unless ``sys_flag`` carries BORNHOST_V6_FLAG / STOREHOST_V6_FLAG.

    Raises:
        LocalProtocolError: topic longer than 127 bytes, properties longer than 32767 bytes,
            or a host that does not fit its flag.
    """
    topic_b = topic.encode("utf-8")
    if not 0 < len(topic_b) <= MAX_TOPIC_LENGTH:
        raise LocalProtocolError(f"topic length {len(topic_b)} not in 1..{MAX_TOPIC_LENGTH}")
    props_b = _props_bytes(properties)
    if len(props_b) > MAX_PROPERTIES_LENGTH:
        raise LocalProtocolError(f"properties length {len(props_b)} exceeds {MAX_PROPERTIES_LENGTH}")
    body = bytes(body)
    size = record_size(sys_flag, len(body), len(topic_b), len(props_b))
    buf = bytearray(size)
    try:
        pack_record_into(
            buf, 0, size, body_crc(body) if crc is None else crc, queue_id, flag, queue_offset,
            commitlog_offset, sys_flag, born_timestamp,
            encode_host(born_host, bool(sys_flag & BORNHOST_V6_FLAG)), store_timestamp,
            encode_host(store_host, bool(sys_flag & STOREHOST_V6_FLAG)), reconsume_times,
            prepared_transaction_offset, body, record_tail(topic_b, props_b),
        )  # fmt: skip
    except struct.error as exc:
        raise LocalProtocolError(f"record field out of range: {exc}") from None
    return bytes(buf)


def encode_message_ext(msg: MessageExt) -> bytes:
    """Encode ``msg`` as a stored record, keeping its body CRC when it has one."""
    return encode_record(
        topic=msg.topic, body=msg.body, queue_id=msg.queue_id, flag=msg.flag,
        properties=msg.properties, queue_offset=msg.queue_offset,
        commitlog_offset=msg.commitlog_offset, sys_flag=msg.sys_flag,
        born_timestamp=msg.born_timestamp, born_host=msg.born_host,
        store_timestamp=msg.store_timestamp, store_host=msg.store_host,
        reconsume_times=msg.reconsume_times,
        prepared_transaction_offset=msg.prepared_transaction_offset,
        crc=msg.body_crc or None,
    )  # fmt: skip


def encode_draft(
    draft: MessageDraft, *, queue_offset: int = 0, commitlog_offset: int = 0, store_timestamp: int = 0
) -> bytes:
    """The record ``draft`` becomes when stored at these offsets and time: the body CRC
    computed and the V6 host bits set from the hosts, as the store writes it.

    Raises:
        LocalProtocolError: as ``encode_record``.
    """
    v6 = (BORNHOST_V6_FLAG if is_ipv6_host(draft.born_host[0]) else 0) | (
        STOREHOST_V6_FLAG if is_ipv6_host(draft.store_host[0]) else 0
    )
    return encode_record(
        topic=draft.topic, body=draft.body, queue_id=draft.queue_id, flag=draft.flag,
        properties=draft.properties, queue_offset=queue_offset, commitlog_offset=commitlog_offset,
        sys_flag=(draft.sys_flag & ~_HOST_FLAGS) | v6, born_timestamp=draft.born_timestamp,
        born_host=draft.born_host, store_timestamp=store_timestamp, store_host=draft.store_host,
        reconsume_times=draft.reconsume_times, prepared_transaction_offset=draft.prepared_transaction_offset,
    )  # fmt: skip


# --- decoding -------------------------------------------------------------------------------


class RecordMeta(NamedTuple):
    """What the dispatcher and recovery need from a record, without copying the body."""

    size: int
    queue_id: int
    queue_offset: int
    commitlog_offset: int
    sys_flag: int
    store_timestamp: int
    body_crc: int
    body_start: int  # absolute position of the body in the buffer
    body_len: int
    topic: str
    properties: str


def parse_record(buf: Buffer, offset: int) -> tuple[tuple[Any, ...], int, int, str, int, int]:
    """Parse and bounds-check the record at ``offset``, copying nothing but the topic: the
    low-level form of ``decode_record_meta`` for hot loops.

    Returns (head fields in ``HEAD_V4`` order, body start, body length, topic, properties
    start, record end); positions are absolute in ``buf``.

    Raises:
        RemoteProtocolError: as ``decode_record``.
    """
    end = len(buf)
    if offset < 0 or offset + 88 > end:  # 88 = HEAD_V4.size
        raise RemoteProtocolError(f"truncated record at {offset}: {end - offset} bytes left")
    fields = HEAD_V4.unpack_from(buf, offset)
    head_size = 88
    if fields[7] & _HOST_FLAGS:
        head = _HEADS[fields[7] & _HOST_FLAGS]
        head_size = head.size
        if offset + head_size > end:
            raise RemoteProtocolError(f"truncated record at {offset}")
        fields = head.unpack_from(buf, offset)
    size = fields[0]
    rec_end = offset + size
    magic = fields[1]
    body_start = offset + head_size
    p = body_start + fields[-1]  # topic length field
    if magic == MESSAGE_MAGIC_CODE:
        if fields[-1] < 0 or rec_end > end or p + 3 > rec_end:
            raise RemoteProtocolError(f"bad record lengths at {offset} (size {size})")
        topic_len = buf[p]
        p += 1
    elif magic == MESSAGE_MAGIC_CODE_V2:
        if fields[-1] < 0 or rec_end > end or p + 4 > rec_end:
            raise RemoteProtocolError(f"bad record lengths at {offset} (size {size})")
        topic_len = (buf[p] << 8) | buf[p + 1]
        p += 2
    elif magic == BLANK_MAGIC_CODE:
        raise RemoteProtocolError(f"end-of-file blank at {offset}, not a message")
    else:
        raise RemoteProtocolError(f"bad magic code 0x{magic:08X} at {offset}")
    topic_end = p + topic_len
    if topic_len > (MAX_TOPIC_LENGTH if magic == MESSAGE_MAGIC_CODE else 0x7FFF) or topic_end + 2 > rec_end:
        raise RemoteProtocolError(f"bad topic length {topic_len} at {offset}")
    props_len = (buf[topic_end] << 8) | buf[topic_end + 1]
    if props_len > MAX_PROPERTIES_LENGTH or topic_end + 2 + props_len != rec_end:
        raise RemoteProtocolError(f"record at {offset}: size {size} does not match its parts (properties {props_len})")
    topic = str(buf[p:topic_end], "utf-8", "replace")
    return fields, body_start, fields[-1], topic, topic_end + 2, rec_end


def decode_record(buf: Buffer, offset: int = 0, *, check_crc: bool = False) -> tuple[MessageExt, int]:
    """Decode the record at ``buf[offset:]``; returns (message, record size).

    The body is returned as stored (still compressed when COMPRESSED_FLAG is set; see
    ``decompress_body``).

    Raises:
        RemoteProtocolError: truncated or inconsistent record, unknown magic, blank record,
            or (with ``check_crc``) a body whose CRC does not match.
    """
    fields, body_start, body_len, topic, props_start, rec_end = parse_record(buf, offset)
    body = bytes(buf[body_start : body_start + body_len])
    crc = fields[2]
    if check_crc and body_crc(body) != crc:
        raise RemoteProtocolError(f"body CRC mismatch at {offset}")
    msg = MessageExt(
        topic, body, fields[4], P.decode_properties(str(buf[props_start:rec_end], "utf-8", "replace")),
        fields[3], fields[5], fields[6], fields[7], fields[8], decode_host(fields[9]),
        fields[10], decode_host(fields[11]), fields[12], fields[13], fields[0], crc,
    )  # fmt: skip
    return msg, fields[0]


def decode_record_meta(buf: Buffer, offset: int = 0, *, check_crc: bool = False) -> RecordMeta:
    """Like ``decode_record`` but returns only ``RecordMeta`` (no body copy, properties as text).

    Raises:
        RemoteProtocolError: as ``decode_record``.
    """
    fields, body_start, body_len, topic, props_start, rec_end = parse_record(buf, offset)
    crc = fields[2]
    if check_crc and body_crc(buf[body_start : body_start + body_len]) != crc:
        raise RemoteProtocolError(f"body CRC mismatch at {offset}")
    return RecordMeta(
        fields[0], fields[3], fields[5], fields[6], fields[7], fields[10], crc,
        body_start, body_len, topic, str(buf[props_start:rec_end], "utf-8", "replace"),
    )  # fmt: skip


def iter_records(buf: Buffer) -> Iterator[MessageExt]:
    """Decode concatenated records (a pull or query body) until the buffer ends.

    Raises:
        RemoteProtocolError: on the first malformed record (records before it are yielded).
    """
    offset, end = 0, len(buf)
    while offset < end:
        msg, size = decode_record(buf, offset)
        yield msg
        offset += size


def peek_size_and_magic(buf: Buffer, offset: int) -> tuple[int, int]:
    """(totalSize, magic) of the record or blank at ``offset``; the caller checks bounds."""
    size, magic = _MAGIC_AT_4.unpack_from(buf, offset)
    return size, magic


class CompressionUnavailable(RemoteProtocolError):
    """A body uses a codec whose optional package is not installed here."""


_CODEC_EXTRAS = {COMPRESSION_LZ4: ("LZ4", "lz4"), COMPRESSION_ZSTD: ("ZSTD", "zstandard")}


def _codec_module(ctype: int) -> Any:
    name, package = _CODEC_EXTRAS[ctype]
    try:
        if ctype == COMPRESSION_LZ4:
            import lz4.frame as module  # type: ignore[import-not-found,import-untyped,unused-ignore]
        else:
            import zstandard as module  # type: ignore[import-not-found,import-untyped,unused-ignore]
    except ImportError:
        raise CompressionUnavailable(
            f"{name}-compressed bodies need the {package} package: pip install 'rmq[{package}]'"
        ) from None
    return module


def decompress_body(body: bytes, sys_flag: int, *, max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE) -> bytes:
    """The application body: ``body`` inflated when ``sys_flag`` has COMPRESSED_FLAG.

    Compression type bits 0x700 (RocketMQ 5.x): 0 (4.x senders) or 3 zlib, 1 LZ4 (frame
    format, as Java's LZ4FrameOutputStream writes), 2 ZSTD (a zstd frame). LZ4 and ZSTD need
    the optional packages (extras ``rmq[lz4]``, ``rmq[zstandard]``).

    Raises:
        CompressionUnavailable: the codec's package is missing.
        RemoteProtocolError: unknown compression type, corrupt stream, or output above
            ``max_size``.
    """
    if not sys_flag & COMPRESSED_FLAG:
        return body
    ctype = sys_flag & COMPRESSION_TYPE_MASK
    if ctype in (0, COMPRESSION_ZLIB):
        d = zlib.decompressobj()
        try:
            out = d.decompress(body, max_size)
        except zlib.error as exc:
            raise RemoteProtocolError(f"corrupt compressed body: {exc}") from None
        if d.unconsumed_tail:
            raise RemoteProtocolError(f"decompressed body exceeds {max_size} bytes")
        return out
    if ctype not in _CODEC_EXTRAS:
        raise RemoteProtocolError(f"unsupported compression type {ctype >> 8}")
    module = _codec_module(ctype)
    try:
        if ctype == COMPRESSION_LZ4:
            dec = module.LZ4FrameDecompressor()
            out = dec.decompress(body, max_length=max_size + 1)
            if len(out) > max_size:
                raise RemoteProtocolError(f"decompressed body exceeds {max_size} bytes")
            if not dec.eof:
                raise RemoteProtocolError("truncated LZ4 body")
        else:
            reader = module.ZstdDecompressor().stream_reader(body, read_across_frames=True)
            out = reader.read(max_size + 1)
            if len(out) > max_size:
                raise RemoteProtocolError(f"decompressed body exceeds {max_size} bytes")
    except RemoteProtocolError:
        raise
    except Exception as exc:  # noqa: BLE001 - each library has its own error types
        raise RemoteProtocolError(f"corrupt {_CODEC_EXTRAS[ctype][0]} body: {exc}") from None
    return bytes(out)


def compress(body: bytes, codec: str = "zlib", level: int | None = None) -> tuple[bytes, int]:
    """(compressed body, sysFlag bits) with ``codec`` "zlib", "lz4" or "zstd".

    Raises:
        CompressionUnavailable: the codec's package is missing.
        LocalProtocolError: an unknown codec.
    """
    if codec == "zlib":
        # The flag alone, as 4.x clients write it: every 4.x consumer reads that as zlib.
        return zlib.compress(body, 5 if level is None else level), COMPRESSED_FLAG
    if codec == "lz4":
        lz4 = _codec_module(COMPRESSION_LZ4)
        return lz4.compress(body), COMPRESSED_FLAG | COMPRESSION_LZ4
    if codec == "zstd":
        zstd = _codec_module(COMPRESSION_ZSTD)
        packed = zstd.ZstdCompressor(level=3 if level is None else level).compress(body)
        return packed, COMPRESSED_FLAG | COMPRESSION_ZSTD
    raise LocalProtocolError(f"unknown compression codec {codec!r} (zlib, lz4 or zstd)")


# --- batch body (SEND_BATCH_MESSAGE) ---------------------------------------------------------

# Item head: totalSize, magic (client writes 0), bodyCRC (0), flag, bodyLength.
_BATCH_HEAD = struct.Struct(">iiiii")


def encode_batch_body(messages: Iterable[Message]) -> bytes:
    """Encode messages as a batch body (MessageDecoder.encodeMessages); topics are not included.

    Raises:
        LocalProtocolError: properties longer than 32767 bytes.
    """
    parts = []
    for m in messages:
        props = P.encode_properties(m.properties).encode("utf-8")
        if len(props) > MAX_PROPERTIES_LENGTH:
            raise LocalProtocolError(f"properties length {len(props)} exceeds {MAX_PROPERTIES_LENGTH}")
        body = bytes(m.body)
        total = _BATCH_HEAD.size + len(body) + 2 + len(props)
        parts.append(_BATCH_HEAD.pack(total, 0, 0, m.flag, len(body)))
        parts.append(body)
        parts.append(_I16.pack(len(props)))
        parts.append(props)
    return b"".join(parts)


class BatchItem(NamedTuple):
    """One message of a batch body as it came: the store keeps its properties as they are
    (RocketMQ's MessageExtBatchEncoder), so they stay encoded."""

    flag: int
    body: bytes
    properties: bytes


def decode_batch_items(data: bytes | bytearray | memoryview) -> list[BatchItem]:
    """The items of a batch body, properties undecoded.

    Like Java, the per-item totalSize, magic and CRC are not trusted; fields are read in order.

    Raises:
        RemoteProtocolError: an item runs past the end of ``data`` or has a negative length.
    """
    out: list[BatchItem] = []
    p, end = 0, len(data)
    while p < end:
        if p + _BATCH_HEAD.size > end:
            raise RemoteProtocolError(f"truncated batch item at {p}")
        _, _, _, flag, blen = _BATCH_HEAD.unpack_from(data, p)
        p += _BATCH_HEAD.size
        if blen < 0 or p + blen + 2 > end:
            raise RemoteProtocolError(f"bad batch body length {blen} at {p}")
        body = bytes(data[p : p + blen])
        p += blen
        plen = _I16.unpack_from(data, p)[0]
        p += 2
        if plen < 0 or p + plen > end:
            raise RemoteProtocolError(f"bad batch properties length {plen} at {p}")
        out.append(BatchItem(flag, body, bytes(data[p : p + plen])))
        p += plen
    return out


def decode_batch_body(data: bytes | bytearray | memoryview, topic: str = "") -> list[Message]:
    """Decode a batch body into messages with ``topic`` set (the request header's topic).

    Raises:
        RemoteProtocolError: as ``decode_batch_items``.
    """
    return [Message(topic, i.body, i.flag, P.decode_properties(i.properties)) for i in decode_batch_items(data)]


# --- offset message id ----------------------------------------------------------------------


def make_offset_msg_id(ip: str, port: int, phy_offset: int) -> str:
    """Offset message id: store address + port + CommitLog offset as uppercase hex.

    32 characters for an IPv4 store host, 56 for IPv6.
    """
    return (encode_host((ip, port), is_ipv6_host(ip)) + _I64.pack(phy_offset)).hex().upper()


def parse_offset_msg_id(msg_id: str) -> tuple[str, int, int]:
    """(ip, port, CommitLog offset) from an offset message id (32 or 56 hex characters).

    Raises:
        RemoteProtocolError: wrong length or not hex.
    """
    if len(msg_id) not in (32, 56):
        raise RemoteProtocolError(f"offset message id must be 32 or 56 hex chars, got {len(msg_id)}")
    try:
        raw = bytes.fromhex(msg_id)
    except ValueError:
        raise RemoteProtocolError(f"offset message id is not hex: {msg_id!r}") from None
    ip_len = len(raw) - 12
    ip = _decode_ip(raw[:ip_len])
    port, offset = struct.unpack_from(">iq", raw, ip_len)
    return ip, port, offset
