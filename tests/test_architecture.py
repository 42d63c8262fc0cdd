"""The import rules of DESIGN.md 2.1, checked by import-linter (contracts in pyproject.toml)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_import_contracts_hold() -> None:
    command = shutil.which("lint-imports") or f"{sys.executable} -m importlinter.cli"
    done = subprocess.run(
        [*command.split(), "--config", str(ROOT / "pyproject.toml")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr  # lint-imports exits 1 on a broken contract
