"""KV config of the name server: namespace → key → value, persisted as kvConfig.json.

The file is RocketMQ's `{"configTable":{namespace:{key:value}}}`. Writes go to
`<file>.tmp`, the previous file is kept as `<file>.bak`, then the tmp file is renamed
over the original, so a crash leaves either the old or the new content. Loading falls
back to `.bak` when the main file is missing, empty or unparsable.

Puts are rare admin operations, so each one writes the file synchronously.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

log = logging.getLogger("rmq.namesrv.kvconfig")

ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"  # NamesrvUtil.NAMESPACE_ORDER_TOPIC_CONFIG


class KVConfigManager:
    def __init__(self, path: str | os.PathLike[str] | None) -> None:
        """`path=None` keeps the table in memory only (tests, throwaway servers)."""
        self.path = None if path is None else Path(path).expanduser()
        self.table: dict[str, dict[str, str]] = {}

    def load(self) -> None:
        """Read the file (or its .bak); a missing file is an empty table."""
        if self.path is None:
            return
        for candidate in (self.path, self.path.with_name(self.path.name + ".bak")):
            table = _read(candidate)
            if table is not None:
                self.table = table
                if candidate != self.path:
                    log.warning("loaded KV config from the backup %s", candidate)
                return

    def put(self, namespace: str, key: str, value: str) -> None:
        self.table.setdefault(namespace, {})[key] = value
        self.persist()

    def get(self, namespace: str, key: str) -> str | None:
        return self.table.get(namespace, {}).get(key)

    def delete(self, namespace: str, key: str) -> None:
        entries = self.table.get(namespace)
        if entries is not None and entries.pop(key, None) is not None:
            self.persist()

    def namespace(self, namespace: str) -> dict[str, str] | None:
        """A copy of one namespace's entries, or None if it was never written."""
        entries = self.table.get(namespace)
        return None if entries is None else dict(entries)

    def persist(self) -> None:
        if self.path is None:
            return
        text = json.dumps({"configTable": self.table}, indent=1, sort_keys=True, ensure_ascii=False)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        if self.path.exists():
            os.replace(self.path, self.path.with_name(self.path.name + ".bak"))
        os.replace(tmp, self.path)


def _read(path: Path) -> dict[str, dict[str, str]] | None:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        log.warning("cannot read KV config %s: %s", path, exc)
        return None
    if not text.strip():
        return None
    try:
        table = json.loads(text).get("configTable") or {}
        return {str(ns): {str(k): str(v) for k, v in entries.items() if v is not None} for ns, entries in table.items()}
    except (ValueError, AttributeError, TypeError) as exc:
        log.warning("ignoring unparsable KV config %s: %s", path, exc)
        return None
