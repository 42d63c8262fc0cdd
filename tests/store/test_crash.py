"""SIGKILL a SYNC_FLUSH writer at random moments; every acknowledged message must survive."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rmq.protocol.errors import ProtocolError
from rmq.protocol.message import decode_record
from rmq.store import GetMessageStatus, MessageStore

from .crash_writer import TOPIC, body_for, config

WRITER = Path(__file__).with_name("crash_writer.py")
REPO = Path(__file__).resolve().parents[2]
ROUNDS = 20


def _run_round(root: Path, round_no: int, rng: random.Random) -> list[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, str(WRITER), str(root), str(round_no)], stdout=subprocess.PIPE, env=env)
    try:
        if rng.random() < 0.2:
            # Sometimes kill while it is still opening (recovery interrupted).
            time.sleep(rng.uniform(0.0, 0.4))
        else:
            first = proc.stdout.readline()  # type: ignore[union-attr]
            assert first == b"READY\n", f"writer failed to start: {first!r}"
            time.sleep(rng.uniform(0.02, 0.3))
        proc.send_signal(signal.SIGKILL)
        out = proc.stdout.read()  # type: ignore[union-attr]
    finally:
        proc.kill()
        proc.wait()
    # A line cut short by the kill was never acknowledged.
    return [ln for ln in out.decode().split("\n")[:-1] if ln and ln != "READY"]


def _verify(root: Path, acked: dict[str, tuple[int, int, int]], *, every_key: bool = False) -> int:
    with MessageStore(config(str(root))) as store:
        found: dict[str, tuple[int, int, int]] = {}
        for qid in range(4):
            offset = store.get_min_offset_in_queue(TOPIC, qid)
            while True:
                g = store.get_message(TOPIC, qid, offset, 32)
                if g.status is not GetMessageStatus.FOUND:
                    # The end of the queue, or a queue the writer never reached.
                    assert g.status in (GetMessageStatus.OFFSET_OVERFLOW_ONE, GetMessageStatus.NO_MATCHED_LOGIC_QUEUE)
                    break
                for raw, qoff in zip(g.records, g.queue_offsets, strict=True):
                    try:
                        msg, _ = decode_record(raw, check_crc=True)
                    except ProtocolError as exc:  # pragma: no cover - the point of the test
                        pytest.fail(f"corrupt record served at {qid}:{qoff}: {exc}")
                    assert (msg.queue_id, msg.queue_offset) == (qid, qoff)
                    found[msg.uniq_key] = (qid, qoff, len(msg.body))
                    assert msg.body == body_for(msg.uniq_key, len(msg.body))
                offset = g.next_begin_offset
        missing = [u for u in acked if found.get(u) != acked[u]]
        assert not missing, f"{len(missing)} acknowledged messages lost, e.g. {missing[:5]}"
        # The index finds each acknowledged message by its UNIQ_KEY, exactly once.
        keys = list(acked) if every_key else list(acked)[:: max(1, len(acked) // 20)]
        for uniq in keys:
            assert len(store.query_message(TOPIC, uniq).records) == 1, uniq
        return len(found)


@pytest.mark.slow
def test_sigkill_never_loses_acknowledged_messages(tmp_path: Path) -> None:
    root = tmp_path / "store"
    rng = random.Random(20240305)
    acked: dict[str, tuple[int, int, int]] = {}
    started = time.monotonic()
    for round_no in range(ROUNDS):
        for line in _run_round(root, round_no, rng):
            uniq, qid, qoff, size = line.split()
            acked[uniq] = (int(qid), int(qoff), int(size))
        if round_no % 2:
            # Odd rounds recover here; even rounds leave it to the next writer.
            _verify(root, acked)
        assert time.monotonic() - started < 120, "crash test is taking too long"
    total = _verify(root, acked, every_key=True)
    assert len(acked) > 100, "the writer acknowledged too little to be meaningful"
    assert total >= len(acked)
