"""A class-data sharing (CDS) archive of the classes Spark's driver JVM loads, kept in a cache.

Starting a session parses and verifies some 20,000 classes from Spark's jars; on a busy
machine that is most of the start's CPU. Java 13+ can write the classes a JVM loaded to an
archive when it exits (`-XX:ArchiveClassesAtExit`), and later JVMs map that archive instead
(`-XX:SharedArchiveFile`): bench/spark_small.py measures the session start and the first
query at about half the CPU with it.

The first session of a Java / Spark pair writes the archive: when the Python process ends,
it closes the JVM's input (Spark's gateway then exits), waits for the dump and moves the
file into place, so a second process never maps a half-written archive. The name keys the
Java runtime and the Spark jars; the JVM checks the rest and ignores an archive that does
not fit (`-Xshare:auto`, quietly). The archive takes 100-200 MB under
`$XDG_CACHE_HOME/rmq` (default `~/.cache/rmq`); RMQ_SPARK_CLASS_ARCHIVE=off turns this off.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import os
import sys
import time
from pathlib import Path
from typing import Any

from .java import java_executable

ENV = "RMQ_SPARK_CLASS_ARCHIVE"
# The JVM's notes about archives (dumping skipped classes, a stale archive) are no use to users.
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"
DUMP_TIMEOUT = 300.0


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "rmq"


def archive_path() -> Path:
    """Where the archive for this Java runtime and these Spark jars lives."""
    import pyspark

    java = java_executable() or "java"
    jars = Path(pyspark.__file__).resolve().parent / "jars"
    stamp = jars.stat().st_mtime_ns if jars.is_dir() else 0
    key = f"{os.path.realpath(java)}|{pyspark.__version__}|{jars}|{stamp}"
    return cache_dir() / f"spark-classes-{hashlib.sha256(key.encode()).hexdigest()[:16]}.jsa"


def java_options() -> tuple[str, Path | None]:
    """(JVM options, the partial archive this JVM will write at exit or None).

    Call finish_at_exit(partial) once the JVM runs, so the dump completes and is moved in."""
    if os.environ.get(ENV, "").lower() in ("0", "off", "false", "no"):
        return "", None
    path = archive_path()
    if path.exists():
        return f"-XX:SharedArchiveFile={path} {QUIET}", None
    if path.with_suffix(".failed").exists():
        return "", None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError:
        return "", None  # no writable cache: start as before
    for stale in path.parent.glob(f"{path.name}.*.partial"):  # left by a process that was killed
        with contextlib.suppress(OSError):
            if time.time() - stale.stat().st_mtime > 3600:
                stale.unlink()
    partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
    return f"-XX:ArchiveClassesAtExit={partial} {QUIET}", partial


def finish_at_exit(partial: Path, gateway_process: Any) -> None:
    """When Python exits, end the JVM (its gateway exits at end of input), wait for the
    archive it writes and put it in place, or remember that this JVM cannot write one."""

    def finish() -> None:
        # Once per Java / Spark pair, and it takes a few seconds: say why the exit waits.
        print("rmq_spark: saving Spark's classes for faster starts (once) ...", file=sys.stderr, flush=True)
        with contextlib.suppress(Exception):
            gateway_process.stdin.close()
            gateway_process.wait(DUMP_TIMEOUT)
        final = Path(str(partial).rsplit(".", 2)[0])
        if gateway_process.returncode == 0 and partial.exists() and partial.stat().st_size:
            os.replace(partial, final)
            return
        with contextlib.suppress(OSError):
            partial.unlink()
        if gateway_process.returncode == 0:  # the JVM ran to its end and wrote nothing: do not retry
            with contextlib.suppress(OSError):
                final.with_suffix(".failed").touch()

    atexit.register(finish)
