"""Fixtures shared by every test package."""

from __future__ import annotations

from pathlib import Path

import pytest

# shared/ (captured vectors, protocol notes) sits beside the repository.
SHARED_DIR = Path(__file__).resolve().parents[1].parent / "shared"
VECTORS_DIR = SHARED_DIR / "vectors" / "cpp-client"


@pytest.fixture(scope="session")
def vectors_dir() -> Path:
    if not VECTORS_DIR.is_dir():
        pytest.skip(f"captured vectors not found at {VECTORS_DIR}")
    return VECTORS_DIR
