"""Write message rows into a Parquet directory partitioned by topic and date, idempotently.

Layout: `<out>/topic=<topic>/date=<yyyy-mm-dd>/part-*.parquet`, `date` being the UTC date
of `store_timestamp`. Partition values are escaped by Spark (`%RETRY%g` becomes
`topic=%25RETRY%25g`); Spark and pyarrow readers decode them.

The rule for re-runs: **a row is identified by `msg_id`** (store host + CommitLog offset).
An export writes its rows to a staging directory first; then every (topic, date)
partition it produced is either moved in (new partition) or rewritten as the union of
the old partition's rows whose msg_id it did not produce and all the new rows. So
re-exporting any range, or an overlapping or smaller one, replaces those rows and never
duplicates them, and nothing outside the rows just exported is ever deleted (not even
rows the source no longer has, e.g. after retention removed old CommitLog files).
Partitions the run did not produce are not touched.

Each partition is swapped by two renames inside `<out>` (old → staging trash, merged →
place). One export at a time holds `<out>/_export.lock` (an OS lock, released if the
process dies). A run that died between the two renames is repaired by the next run:
partitions left in a staging trash with nothing in their place are moved back (the old
data, without the unfinished run's rows), and stale staging directories are removed.
Names starting with `_` are ignored by Spark and pyarrow readers.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

PARTITION_COLUMNS = ("topic", "date")
LOCK_NAME = "_export.lock"
STAGING_PREFIX = "_staging-"


@dataclass(frozen=True, slots=True)
class WriteResult:
    rows: int  # rows the source produced in this run
    files: int
    bytes: int  # Parquet bytes written by this run (before merging)
    partitions: int  # (topic, date) partitions written
    merged: int  # of those, partitions that existed and were merged
    seconds: float  # reading, writing, merging and swapping, without Spark's start-up


@contextmanager
def export_lock(out: Path) -> Iterator[None]:
    out.mkdir(parents=True, exist_ok=True)
    with open(out / LOCK_NAME, "a+") as f:
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RuntimeError(f"another export is writing to {out} (it holds {out / LOCK_NAME})") from None
        try:
            yield
        finally:
            # Remove it while still holding it: a file left behind would look like a
            # running export to whoever lists the directory.
            with contextlib.suppress(OSError):
                os.unlink(out / LOCK_NAME)
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def recover(out: Path) -> None:
    """Finish what a crashed run left: put trashed partitions back, drop staging dirs."""
    for staging in sorted(out.glob(STAGING_PREFIX + "*")):
        trash = staging / "trash"
        for part in _partition_dirs(trash):
            target = out / part
            if not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                os.rename(trash / part, target)
        shutil.rmtree(staging)


def _partition_dirs(root: Path) -> list[Path]:
    """Relative `topic=…/date=…` directories under root (none when root does not exist)."""
    if not root.is_dir():
        return []
    return sorted(
        d.relative_to(root)
        for t in root.iterdir()
        if t.is_dir() and t.name.startswith("topic=")
        for d in t.iterdir()
        if d.is_dir() and d.name.startswith("date=")
    )


def _parquet_files(root: Path) -> list[Path]:
    if not root.is_dir():
        return []
    return sorted(
        p for p in root.rglob("*.parquet") if not any(part.startswith(("_", ".")) for part in p.relative_to(root).parts)
    )


def write(session: Any, df: Any, out: Path, progress: Any = None) -> WriteResult:
    """Export `df` (MESSAGE_SCHEMA rows) into `out` following the module's rule."""
    from pyspark.sql import functions as F

    out = out.resolve()
    started = time.monotonic()
    with export_lock(out):
        recover(out)
        staging = out / f"{STAGING_PREFIX}{uuid.uuid4().hex}"
        fresh = staging / "new"
        if progress is not None:
            progress.phase("export")
        dated = df.withColumn("date", F.date_format(F.col("store_timestamp"), "yyyy-MM-dd"))
        try:
            dated.write.partitionBy(*PARTITION_COLUMNS).parquet(str(fresh))
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)  # nothing was swapped yet: drop it all
            raise
        files = _parquet_files(fresh)
        rows = sum(pq.read_metadata(p).num_rows for p in files)
        size = sum(p.stat().st_size for p in files)
        parts = _partition_dirs(fresh)
        existing = [p for p in parts if (out / p).is_dir()]
        source = fresh
        if existing:
            if progress is not None:
                progress.phase("merge")
            source = staging / "merged"
            _merge(session, out, fresh, existing, source)
        trash = staging / "trash"
        for part in parts:
            target = out / part
            origin = (source if part in existing else fresh) / part
            if target.exists():
                (trash / part).parent.mkdir(parents=True, exist_ok=True)
                os.rename(target, trash / part)
            target.parent.mkdir(parents=True, exist_ok=True)
            os.rename(origin, target)
        shutil.rmtree(staging)
        return WriteResult(rows, len(files), size, len(parts), len(existing), time.monotonic() - started)


def _merge(session: Any, out: Path, fresh: Path, existing: list[Path], dest: Path) -> None:
    """Write old rows not re-exported plus the new rows of the `existing` partitions to `dest`."""
    reader = session.read.option("basePath", str(out))
    old = reader.parquet(*[str(out / p) for p in existing])
    new = session.read.option("basePath", str(fresh)).parquet(*[str(fresh / p) for p in existing])
    kept = old.join(new.select("msg_id"), on="msg_id", how="left_anti").select(*new.columns)
    merged = kept.unionByName(new)
    merged.write.partitionBy(*PARTITION_COLUMNS).parquet(str(dest))
