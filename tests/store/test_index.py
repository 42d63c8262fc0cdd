"""Index files: RocketMQ's hash-slot layout, chains, time ranges, rolling."""

from __future__ import annotations

from pathlib import Path

from rmq.protocol.message import TRANSACTION_ROLLBACK_TYPE
from rmq.protocol.properties import java_string_hash
from rmq.store.formats import INDEX_ENTRY, INDEX_HEADER, INDEX_SLOT
from rmq.store.index import IndexFile, IndexService, index_key_hash

T0 = 1_700_000_000_000


def test_key_hash_is_abs_java_hash_with_min_value_as_zero() -> None:
    assert java_string_hash("polygenelubricants") == -(2**31)
    assert index_key_hash("polygenelubricants") == 0
    assert index_key_hash("TagA") == 2598919
    h = java_string_hash("T#k-1")
    assert index_key_hash("T#k-1") == abs(h)


def test_entries_chain_through_slots(tmp_path: Path) -> None:
    f = IndexFile(str(tmp_path / "idx"), 4, 10)
    # Slot collisions: hashes 1, 5 and 9 all land in slot 1 (mod 4).
    assert f.put(1, 100, T0)
    assert f.put(5, 200, T0 + 1000)
    assert f.put(9, 300, T0 + 2500)
    assert f.put(1, 400, T0 + 4000)
    f.write_header()
    raw = f.mf.read(0, f.mf.size)
    assert INDEX_HEADER.unpack_from(raw, 0) == (T0, T0 + 4000, 100, 400, 1, 5)
    assert INDEX_SLOT.unpack_from(raw, 40 + 4)[0] == 4  # newest entry of slot 1
    entries = [INDEX_ENTRY.unpack_from(raw, 40 + 16 + 20 * i) for i in range(1, 5)]
    assert entries == [(1, 100, 0, 0), (5, 200, 1, 1), (9, 300, 2, 2), (1, 400, 4, 3)]
    out: list[int] = []
    f.select(1, 10, 0, 2**62, out)
    assert out == [400, 100]  # newest first, other hashes skipped
    out = []
    f.select(1, 10, T0 + 3000, T0 + 5000, out)
    assert out == [400]
    out = []
    f.select(1, 1, 0, 2**62, out)
    assert out == [400]
    # Full at index_num - 1 entries (entry 0 is never used).
    for i in range(5):
        assert f.put(2, 500 + i, T0 + 5000) is (i < 5)
    assert f.full
    assert not f.put(2, 600, T0)
    f.write_header()
    f.close()
    again = IndexFile(str(tmp_path / "idx"), 4, 10)
    assert (again.index_count, again.end_phy_offset, again.full) == (10, 504, True)


def test_service_rolls_and_queries_across_files(tmp_path: Path) -> None:
    now = [T0]
    svc = IndexService(str(tmp_path / "index"), 8, 5, lambda: now[0])
    for i in range(20):
        now[0] = T0 + i * 1000
        svc.build("T", i * 100, now[0], 0, f"k{i % 3} all", f"U{i}")
    assert len(svc.files) >= 10
    names = sorted(p.name for p in (tmp_path / "index").iterdir())
    assert len(set(names)) == len(names) == len(svc.files)
    found, last_ts, last_phy = svc.query("T", "all", 64, 0, 2**62)
    assert found == [i * 100 for i in range(19, -1, -1)]
    assert (last_ts, last_phy) == (T0 + 19_000, 1900)
    assert svc.query("T", "k1", 64, 0, 2**62)[0] == [i * 100 for i in range(19, -1, -1) if i % 3 == 1]
    assert svc.query("T", "U7", 64, 0, 2**62)[0] == [700]
    assert svc.query("T", "all", 64, T0 + 5000, T0 + 8000)[0] == [800, 700, 600, 500]
    # A later file starts where the previous one ended.
    assert svc.files[1].begin_phy_offset >= svc.files[0].end_phy_offset
    # Records already indexed are skipped when replayed.
    count = svc.files[-1].index_count
    svc.build("T", 1900, now[0], 0, "again", None)
    assert svc.files[-1].index_count == count
    deleted = svc.delete_expired(1000)
    assert deleted > 0
    assert all(f.end_phy_offset >= 1000 for f in svc.files)
    assert svc.query("T", "all", 64, 0, 2**62)[0][-1] >= 900


def test_header_behind_its_entries_is_caught_up(tmp_path: Path) -> None:
    path = str(tmp_path / "idx")
    f = IndexFile(path, 4, 20)
    for i in range(6):
        assert f.put(1, 100 * i, T0 + 1000 * i)  # all in one slot: one chain
        if i == 3:
            f.write_header()  # the header is written, then three more entries are not counted
    f.close()
    again = IndexFile(path, 4, 20)
    assert (again.index_count, again.end_phy_offset, again.end_timestamp) == (7, 500, T0 + 5000)
    assert again.put(1, 600, T0 + 6000)
    out: list[int] = []
    again.select(1, 20, 0, 2**62, out)
    assert out == [600, 500, 400, 300, 200, 100, 0]  # the chain is whole


def test_build_all_writes_what_one_record_at_a_time_writes(tmp_path: Path) -> None:
    """A dispatch pass indexes its records in one call: the files (rolled mid-pass included)
    are byte for byte those of indexing each record on its own, replays and ROLLBACK records
    skipped alike."""
    flags = {7: TRANSACTION_ROLLBACK_TYPE}
    records = [
        ("T", i * 100, T0 + i * 700, flags.get(i, 0), f"k{i % 3} all" if i % 4 else None, f"U{i}") for i in range(1, 24)
    ]
    records.insert(5, ("T", 300, T0, 0, "replayed", "U3"))  # at or before last_indexed: skipped
    one = IndexService(str(tmp_path / "one"), 8, 7, lambda: T0)
    for r in records:
        one.build(*r)
    many = IndexService(str(tmp_path / "many"), 8, 7, lambda: T0)
    many.build_all(records[:12])
    many.build_all(records[12:])
    assert len(many.files) == len(one.files) > 3
    assert many.last_indexed == one.last_indexed == 2300
    for a, b in zip(one.files, many.files, strict=True):
        assert a.mf.read(0, a.mf.size) == b.mf.read(0, b.mf.size)
    assert many.query("T", "all", 64, 0, 2**62)[0] == [i * 100 for i in range(23, 0, -1) if i % 4 and i != 7]
    assert many.query("T", "replayed", 64, 0, 2**62)[0] == []


def test_producer_ids_hash_as_the_whole_key(tmp_path: Path) -> None:
    """32-character UNIQ_KEYs (a producer's ids) are hashed from a cached head: each entry
    still carries the hash of its whole ``topic#key``, and queries find every one."""
    svc = IndexService(str(tmp_path / "index"), 64, 100, lambda: T0)
    heads = ["7F0000010A2B1C2D3E4F", "7F0000010A2B1C2D3E4F", "C0A80001ÄB1C2D3E4F00", "7F000001\U0001f600B1C2D3E4F00"]
    keys = [f"{heads[i % 4]}{i:012X}" for i in range(40)]
    assert all(len(k) == 32 for k in keys)
    svc.build_all([("Topic", 100 * (i + 1), T0, 0, None, k) for i, k in enumerate(keys)])
    f = svc.files[0]
    written = [INDEX_ENTRY.unpack_from(f.mf.mm, f._entries_at + n * INDEX_ENTRY.size)[0] for n in range(1, 41)]
    assert written == [index_key_hash(f"Topic#{k}") for k in keys]
    for i, k in enumerate(keys):
        assert svc.query("Topic", k, 4, 0, 2**62)[0] == [100 * (i + 1)]


def _id_hashing_to_min_value(topic: str) -> str:
    """A 32-character hex id whose ``topic#id`` Java hash is Integer.MIN_VALUE: a lead of 28
    characters searched for, its last 4 solved (their share of the hash is a*31**3 + b*31**2
    + c*31 + d)."""
    digits = b"0123456789ABCDEF"
    tails = {a * 29_791 + b * 961 + c * 31 + d: bytes((a, b, c, d)).decode() for a in digits for b in digits
             for c in digits for d in digits}  # fmt: skip
    for n in range(1_000_000):
        lead = f"7F0000010A2B1C2D3E4F{n:08X}"
        head = java_string_hash(f"{topic}#{lead}") & 0xFFFFFFFF
        tail = tails.get((0x80000000 - head * 923_521) % 2**32)
        if tail is not None:
            return lead + tail
    raise AssertionError("no id found")


def test_producer_id_hashing_to_min_value_is_indexed_under_zero(tmp_path: Path) -> None:
    """The entry of an id whose hash is Integer.MIN_VALUE carries 0, as IndexFile's
    indexKeyHashMethod makes it, on the path that hashes only an id's last 4 characters."""
    key = _id_hashing_to_min_value("Topic")
    assert java_string_hash(f"Topic#{key}") == -(2**31)
    svc = IndexService(str(tmp_path / "index"), 64, 100, lambda: T0)
    svc.build_all([("Topic", 100, T0, 0, None, key)])
    f = svc.files[0]
    assert INDEX_ENTRY.unpack_from(f.mf.mm, f._entries_at + INDEX_ENTRY.size)[0] == 0
    assert svc.query("Topic", key, 4, 0, 2**62)[0] == [100]
