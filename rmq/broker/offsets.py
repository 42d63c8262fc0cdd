"""Consumer offsets: `{"offsetTable":{"topic@group":{queueId:offset}}}` in config/consumerOffset.json.

Offsets are consume-queue indexes: the next message a group will read. The file uses
fastjson's unquoted integer keys, so a Java broker can read our store and we can read
its. `writer` (jsonfile.CoalescingWriter, run by the controller) writes the table within
5 s of a change (RocketMQ's flushConsumerOffsetInterval), in a worker thread; the
controller writes it once more on stop.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rmq.protocol import body
from rmq.protocol.bodies.offsets import ConsumerOffsetSerializeWrapper

from .jsonfile import CoalescingWriter, read_json

log = logging.getLogger("rmq.broker.offsets")

SEPARATOR = "@"
WRITE_DELAY = 5.0  # seconds (flushConsumerOffsetInterval): offsets change with every pull


class ConsumerOffsetManager:
    def __init__(self, config_dir: Path) -> None:
        self.path = config_dir / "consumerOffset.json"
        self._table: dict[str, dict[int, int]] = {}
        self.writer = CoalescingWriter(self.path, self._snapshot, delay=WRITE_DELAY)

    # -- persistence ----------------------------------------------------------------------

    def load(self) -> None:
        loaded = read_json(self.path, ConsumerOffsetSerializeWrapper.from_json)
        if loaded is not None:
            self._table = loaded.offset_table

    def encode(self) -> bytes:
        """The file and GET_ALL_CONSUMER_OFFSET body, in fastjson's dialect."""
        return body.dumps(ConsumerOffsetSerializeWrapper(self._table).to_json(), legacy=True)

    def persist(self) -> None:
        """Write the file now, on this thread (shutdown). Raises OSError."""
        self.writer.flush()

    @property
    def dirty(self) -> bool:
        return self.writer.dirty

    def _snapshot(self) -> Iterator[bytes]:
        """The file's content as pieces. The keys are copied now; each entry is encoded with
        its offsets when its turn comes (newer ones, if they moved meanwhile)."""
        return ConsumerOffsetSerializeWrapper(dict(self._table)).pieces()

    def sync_from_master(self, obj: Any) -> None:
        """A slave takes its master's offsets (GET_ALL_CONSUMER_OFFSET body), as RocketMQ's
        SlaveSynchronize does. Raises ValueError if malformed."""
        try:
            table = ConsumerOffsetSerializeWrapper.from_json(obj).offset_table
        except ValueError as exc:
            raise ValueError(f"bad consumer offsets from master: {exc}") from None
        if table != self._table:
            self._table = table
            self.writer.changed()

    # -- offsets --------------------------------------------------------------------------

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        queues = self._table.setdefault(f"{topic}{SEPARATOR}{group}", {})
        if queues.get(queue_id) != offset:
            queues[queue_id] = offset
            self.writer.changed()

    def query(self, group: str, topic: str, queue_id: int) -> int:
        """The committed offset, or -1 when the group never committed one for this queue."""
        queues = self._table.get(f"{topic}{SEPARATOR}{group}")
        if queues is None:
            return -1
        return queues.get(queue_id, -1)

    def offsets_of(self, group: str, topic: str) -> dict[int, int]:
        return dict(self._table.get(f"{topic}{SEPARATOR}{group}", {}))

    def groups_of_topic(self, topic: str) -> set[str]:
        out = set()
        for key in self._table:
            t, _, g = key.partition(SEPARATOR)
            if t == topic:
                out.add(g)
        return out

    def topics_of_group(self, group: str) -> set[str]:
        out = set()
        for key in self._table:
            t, _, g = key.partition(SEPARATOR)
            if g == group:
                out.add(t)
        return out

    def remove_topic(self, topic: str) -> None:
        for key in [k for k in self._table if k.partition(SEPARATOR)[0] == topic]:
            del self._table[key]
            self.writer.changed()

    def remove_group(self, group: str) -> None:
        for key in [k for k in self._table if k.partition(SEPARATOR)[2] == group]:
            del self._table[key]
            self.writer.changed()
