"""`mqadmin ... | head`: a command whose reader has gone stops quietly, as Unix tools do."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run_into_closed_pipe(*argv: str) -> subprocess.CompletedProcess[str]:
    """Run `python -m rmq argv...` with stdout a pipe whose reader has already closed it."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader left before the first line: every write fails
    try:
        return subprocess.run(
            [sys.executable, "-m", "rmq", *argv],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            check=False,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
    finally:
        os.close(write_end)


@pytest.mark.parametrize("argv", [["admin", "help"], ["--help"]], ids=["mqadmin-help", "rmq-help"])
def test_help_into_a_closed_pipe(argv: list[str]) -> None:
    proc = run_into_closed_pipe(*argv)
    assert proc.stderr == ""
    assert proc.returncode == -signal.SIGPIPE  # the shell shows 141, as for `yes | head -1`


def test_mqadmin_command_into_a_closed_pipe(rmq_cluster: Any) -> None:
    for i in range(30):
        rmq_cluster.create_topic(f"PipeTopic{i}", 1)
    proc = run_into_closed_pipe("admin", "topicList", "-n", rmq_cluster.namesrv)
    assert proc.stderr == ""
    assert proc.returncode == -signal.SIGPIPE
