"""One SparkSession for the whole test session, and a factory of test stores."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from rmq_spark.java import JavaMissing, check_java

from .spark_fixtures import StoreWriter


@pytest.fixture(scope="session")
def java() -> int:
    """The Java major version; skips the test (with the reason) without Java 17+, or fails
    it in CI (``CI`` set), where scripts/bootstrap.sh installs Java."""
    try:
        return check_java()
    except JavaMissing as exc:
        if os.environ.get("CI"):
            pytest.fail(f"Spark tests need Java, which scripts/bootstrap.sh installs: {exc}")
        pytest.skip(f"Spark tests need Java: {exc}")


@pytest.fixture(scope="session")
def spark_session(java: int) -> Iterator[Any]:
    """local[2], two shuffle partitions, no UI, 1 GiB of driver memory."""
    from rmq_spark.session import build_session

    session = build_session(
        "local[2]",
        "rmq-tests",
        {"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2", "spark.driver.memory": "1g"},
    )
    yield session
    session.stop()


@pytest.fixture
def store_writer(tmp_path: Path) -> Callable[[str], StoreWriter]:
    def make(name: str = "store") -> StoreWriter:
        w = StoreWriter(tmp_path / name)
        w.open()
        return w

    return make
