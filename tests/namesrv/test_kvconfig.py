"""KVConfigManager: the kvConfig.json file, atomic writes and the .bak fallback."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

from rmq.namesrv.kvconfig import KVConfigManager

if TYPE_CHECKING:
    from pathlib import Path


def test_put_get_delete_and_namespace(tmp_path: Path) -> None:
    kv = KVConfigManager(tmp_path / "kvConfig.json")
    kv.load()
    assert kv.get("ns", "k") is None
    assert kv.namespace("ns") is None
    kv.put("ns", "k", "v")
    kv.put("ns", "k2", "v2")
    assert kv.get("ns", "k") == "v"
    assert kv.namespace("ns") == {"k": "v", "k2": "v2"}
    kv.delete("ns", "k")
    kv.delete("ns", "missing")
    kv.delete("other", "k")
    assert kv.namespace("ns") == {"k2": "v2"}


def test_file_shape_and_reload(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "kvConfig.json"
    kv = KVConfigManager(path)
    kv.put("ORDER_TOPIC_CONFIG", "T", "broker-a:4")
    assert json.loads(path.read_text()) == {"configTable": {"ORDER_TOPIC_CONFIG": {"T": "broker-a:4"}}}
    again = KVConfigManager(path)
    again.load()
    assert again.get("ORDER_TOPIC_CONFIG", "T") == "broker-a:4"
    assert not (tmp_path / "sub" / "kvConfig.json.tmp").exists()


def test_previous_content_is_kept_as_bak(tmp_path: Path) -> None:
    path = tmp_path / "kvConfig.json"
    kv = KVConfigManager(path)
    kv.put("ns", "k", "1")
    kv.put("ns", "k", "2")
    assert json.loads((tmp_path / "kvConfig.json.bak").read_text())["configTable"]["ns"]["k"] == "1"


@pytest.mark.parametrize("broken", ["", "{not json", "[]"])
def test_broken_main_file_falls_back_to_bak(tmp_path: Path, broken: str) -> None:
    path = tmp_path / "kvConfig.json"
    kv = KVConfigManager(path)
    kv.put("ns", "k", "1")
    kv.put("ns", "k", "2")
    path.write_text(broken)
    again = KVConfigManager(path)
    again.load()
    assert again.get("ns", "k") == "1"


def test_crash_between_renames_recovers_from_bak(tmp_path: Path) -> None:
    path = tmp_path / "kvConfig.json"
    kv = KVConfigManager(path)
    kv.put("ns", "k", "1")
    kv.put("ns", "k", "2")
    path.unlink()  # as if we died after moving the old file to .bak
    again = KVConfigManager(path)
    again.load()
    assert again.get("ns", "k") == "1"


def test_missing_file_is_empty(tmp_path: Path) -> None:
    kv = KVConfigManager(tmp_path / "nothing.json")
    kv.load()
    assert kv.table == {}


def test_memory_only(tmp_path: Path) -> None:
    kv = KVConfigManager(None)
    kv.load()
    kv.put("ns", "k", "v")
    assert kv.get("ns", "k") == "v"
    assert list(tmp_path.iterdir()) == []


def test_tilde_is_expanded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    kv = KVConfigManager("~/namesrv/kvConfig.json")
    kv.put("ns", "k", "v")
    assert (tmp_path / "namesrv" / "kvConfig.json").exists()
