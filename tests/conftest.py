"""Fixtures shared by every test package."""

from __future__ import annotations

from pathlib import Path

import pytest

from rmq import metrics

# Servers the tests start serve metrics when configured to, as the commands' do (the servers
# do not import their exporters: whatever starts them installs those).
metrics.install()

# Frames captured from the official C++ client (tests/vectors/cpp-client/README.md). They
# ship with the repository: a missing file is a failure, never a skip.
VECTORS_DIR = Path(__file__).resolve().parent / "vectors" / "cpp-client"


@pytest.fixture(scope="session")
def vectors_dir() -> Path:
    assert VECTORS_DIR.is_dir(), f"captured vectors missing at {VECTORS_DIR}"
    return VECTORS_DIR
