"""The construct schema as an oracle: it must agree with the struct codecs byte for byte."""

from __future__ import annotations

import json
import struct

import construct
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmq.protocol import message as M
from rmq.protocol import properties as P
from rmq.protocol import schema as S
from rmq.protocol.errors import ProtocolError
from rmq.store import formats as F
from tests.conftest import VECTORS_DIR

VECTORS = VECTORS_DIR


def test_fixed_sizes_agree() -> None:
    assert S.CQ_ENTRY.sizeof() == F.CQ_ENTRY.size == 20
    assert S.INDEX_HEADER.sizeof() == F.INDEX_HEADER.size == 40
    assert S.INDEX_SLOT.sizeof() == F.INDEX_SLOT.size == 4
    assert S.INDEX_ENTRY.sizeof() == F.INDEX_ENTRY.size == 20
    assert S.CHECKPOINT.sizeof() == F.CHECKPOINT_FILE_SIZE == 4096
    assert S.BLANK_RECORD.sizeof() == F.BLANK.size == F.END_FILE_MIN_BLANK_LENGTH == 8
    assert S.CHECKPOINT_RMQ_MAGIC == F.CHECKPOINT_RMQ_MAGIC
    assert M.HEAD_V4.size == 88 and M.RECORD_OVERHEAD_V4 == 91
    assert (S.MESSAGE_MAGIC_CODE, S.BLANK_MAGIC_CODE) == (M.MESSAGE_MAGIC_CODE, M.BLANK_MAGIC_CODE)


def _host_of(parsed: construct.Container, v6: bool) -> tuple[str, int]:
    return M.decode_host(bytes(parsed.address) + struct.pack(">i", parsed.port))


def _assert_same(parsed: construct.Container, msg: M.MessageExt, raw_props: str) -> None:
    assert parsed.total_size == msg.store_size
    assert parsed.body_crc == msg.body_crc
    assert parsed.queue_id == msg.queue_id
    assert parsed.flag == msg.flag
    assert parsed.queue_offset == msg.queue_offset
    assert parsed.physical_offset == msg.commitlog_offset
    assert parsed.sys_flag == msg.sys_flag
    assert parsed.born_timestamp == msg.born_timestamp
    assert _host_of(parsed.born_host, False) == msg.born_host
    assert parsed.store_timestamp == msg.store_timestamp
    assert _host_of(parsed.store_host, False) == msg.store_host
    assert parsed.reconsume_times == msg.reconsume_times
    assert parsed.prepared_transaction_offset == msg.prepared_transaction_offset
    assert parsed.body == msg.body
    assert parsed.topic == msg.topic
    assert parsed.properties == raw_props
    assert P.decode_properties(parsed.properties) == msg.properties


_text = st.text(
    alphabet=st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), min_size=1, max_size=12
)


def _build_record(
    topic: str, body: bytes, props: dict[str, str], qid: int, flag: int, qoff: int, phy: int, sys_flag: int,
    ts: int, port: int,
) -> bytes:  # fmt: skip
    return M.encode_record(
        topic=topic, body=body, properties=props, queue_id=qid, flag=flag, queue_offset=qoff,
        commitlog_offset=phy, sys_flag=sys_flag, born_timestamp=ts, store_timestamp=ts + 5,
        born_host=("2001:db8::2", port) if sys_flag & M.BORNHOST_V6_FLAG else ("172.16.0.3", port),
        store_host=("::1", port + 1) if sys_flag & M.STOREHOST_V6_FLAG else ("127.0.0.1", port + 1),
    )  # fmt: skip


_records = st.builds(
    _build_record,
    st.text(alphabet="abcXYZ%|_-09", min_size=1, max_size=127),
    st.binary(max_size=200),
    st.dictionaries(_text, _text, max_size=4),
    st.integers(0, 2**31 - 1),
    st.integers(-(2**31), 2**31 - 1),
    st.integers(0, 2**63 - 1),
    st.integers(0, 2**63 - 1),
    st.sampled_from([0, 1, 2, 0x4, 0x8, 0x10, 0x20, 0x30]),
    st.integers(0, 2**60),
    st.integers(0, 60000),
)


@given(_records)
def test_record_struct_and_construct_agree(rec: bytes) -> None:
    msg, _ = M.decode_record(rec, check_crc=True)
    parsed = S.COMMITLOG_RECORD.parse(rec)
    _assert_same(parsed, msg, M.decode_record_meta(rec).properties)
    assert S.COMMITLOG_RECORD.build(parsed) == rec


@settings(max_examples=400)
@given(_records, st.integers(0, 10_000), st.binary(min_size=1, max_size=6))
def test_mutated_records_struct_agrees_or_raises(rec: bytes, at: int, junk: bytes) -> None:
    data = bytearray(rec)
    at %= len(data)
    data[at : at + len(junk)] = junk
    data = bytes(data)
    try:
        parsed = S.COMMITLOG_RECORD.parse(data)
    except construct.ConstructError:
        parsed = None
    try:
        msg, _ = M.decode_record(data)
    except ProtocolError:
        assert parsed is None, "the struct codec refused a record the schema accepts"
        return
    if parsed is None:
        # Only undecodable UTF-8 is accepted by the struct codec (replaced, as Java does).
        assert "\ufffd" in msg.topic or "\ufffd" in M.decode_record_meta(data).properties
        return
    _assert_same(parsed, msg, M.decode_record_meta(data).properties)


def test_vectors_parse_with_the_schema() -> None:
    assert VECTORS.is_dir(), f"captured vectors missing at {VECTORS}"
    seen = 0
    for path in sorted(VECTORS.glob("*/frames/*.bin")):
        data = path.read_bytes()
        frame = S.REMOTING_FRAME.parse(data)
        assert frame.length == len(data) - 4
        assert frame.serialize_type == 0
        json.loads(frame.header)
        if "resp-PULL_MESSAGE" in path.name and frame.body:
            parsed = S.RECORDS.parse(frame.body)
            ours = list(M.iter_records(frame.body))
            assert len(parsed) == len(ours)
            offset = 0
            for p, m in zip(parsed, ours, strict=True):
                _assert_same(p, m, M.decode_record_meta(frame.body, offset).properties)
                offset += m.store_size
                seen += 1
        if path.parent.parent.name == "c_send_batch" and "c2s-broker-SEND_MESSAGE" in path.name:
            items = S.BATCH_BODY.parse(frame.body)["items"]
            ours_b = M.decode_batch_body(frame.body)
            assert [(i.flag, i.body, P.decode_properties(i.properties)) for i in items] == [
                (m.flag, m.body, m.properties) for m in ours_b
            ]
    assert seen >= 2


_batch_items = st.lists(
    st.tuples(st.integers(-(2**31), 2**31 - 1), st.binary(max_size=50), st.dictionaries(_text, _text, max_size=3)),
    max_size=5,
)


@given(_batch_items)
def test_batch_body_agrees(items: list[tuple[int, bytes, dict[str, str]]]) -> None:
    data = M.encode_batch_body([M.Message("", b, f, p) for f, b, p in items])
    parsed = S.BATCH_BODY.parse(data)["items"]
    assert [(i.flag, i.body, P.decode_properties(i.properties)) for i in parsed] == items
    assert S.BATCH_BODY.build({"items": parsed}) == data


def test_blank_record_agrees() -> None:
    raw = F.BLANK.pack(1234, F.BLANK_MAGIC)
    assert S.BLANK_RECORD.parse(raw).remaining == 1234
    assert S.BLANK_RECORD.build({"remaining": 1234}) == raw


_i64 = st.integers(-(2**63), 2**63 - 1)
_i32 = st.integers(-(2**31), 2**31 - 1)


@given(_i64, _i32, _i64)
def test_cq_entry_agrees(phy: int, size: int, tags: int) -> None:
    raw = F.CQ_ENTRY.pack(phy, size, tags)
    p = S.CQ_ENTRY.parse(raw)
    assert (p.commitlog_offset, p.size, p.tags_code) == (phy, size, tags)
    assert S.CQ_ENTRY.build(p) == raw


@given(st.tuples(_i64, _i64, _i64, _i64, _i32, _i32), st.tuples(_i32, _i64, _i32, _i32))
def test_index_formats_agree(header: tuple[int, ...], entry: tuple[int, ...]) -> None:
    raw = F.INDEX_HEADER.pack(*header)
    p = S.INDEX_HEADER.parse(raw)
    names = ("begin_timestamp", "end_timestamp", "begin_phy_offset", "end_phy_offset", "hash_slot_count", "index_count")
    assert tuple(p[n] for n in names) == header
    assert S.INDEX_HEADER.build(p) == raw
    raw_e = F.INDEX_ENTRY.pack(*entry)
    e = S.INDEX_ENTRY.parse(raw_e)
    assert (e.key_hash, e.phy_offset, e.time_diff, e.prev_index) == entry
    assert S.INDEX_SLOT.parse(F.INDEX_SLOT.pack(entry[0])).index == entry[0]


@given(_i64, _i64, _i64, _i64, _i64, _i64, _i64)
def test_checkpoint_agrees(a: int, b: int, c: int, d: int, e: int, lo: int, io: int) -> None:
    buf = bytearray(F.CHECKPOINT_FILE_SIZE)
    F.CHECKPOINT.pack_into(buf, 0, a, b, c, d, e)
    F.CHECKPOINT_RMQ.pack_into(buf, F.CHECKPOINT_RMQ_OFFSET, F.CHECKPOINT_RMQ_MAGIC, c, lo, io)
    p = S.CHECKPOINT.parse(bytes(buf))
    assert (p.physic_msg_timestamp, p.logics_msg_timestamp, p.index_msg_timestamp) == (a, b, c)
    assert (p.master_flushed_offset, p.confirm_phy_offset) == (d, e)
    assert (p.rmq_magic, p.physic_offset, p.logics_offset, p.index_offset) == (F.CHECKPOINT_RMQ_MAGIC, c, lo, io)
    assert S.CHECKPOINT.build(p) == bytes(buf)


def test_rocketmq_header_schema() -> None:
    empty = S.ROCKETMQ_HEADER.build(
        {"code": 0, "language": 0, "version": 0, "opaque": 0, "flag": 0, "remark": "", "ext_fields": []}
    )
    assert len(empty) == 21  # PROTOCOL.md 1.3: minimum header
    hdr = {
        "code": 10, "language": 1, "version": 409, "opaque": 7, "flag": 0, "remark": "hi",
        "ext_fields": [{"key": "topic", "value": "T"}, {"key": "queueId", "value": "3"}],
    }  # fmt: skip
    raw = S.ROCKETMQ_HEADER.build(hdr)
    p = S.ROCKETMQ_HEADER.parse(raw)
    assert (p.code, p.version, p.remark) == (10, 409, "hi")
    assert {e.key: e.value for e in p.ext_fields} == {"topic": "T", "queueId": "3"}
    codec = pytest.importorskip("rmq.protocol.header_codec")
    encode_binary = getattr(codec, "encode_binary", None)
    if encode_binary is None:
        pytest.skip("header_codec.encode_binary not available")
    assert encode_binary(10, 1, 409, 7, 0, "hi", {"topic": "T", "queueId": "3"}) == raw


def test_remoting_frame_schema() -> None:
    header = b'{"code":0}'
    raw = struct.pack(">iI", 4 + len(header) + 3, len(header)) + header + b"abc"
    p = S.REMOTING_FRAME.parse(raw)
    assert (p.serialize_type, p.header, p.body) == (0, header, b"abc")
