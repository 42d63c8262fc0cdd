"""Find a Java runtime for Spark before starting it, and say clearly when there is none.

Spark 4 needs Java 17 or newer. Without one, `SparkSession.builder.getOrCreate()` fails
with a long gateway traceback that never says "install Java"; this check runs first and
gives the user the fix instead.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess

MIN_JAVA = 17

INSTALL_HINT = (
    f"Spark needs Java {MIN_JAVA} or newer. Install one and make it visible, for example:\n"
    "  Debian/Ubuntu:  sudo apt-get install openjdk-17-jre-headless\n"
    "  Fedora/RHEL:    sudo dnf install java-17-openjdk-headless\n"
    "  macOS:          brew install openjdk@17\n"
    "  any system:     download Temurin 17+ from https://adoptium.net\n"
    "then put `java` on PATH or set JAVA_HOME to the JDK directory."
)

# `java -version` prints e.g. `openjdk version "17.0.15" 2025-04-15` or `java version "1.8.0_292"`.
_VERSION = re.compile(r'version "(\d+)(?:\.(\d+))?')


class JavaMissing(RuntimeError):
    """No usable Java: the message says what was found and how to install one."""


def java_executable() -> str | None:
    """`$JAVA_HOME/bin/java` if JAVA_HOME is set (as Spark's launcher prefers), else `java` on PATH."""
    home = os.environ.get("JAVA_HOME")
    if home:
        candidate = os.path.join(home, "bin", "java")
        return candidate if os.access(candidate, os.X_OK) else None
    return shutil.which("java")


def parse_major(version_text: str) -> int | None:
    """The major version in `java -version` output; 1.8 counts as 8."""
    m = _VERSION.search(version_text)
    if not m:
        return None
    major = int(m.group(1))
    if major == 1 and m.group(2):
        major = int(m.group(2))
    return major


def check_java() -> int:
    """Return the Java major version, or raise JavaMissing with instructions."""
    exe = java_executable()
    if exe is None:
        where = (
            f"JAVA_HOME={os.environ['JAVA_HOME']} has no bin/java"
            if os.environ.get("JAVA_HOME")
            else "no `java` on PATH"
        )
        raise JavaMissing(f"Java not found ({where}).\n{INSTALL_HINT}")
    try:
        proc = subprocess.run([exe, "-version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise JavaMissing(f"cannot run {exe} -version: {exc}\n{INSTALL_HINT}") from None
    major = parse_major(proc.stderr + proc.stdout)
    if major is None:
        raise JavaMissing(f"cannot tell the version of {exe} from: {proc.stderr.strip()!r}\n{INSTALL_HINT}")
    if major < MIN_JAVA:
        raise JavaMissing(f"{exe} is Java {major}.\n{INSTALL_HINT}")
    return major
