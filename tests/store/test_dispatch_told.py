"""Dispatch from what the append told (Dispatcher.appended): a plain send's record is not
parsed back, and that must change nothing a consumer, a key query or a listener sees."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rmq.protocol.constants import SCHEDULE_TOPIC
from rmq.protocol.message import TRANSACTION_PREPARED_TYPE, BatchItem
from rmq.store import MessageDraft, MessageStore
from rmq.store import dispatch as dispatch_module
from rmq.store.append import batch_drafts

from .conftest import T0, FakeClock

BORN, STORE = ("10.0.0.1", 4000), ("10.0.0.2", 10911)


class Heard:
    """An arrival listener that keeps what it was told."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def arriving(self, *args: Any) -> None:
        self.calls.append(args)


def drafts(n: int) -> list[MessageDraft]:
    """Sends of every shape dispatch treats apart: TAGS, KEYS and UNIQ_KEY present or not,
    values that hold a separator or are empty or None, properties given as text, a delay
    level into the schedule topic, a prepared transaction, an IPv6 born host."""
    props: list[Any] = [
        {"TAGS": f"t{n % 3}", "KEYS": f"k{n} shared", "UNIQ_KEY": f"7F00000100002A9F0000{n:012X}", "CLUSTER": "C"},
        {"UNIQ_KEY": f"7F00000100002A9F0000{n:012X}", "CLUSTER": "C"},
        {"TAGS": "a\x02KEYS\x01smuggled", "UNIQ_KEY": f"U{n}"},  # decodes to other values: parsed
        {"TAGS": "", "KEYS": "", "UNIQ_KEY": ""},
        {"TAGS": "t", "KEYS": None},
        f"TAGS\x01text\x02KEYS\x01k{n}",
        {},
        None,
    ]
    out = [
        MessageDraft("A", n % 2, b"body-%d" % n, properties=p, born_timestamp=T0, born_host=BORN, store_host=STORE)
        for p in props
    ]
    out.append(
        MessageDraft(
            SCHEDULE_TOPIC,
            2,
            b"later",
            properties={"DELAY": "3", "TAGS": "d", "REAL_TOPIC": "A"},
            born_host=BORN,
            store_host=STORE,
        )  # fmt: skip
    )
    out.append(
        MessageDraft(
            "A",
            0,
            b"half",
            properties={"TAGS": "h", "TRAN_MSG": "true"},
            sys_flag=TRANSACTION_PREPARED_TYPE,
            born_host=BORN,
            store_host=STORE,
        )  # fmt: skip
    )
    out.append(MessageDraft("A", 1, b"v6", properties={"TAGS": "six"}, born_host=("::1", 4000), store_host=STORE))
    return out


def files_of(root: Path) -> dict[str, bytes]:
    out = {}
    for sub in ("consumequeue", "index"):
        for dirpath, _, names in os.walk(root / sub):
            for name in names:
                path = Path(dirpath) / name
                out[str(path.relative_to(root))] = path.read_bytes()
    return out


class TwoStores:
    """One store dispatching from what its appends told, one (told nothing) parsing every
    record, given the same appends: what each parsed and heard."""

    def __init__(self, open_store: Any, root: Path) -> None:
        self.told: MessageStore = open_store(root=root / "told")
        self.parsed: MessageStore = open_store(root=root / "parsed")
        self.heard = {self.told: Heard(), self.parsed: Heard()}
        for store, heard in self.heard.items():
            store.dispatcher.listener = heard
        self.parses = {self.told: 0, self.parsed: 0}
        self.used = 0  # records dispatch took as told

    def append_and_dispatch(self, append: Callable[[MessageStore], None], monkeypatch: Any) -> None:
        for store in self.heard:
            append(store)
        self.used += len(self.told.dispatcher.appended)
        self.parsed.dispatcher.appended.clear()
        real_parse = dispatch_module.parse_record
        for store in self.heard:

            def counted(*args: Any, store: MessageStore = store) -> Any:
                self.parses[store] += 1
                return real_parse(*args)

            monkeypatch.setattr(dispatch_module, "parse_record", counted)
            store.dispatch_pending()
            monkeypatch.setattr(dispatch_module, "parse_record", real_parse)
            assert not store.dispatcher.appended

    def found_by_key(self, key: str, max_num: int) -> list[Any]:
        return [store.query_message("A", key, max_num, 0, 2**62).records for store in self.heard]

    def close(self) -> None:
        for store in self.heard:
            store.close()


def test_told_records_dispatch_as_parsed_ones(
    open_store: Any, clock: FakeClock, tmp_path: Path, monkeypatch: Any
) -> None:
    """Two stores take the same appends; one dispatches from what the appends told, the
    other (told nothing) parses every record: their consume queues, index files and what
    their listeners heard are the same."""
    two = TwoStores(open_store, tmp_path)
    for n in range(30):
        clock.advance(7)

        def append(store: MessageStore, n: int = n) -> None:
            results = store.appender.put_group(drafts(n))
            assert all(r.ok for r in results)

        two.append_and_dispatch(append, monkeypatch)
    assert two.used >= 30 * 5  # the dict properties that decode back were told
    # and taken: only the newest record of each queue a pass reached is read again, for its
    # listener's properties (two queues and the schedule topic's)
    assert two.parses[two.told] <= two.parses[two.parsed] - two.used + 30 * 3
    assert two.heard[two.told].calls == two.heard[two.parsed].calls
    found = two.found_by_key("shared", 64)
    assert found[0] == found[1] and len(found[0]) == 30
    two.close()
    assert files_of(tmp_path / "told") == files_of(tmp_path / "parsed")


def test_a_record_rewritten_since_it_was_told_is_parsed(open_store: Any, clock: FakeClock) -> None:
    """What was told about an offset counts only while the record's head there says the
    same (size, body CRC, queue, queue offset, sysFlag, store time): otherwise the record
    is parsed."""
    store: MessageStore = open_store()
    assert store.put(MessageDraft("A", 0, b"first", born_host=BORN, store_host=STORE)).ok  # the file exists
    (result,) = store.appender.put_group(
        [MessageDraft("A", 0, b"x", properties={"TAGS": "real"}, born_host=BORN, store_host=STORE)]
    )
    known = store.dispatcher.appended[result.wrote_offset]
    # the queue offset one off, as a record written at the same place after a cut may be
    store.dispatcher.appended[result.wrote_offset] = (*known[:4], known[4] + 1, *known[5:8], "told", None, None)
    store.dispatch_pending()
    _, entry = store.read_consume_queue("A", 0, 0, 4)
    assert entry[3] == store.dispatcher.tags_code("real")


def test_a_cut_forgets_what_was_told_past_it(open_store: Any, clock: FakeClock) -> None:
    store: MessageStore = open_store()
    assert store.put(MessageDraft("A", 0, b"first", born_host=BORN, store_host=STORE)).ok  # the file exists
    results = store.appender.put_group(
        [MessageDraft("A", 0, b"x%d" % i, properties={"TAGS": "t"}, born_host=BORN, store_host=STORE) for i in range(4)]
    )
    store.dispatch_pending()
    more = store.appender.put_group(
        [MessageDraft("A", 0, b"y%d" % i, properties={"TAGS": "t"}, born_host=BORN, store_host=STORE) for i in range(4)]
    )
    assert len(store.dispatcher.appended) == 4
    store.truncate_to(more[2].wrote_offset)
    assert sorted(store.dispatcher.appended) == [more[0].wrote_offset, more[1].wrote_offset]
    assert results[0].ok


def test_what_dispatch_went_past_is_dropped_once_too_much_is_told(
    open_store: Any, clock: FakeClock, monkeypatch: Any
) -> None:
    """Offsets dispatch went past without reading them (after a cut, say) are dropped when the
    table is full, so appends are told again; a table full of records dispatch has not reached
    yet (held back) stays, and the appends past it are parsed later."""
    monkeypatch.setattr("rmq.store.append._APPENDED_LIMIT", 8)
    store: MessageStore = open_store()
    assert store.put(MessageDraft("A", 0, b"first", born_host=BORN, store_host=STORE)).ok
    store.dispatch_pending()
    stale = {o: (0,) * 11 for o in range(1, 11)}  # below the reput offset: never to be read
    store.dispatcher.appended.update(stale)
    (result,) = store.appender.put_group([MessageDraft("A", 0, b"x", born_host=BORN, store_host=STORE)])
    assert list(store.dispatcher.appended) == [result.wrote_offset]
    store.dispatcher.limit = store.dispatcher.reput_offset  # dispatch held back from here
    for i in range(12):
        store.appender.put_group([MessageDraft("A", 0, b"y%d" % i, born_host=BORN, store_host=STORE)])
    assert len(store.dispatcher.appended) == 9  # one past the bound, then no more
    store.dispatcher.limit = None
    store.dispatch_pending()
    assert store.get_max_offset_in_queue("A", 0) == 14


def batch_items(n: int) -> list[BatchItem]:
    """A batch's items as decode_batch_items gives them, properties still encoded: TAGS,
    KEYS and UNIQ_KEY present or not, an empty value, bytes that are not UTF-8, none at all,
    and ones ending in a separator (the C++ client's)."""
    return [
        BatchItem(0, b"b0-%d" % n, b"TAGS\x01t%d\x02KEYS\x01k%d shared\x02UNIQ_KEY\x01U%d" % (n % 3, n, n)),
        BatchItem(0, b"b1-%d" % n, b"UNIQ_KEY\x01V%d\x02" % n),
        BatchItem(0, b"b2-%d" % n, b"TAGS\x01\xff\xfe\x02KEYS\x01shared"),
        BatchItem(0, b"b3-%d" % n, b"TAGS\x01\x02KEYS\x01"),
        BatchItem(0, b"b4-%d" % n, b""),
    ]


def test_told_batch_records_dispatch_as_parsed_ones(
    open_store: Any, clock: FakeClock, tmp_path: Path, monkeypatch: Any
) -> None:
    """A batch's records keep their items' properties as the bytes that came: the append
    tells dispatch what decoding those gives, and nothing a consumer, a key query or a
    listener sees changes against a store that parses every record."""
    two = TwoStores(open_store, tmp_path)
    for n in range(30):
        clock.advance(7)
        head = MessageDraft("A", n % 2, b"", properties={"CLUSTER": "C"}, born_timestamp=T0, born_host=BORN,
                            store_host=STORE)  # fmt: skip

        def append(store: MessageStore, head: MessageDraft = head, n: int = n) -> None:
            assert store.appender.put_many(batch_drafts(head, batch_items(n))).ok

        two.append_and_dispatch(append, monkeypatch)
    assert two.used == 30 * 5  # every item told
    assert two.parses[two.told] <= 30 * 2  # read again only for a listener's properties
    assert two.parses[two.parsed] >= 30 * 5
    assert two.heard[two.told].calls == two.heard[two.parsed].calls
    found = two.found_by_key("shared", 128)
    assert found[0] == found[1] and len(found[0]) == 60
    two.close()
    assert files_of(tmp_path / "told") == files_of(tmp_path / "parsed")
