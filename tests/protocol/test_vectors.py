"""Golden vectors: every frame the C++ client sent or accepted (tests/vectors/cpp-client)
decodes, and re-encodes to the same logical command."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rmq.protocol import FrameDecoder, LanguageCode, RemotingCommand, SerializeType
from rmq.protocol.header_codec import ext_str
from tests.conftest import VECTORS_DIR

VECTORS = VECTORS_DIR


def _index() -> list[tuple[Path, dict[str, Any]]]:
    entries = []
    for index in sorted(VECTORS.glob("*/index.jsonl")):
        for line in index.read_text().splitlines():
            if line.strip():
                record = json.loads(line)
                entries.append((index.parent / record["file"], record))
    return entries


ENTRIES = _index()


def test_the_vectors_ship_with_the_repository() -> None:
    assert len(ENTRIES) >= 400, f"captured vectors missing under {VECTORS}"


def _decode_file(path: Path) -> RemotingCommand:
    dec = FrameDecoder()
    dec.feed(path.read_bytes())
    frames = list(dec)
    assert len(frames) == 1, "one frame per file, length prefix included"
    assert dec.buffered == 0
    return RemotingCommand.decode(frames[0])


def test_every_frame_file_is_indexed() -> None:
    files = sorted(VECTORS.glob("*/frames/*.bin"))
    assert len(files) == len(ENTRIES) > 400


@pytest.mark.parametrize(("path", "record"), ENTRIES, ids=[f"{p.parent.parent.name}/{p.name}" for p, _ in ENTRIES])
def test_vector_roundtrip(path: Path, record: dict[str, Any]) -> None:
    cmd = _decode_file(path)
    header = record["header"]
    assert cmd.serialize_type == SerializeType(record["serialize_type"]) == SerializeType.JSON
    assert cmd.code == header["code"]
    assert cmd.opaque == header["opaque"]
    assert cmd.flag == header["flag"]
    assert cmd.version == header["version"]
    assert cmd.language == LanguageCode[header["language"]]
    assert (cmd.remark or None) == (header.get("remark") or None)
    # numbers and strings alike come back as their Java string form
    assert cmd.ext_fields == {k: ext_str(v) for k, v in (header.get("extFields") or {}).items() if v is not None}
    assert len(cmd.body) == record["body_len"]

    again = RemotingCommand.decode(cmd.encode()[4:])
    assert again == cmd
    assert again.body == cmd.body
