"""The stored record codec, batch bodies, message ids and compression (PROTOCOL.md 5)."""

from __future__ import annotations

import contextlib
import json
import struct
import zlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmq.protocol import properties as P
from rmq.protocol.errors import LocalProtocolError, ProtocolError, RemoteProtocolError
from rmq.protocol.message import (
    BLANK_MAGIC_CODE,
    BORNHOST_V6_FLAG,
    COMPRESSED_FLAG,
    COMPRESSION_LZ4,
    COMPRESSION_ZLIB,
    MESSAGE_MAGIC_CODE_V2,
    STOREHOST_V6_FLAG,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_PREPARED_TYPE,
    Message,
    MessageDraft,
    MessageExt,
    body_crc,
    decode_batch_body,
    decode_batch_items,
    decode_record,
    decode_record_meta,
    decompress_body,
    encode_batch_body,
    encode_draft,
    encode_message_ext,
    encode_record,
    iter_records,
    make_offset_msg_id,
    parse_offset_msg_id,
    record_size,
    redraft,
    transaction_type,
)
from tests.conftest import VECTORS_DIR

VECTORS = VECTORS_DIR


def _vectors() -> Path:
    assert VECTORS.is_dir(), f"captured vectors missing at {VECTORS}"
    return VECTORS


def _frame(data: bytes) -> tuple[dict, bytes]:  # type: ignore[type-arg]
    """(JSON header, body) of a captured frame file (length prefix included)."""
    (length,) = struct.unpack_from(">i", data, 0)
    assert length == len(data) - 4
    (word,) = struct.unpack_from(">i", data, 4)
    header_len = word & 0xFFFFFF
    return json.loads(data[8 : 8 + header_len]), data[8 + header_len :]


def _decoded_bodies(flow_dir: Path) -> dict[str, dict]:  # type: ignore[type-arg]
    out = {}
    for line in (flow_dir / "index.jsonl").read_text().splitlines():
        entry = json.loads(line)
        out[entry["file"]] = entry.get("body_decoded")
    return out


def _sample(**over: object) -> MessageExt:
    fields: dict[str, object] = dict(
        topic="TopicTest",
        body=b"Hello RocketMQ",
        flag=3,
        properties={"KEYS": "k1 k2", "TAGS": "TagA", "UNIQ_KEY": "0100007F0000B1B3000022711C720100"},
        queue_id=2,
        queue_offset=41,
        commitlog_offset=123456,
        sys_flag=0,
        born_timestamp=1795315666594,
        born_host=("10.1.2.3", 45678),
        store_timestamp=1795315666604,
        store_host=("127.0.0.1", 10911),
        reconsume_times=1,
        prepared_transaction_offset=0,
    )
    fields.update(over)
    msg = MessageExt(**fields)  # type: ignore[arg-type]
    msg.body_crc = body_crc(msg.body)
    return msg


# --- round trips ---------------------------------------------------------------------------


def test_round_trip_ipv4() -> None:
    msg = _sample()
    rec = encode_message_ext(msg)
    assert len(rec) == record_size(0, len(msg.body), len("TopicTest"), len(P.encode_properties(msg.properties)))
    got, size = decode_record(rec, check_crc=True)
    msg.store_size = size
    assert size == len(rec)
    assert got == msg
    assert got.tags == "TagA" and got.keys == "k1 k2"
    assert got.msg_id == got.uniq_key
    # Fixed overhead with IPv4 hosts is 91 bytes.
    assert record_size(0, 0, 0, 0) == 91


def test_round_trip_ipv6_hosts() -> None:
    msg = _sample(
        sys_flag=BORNHOST_V6_FLAG | STOREHOST_V6_FLAG,
        born_host=("2001:db8::1", 5),
        store_host=("::1", 10911),
    )
    rec = encode_message_ext(msg)
    assert len(rec) == record_size(msg.sys_flag, len(msg.body), 9, len(P.encode_properties(msg.properties)))
    assert len(rec) == encode_record(topic="TopicTest", body=msg.body, properties=msg.properties).__len__() + 24
    got, _ = decode_record(rec)
    assert got.born_host == ("2001:db8::1", 5)
    assert got.store_host == ("::1", 10911)
    assert len(got.offset_msg_id) == 56


def test_ipv6_host_without_flag_is_refused() -> None:
    with pytest.raises(LocalProtocolError):
        encode_record(topic="T", body=b"", born_host=("2001:db8::1", 1))
    # IPv4-mapped addresses are written as IPv4.
    rec = encode_record(topic="T", body=b"", born_host=("::ffff:10.0.0.1", 1))
    assert decode_record(rec)[0].born_host == ("10.0.0.1", 1)


def test_redraft_keeps_the_message_and_replaces_what_is_named() -> None:
    stored = _sample(sys_flag=TRANSACTION_COMMIT_TYPE, reconsume_times=2, prepared_transaction_offset=77)
    rec = encode_message_ext(stored)
    msg = decode_record(rec)[0]
    draft = redraft(msg)
    assert draft == MessageDraft(
        msg.topic, msg.queue_id, msg.body, msg.flag, msg.properties, msg.sys_flag, msg.born_timestamp,
        msg.born_host, msg.store_host, 2,
    )  # fmt: skip
    assert (draft.prepared_transaction_offset, draft.tags_code, draft.wait) == (0, None, None)
    assert redraft(rec) == draft  # from the record's bytes alike
    moved = redraft(msg, topic="%RETRY%G", queue_id=3, reconsume_times=3, wait=True)
    assert moved == draft._replace(topic="%RETRY%G", queue_id=3, reconsume_times=3, wait=True)
    with pytest.raises(ValueError, match="unexpected field"):
        redraft(msg, queue=1)


def test_encode_draft_sets_the_v6_bits_from_the_hosts() -> None:
    draft = MessageDraft("T", 1, b"body", 5, {"KEYS": "k"}, BORNHOST_V6_FLAG, 123, ("10.0.0.1", 9), ("::1", 10911))
    rec = encode_draft(draft, queue_offset=4, commitlog_offset=4096, store_timestamp=456)
    msg, _ = decode_record(rec, check_crc=True)
    assert msg.sys_flag == STOREHOST_V6_FLAG  # the draft's born bit was wrong: its born host is IPv4
    assert (msg.topic, msg.queue_id, msg.body, msg.flag, msg.properties) == ("T", 1, b"body", 5, {"KEYS": "k"})
    assert (msg.queue_offset, msg.commitlog_offset, msg.born_timestamp, msg.store_timestamp) == (4, 4096, 123, 456)
    assert (msg.born_host, msg.store_host) == (("10.0.0.1", 9), ("::1", 10911))
    assert redraft(msg) == draft._replace(sys_flag=STOREHOST_V6_FLAG)


def test_encode_limits() -> None:
    with pytest.raises(LocalProtocolError):
        encode_record(topic="x" * 128, body=b"")
    with pytest.raises(LocalProtocolError):
        encode_record(topic="", body=b"")
    with pytest.raises(LocalProtocolError):
        encode_record(topic="T", body=b"", properties={"k": "v" * 40000})
    encode_record(topic="x" * 127, body=b"")


def test_v2_magic_is_read() -> None:
    # 5.x v2 records carry a 2-byte topic length; build one by hand from a v1 record.
    v1 = encode_record(topic="T2", body=b"b", properties="a\x01b")
    head = bytearray(v1[: 88 + 1])
    struct.pack_into(">iI", head, 0, len(v1) + 1, MESSAGE_MAGIC_CODE_V2)
    v2 = bytes(head) + struct.pack(">h", 2) + v1[88 + 1 + 1 :]
    got, size = decode_record(v2)
    assert (got.topic, got.body, got.properties, size) == ("T2", b"b", {"a": "b"}, len(v2))


def _prop_text(max_size: int) -> st.SearchStrategy[str]:
    chars = st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",))
    return st.text(alphabet=chars, min_size=1, max_size=max_size)


@given(
    topic=st.text(alphabet="abcXYZ_%|-019", min_size=1, max_size=127),
    body=st.binary(max_size=300),
    props=st.dictionaries(_prop_text(10), _prop_text(20), max_size=5),
    ints=st.tuples(
        st.integers(0, 2**31 - 1),
        st.integers(-(2**31), 2**31 - 1),
        st.integers(0, 2**63 - 1),
        st.integers(0, 2**63 - 1),
        st.sampled_from([0, 1, 2, 4, 8, 0xC, 0x10, 0x20, 0x30, 0x301]),
        st.integers(0, 2**62),
        st.integers(0, 65535),
        st.integers(0, 100),
    ),
)
def test_round_trip_property(topic: str, body: bytes, props: dict[str, str], ints: tuple[int, ...]) -> None:
    qid, flag, qoff, phy, sys_flag, ts, port, recon = ints
    born = ("2001:db8::7", port) if sys_flag & BORNHOST_V6_FLAG else ("192.168.1.9", port)
    store = ("fe80::1", port) if sys_flag & STOREHOST_V6_FLAG else ("10.0.0.1", port)
    msg = _sample(
        topic=topic, body=body, properties=props, queue_id=qid, flag=flag, queue_offset=qoff,
        commitlog_offset=phy, sys_flag=sys_flag, born_timestamp=ts, store_timestamp=ts + 1,
        born_host=born, store_host=store, reconsume_times=recon,
    )  # fmt: skip
    rec = encode_message_ext(msg)
    got, size = decode_record(rec, check_crc=True)
    msg.store_size = size
    assert got == msg
    meta = decode_record_meta(rec)
    assert (meta.size, meta.queue_offset, meta.commitlog_offset, meta.topic) == (len(rec), qoff, phy, topic)
    assert P.decode_properties(meta.properties) == props


# --- malformed input ---------------------------------------------------------------------


def test_malformed_records_raise_protocol_errors() -> None:
    rec = encode_record(topic="T", body=b"hello", properties="a\x01b")
    with pytest.raises(RemoteProtocolError, match="truncated"):
        decode_record(rec[:50])
    with pytest.raises(RemoteProtocolError):
        decode_record(rec[:-1])
    bad_magic = bytearray(rec)
    bad_magic[4:8] = b"\x00\x00\x00\x01"
    with pytest.raises(RemoteProtocolError, match="magic"):
        decode_record(bytes(bad_magic))
    blank = struct.pack(">iI", 100, BLANK_MAGIC_CODE) + bytes(92)
    with pytest.raises(RemoteProtocolError, match="blank"):
        decode_record(blank)
    bigger = bytearray(rec + b"\x00")
    struct.pack_into(">i", bigger, 0, len(rec) + 1)
    with pytest.raises(RemoteProtocolError, match="does not match"):
        decode_record(bytes(bigger))
    bad_crc = bytearray(rec)
    bad_crc[88] ^= 0xFF  # first body byte
    decode_record(bytes(bad_crc))
    with pytest.raises(RemoteProtocolError, match="CRC"):
        decode_record(bytes(bad_crc), check_crc=True)
    with pytest.raises(RemoteProtocolError):
        list(iter_records(rec + rec[:10]))


@settings(max_examples=300)
@given(st.binary(max_size=300), st.integers(0, 299), st.binary(min_size=1, max_size=8))
def test_mutated_records_decode_or_raise_protocol_error(prefix: bytes, at: int, junk: bytes) -> None:
    rec = bytearray(encode_record(topic="Topic", body=prefix, properties="KEYS\x01k\x02TAGS\x01t"))
    at %= len(rec)
    rec[at : at + len(junk)] = junk
    with contextlib.suppress(ProtocolError):
        list(iter_records(bytes(rec)))


@given(st.binary(max_size=200))
def test_random_bytes_decode_or_raise_protocol_error(data: bytes) -> None:
    with contextlib.suppress(ProtocolError):
        list(iter_records(data))


# --- captured vectors ------------------------------------------------------------------------


def test_pull_bodies_from_cpp_client_vectors() -> None:
    root = _vectors()
    files = sorted(root.glob("*/frames/*resp-PULL_MESSAGE.bin"))
    assert files
    decoded = 0
    for path in files:
        _, body = _frame(path.read_bytes())
        if not body:
            continue
        expected = _decoded_bodies(path.parents[1])[f"frames/{path.name}"]["messages"]
        got = list(iter_records(body))
        assert len(got) == len(expected)
        offset = 0
        rebuilt = b""
        for msg, want in zip(got, expected, strict=True):
            assert msg.store_size == want["storeSize"]
            assert msg.body_crc == want["bodyCRC"] == body_crc(msg.body)
            assert msg.queue_id == want["queueId"]
            assert msg.queue_offset == want["queueOffset"]
            assert msg.commitlog_offset == want["commitLogOffset"]
            assert msg.sys_flag == want["sysFlag"]
            assert msg.born_timestamp == want["bornTimestamp"]
            assert f"{msg.born_host[0]}:{msg.born_host[1]}" == want["bornHost"]
            assert msg.store_timestamp == want["storeTimestamp"]
            assert f"{msg.store_host[0]}:{msg.store_host[1]}" == want["storeHost"]
            assert msg.body.decode() == want["body"]
            assert msg.topic == want["topic"]
            assert msg.properties == want["properties"]
            assert msg.msg_id == want["properties"]["UNIQ_KEY"]
            meta = decode_record_meta(body, offset)
            assert meta.properties == want["propertiesRaw"]
            # Re-encoding with the raw properties string gives the same bytes.
            rebuilt += encode_record(
                topic=msg.topic, body=msg.body, queue_id=msg.queue_id, flag=msg.flag,
                properties=meta.properties, queue_offset=msg.queue_offset,
                commitlog_offset=msg.commitlog_offset, sys_flag=msg.sys_flag,
                born_timestamp=msg.born_timestamp, born_host=msg.born_host,
                store_timestamp=msg.store_timestamp, store_host=msg.store_host,
                reconsume_times=msg.reconsume_times,
                prepared_transaction_offset=msg.prepared_transaction_offset,
            )  # fmt: skip
            offset += msg.store_size
            decoded += 1
        assert rebuilt == body
    assert decoded >= 2


def test_batch_body_from_cpp_client_vector() -> None:
    flow = _vectors() / "c_send_batch"
    path = next(flow.glob("frames/*-c2s-broker-SEND_MESSAGE.bin"))
    header, body = _frame(path.read_bytes())
    expected = _decoded_bodies(flow)[f"frames/{path.name}"]["messages"]
    msgs = decode_batch_body(body, topic=header["extFields"]["topic"])
    assert [m.body.decode() for m in msgs] == [e["body"] for e in expected]
    assert [m.properties for m in msgs] == [e["properties"] for e in expected]
    assert all(m.topic == "TopicTest" for m in msgs)
    # Our encoding differs only by the trailing \x02 the C++ client adds to properties.
    again = encode_batch_body([Message(m.topic, m.body, m.flag, m.properties) for m in msgs])
    assert decode_batch_body(again) == [Message("", m.body, m.flag, m.properties) for m in msgs]


def test_batch_items_keep_the_properties_as_sent() -> None:
    """decode_batch_items leaves each item's properties encoded, the C++ client's trailing
    separator included; decode_batch_body is those items decoded."""
    flow = _vectors() / "c_send_batch"
    path = next(flow.glob("frames/*-c2s-broker-SEND_MESSAGE.bin"))
    _, body = _frame(path.read_bytes())
    items = decode_batch_items(body)
    msgs = decode_batch_body(body)
    assert [(i.flag, i.body) for i in items] == [(m.flag, m.body) for m in msgs]
    assert [P.decode_properties(i.properties) for i in items] == [m.properties for m in msgs]
    assert all(i.properties.endswith(b"\x02") for i in items)
    with pytest.raises(RemoteProtocolError):
        decode_batch_items(body[:-1])


def test_may_have_never_misses_a_property() -> None:
    encoded = P.encode_properties({"KEYS": "k", "XDELAY": "1", "WAIT": "DELAY\x01"}).encode()
    keys, wait_tags, delay_tags, delay = (
        P.property_marks(n) for n in (["KEYS"], ["WAIT", "TAGS"], ["DELAY", "TAGS"], ["DELAY"])
    )
    assert P.may_have(encoded, keys) and P.may_have(encoded, wait_tags)
    assert not P.may_have(encoded, delay_tags)  # inside a name or a value is no property
    assert P.may_have(b"DELAY\x013", delay) and P.may_have(b"A\x01b\x02DELAY\x01", delay)
    assert not P.may_have(b"", delay)


def test_compressed_body_from_cpp_client_vector() -> None:
    flow = _vectors() / "a5_compressed_body"
    path = next(flow.glob("frames/*-c2s-broker-SEND_MESSAGE.bin"))
    header, body = _frame(path.read_bytes())
    sys_flag = int(header["extFields"]["sysFlag"])
    assert sys_flag & COMPRESSED_FLAG
    inflated = decompress_body(body, sys_flag)
    assert len(inflated) == 5120
    assert inflated.startswith(b"0123456789abcdef")


# --- batch, compression, ids -----------------------------------------------------------------


def test_batch_round_trip_and_layout() -> None:
    msgs = [Message("", b"a" * i, i, {"KEYS": f"k{i}", "UNIQ_KEY": f"U{i}"}) for i in range(4)]
    data = encode_batch_body(msgs)
    assert decode_batch_body(data) == msgs
    # totalSize = 20 + bodyLength + 2 + propertiesLength; magic and CRC are written as 0.
    total, magic, crc, flag, blen = struct.unpack_from(">iiiii", data, 0)
    assert (magic, crc, flag, blen) == (0, 0, 0, 0)
    assert total == 20 + 0 + 2 + len("KEYS\x01k0\x02UNIQ_KEY\x01U0")
    with pytest.raises(RemoteProtocolError):
        decode_batch_body(data[:-1])
    with pytest.raises(RemoteProtocolError):
        decode_batch_body(data[:10])


def test_decompress_body() -> None:
    raw = b"x" * 10000
    z = zlib.compress(raw, 5)
    assert decompress_body(z, COMPRESSED_FLAG) == raw
    assert decompress_body(z, COMPRESSED_FLAG | COMPRESSION_ZLIB) == raw
    assert decompress_body(b"plain", 0) == b"plain"
    with pytest.raises(RemoteProtocolError, match="corrupt LZ4"):  # zlib bytes marked LZ4
        decompress_body(z, COMPRESSED_FLAG | COMPRESSION_LZ4)
    with pytest.raises(RemoteProtocolError, match="unsupported"):
        decompress_body(z, COMPRESSED_FLAG | 0x400)
    with pytest.raises(RemoteProtocolError, match="corrupt"):
        decompress_body(b"not zlib", COMPRESSED_FLAG)
    with pytest.raises(RemoteProtocolError, match="exceeds"):
        decompress_body(z, COMPRESSED_FLAG, max_size=100)


def test_offset_msg_id() -> None:
    mid = make_offset_msg_id("127.0.0.1", 30911, 5000)
    assert mid == "7F000001000078BF0000000000001388"
    assert parse_offset_msg_id(mid) == ("127.0.0.1", 30911, 5000)
    assert parse_offset_msg_id(mid.lower()) == ("127.0.0.1", 30911, 5000)
    v6 = make_offset_msg_id("::1", 10911, 2**40)
    assert len(v6) == 56 and parse_offset_msg_id(v6) == ("::1", 10911, 2**40)
    with pytest.raises(RemoteProtocolError):
        parse_offset_msg_id("ABC")
    with pytest.raises(RemoteProtocolError):
        parse_offset_msg_id("Z" * 32)


def test_msg_id_falls_back_to_offset_id() -> None:
    msg = _sample(properties={})
    assert msg.msg_id == make_offset_msg_id("127.0.0.1", 10911, 123456)


def test_transaction_type() -> None:
    assert transaction_type(TRANSACTION_PREPARED_TYPE | COMPRESSED_FLAG) == TRANSACTION_PREPARED_TYPE
