"""Coverage-guided fuzzing of the sans-IO decoders (rmq/fuzzing/targets.py).

    python bench/fuzz_decoders.py --seconds 60 [--target NAME ...] [--jobs 2]
                                  [--engine atheris|builtin] [--artifacts DIR]

Each target (FrameDecoder, RemotingCommand.decode in both serializations, message records,
batch bodies, properties strings, fastjson bodies, Java properties text, the HA decoders,
typed headers, DLedger entries) runs for --seconds in a process of its own, started from
the seeds in targets.SEEDS. The contract: on bad bytes a decoder raises ProtocolError
and nothing else, so every other exception is a finding. Findings are deduplicated by
exception type and the innermost line of rmq/protocol that raised it; the first input of
each is written to --artifacts (default ./fuzz-artifacts) to replay with

    python -c "import sys; from rmq.fuzzing.targets import TARGETS; \\
               TARGETS['NAME'](open(sys.argv[1], 'rb').read())" FILE

Engines: atheris (libFuzzer; `pip install 'rmq[fuzz]'`), coverage-guided over the bytecode of
rmq.protocol; or, when atheris is missing or --engine builtin is given, a small mutation
fuzzer guided by line coverage of rmq/protocol (sys.settrace; slower, fewer executions).
libFuzzer also stops on an input slower than --input-timeout seconds or a process above
--rss-limit-mb; those are findings too.

Prints, per target: executions, coverage, corpus size, findings; exits 1 if any finding.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import random
import re
import struct
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


# -- in the child: one target ------------------------------------------------------------------


def _signature(exc: BaseException) -> str:
    """Exception type plus the innermost frame inside rmq/protocol (else the innermost)."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = "?"
    for fr in reversed(frames):
        if f"rmq{os.sep}protocol{os.sep}" in fr.filename:
            where = f"{Path(fr.filename).name}:{fr.lineno}"
            break
    else:
        if frames:
            where = f"{Path(frames[-1].filename).name}:{frames[-1].lineno}"
    return f"{type(exc).__name__} at {where}"


class _Findings:
    """Deduplicated findings of one target, appended to a JSON-lines file as they come (the
    libFuzzer engine ends the process with exit(), so nothing can be written at the end)."""

    def __init__(self, name: str, out: Path, artifacts: Path) -> None:
        self.name = name
        self.out = out
        self.artifacts = artifacts
        self.seen: set[str] = set()
        self.count = 0

    def add(self, exc: BaseException, data: bytes) -> None:
        self.count += 1
        sig = _signature(exc)
        if sig in self.seen:
            return
        self.seen.add(sig)
        self.artifacts.mkdir(parents=True, exist_ok=True)
        path = self.artifacts / f"{self.name}-{hashlib.sha1(data).hexdigest()[:16]}"
        path.write_bytes(data)
        line = {"target": self.name, "signature": sig, "message": str(exc)[:300], "input": str(path)}
        with self.out.open("a") as f:
            f.write(json.dumps(line) + "\n")


def _child_atheris(name: str, seconds: int, out: Path, artifacts: Path, args: argparse.Namespace) -> None:
    import atheris  # type: ignore[import-not-found,import-untyped,unused-ignore]

    with atheris.instrument_imports(include=["rmq.protocol"]):
        from rmq.fuzzing import targets as fuzz_targets

    findings = _Findings(name, out, artifacts)
    target = fuzz_targets.TARGETS[name]
    from rmq.protocol.errors import ProtocolError

    def one_input(data: bytes) -> None:
        try:
            target(data)
        except ProtocolError:
            pass
        except Exception as exc:  # noqa: BLE001 - the findings
            findings.add(exc, data)

    corpus = Path(tempfile.mkdtemp(prefix=f"rmq-fuzz-{name}-"))
    for i, seed in enumerate(fuzz_targets.SEEDS[name]):
        (corpus / f"seed{i}").write_bytes(seed)
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 1000))
    argv = [
        sys.argv[0],
        f"-max_total_time={seconds}",
        f"-timeout={args.input_timeout}",
        f"-rss_limit_mb={args.rss_limit_mb}",
        f"-max_len={args.max_len}",
        "-len_control=0",  # long inputs from the start: nesting and digit limits need thousands of bytes
        f"-artifact_prefix={artifacts}{os.sep}{name}-",
        "-print_final_stats=1",
        f"-seed={args.seed or 0}",
        str(corpus),
    ]
    artifacts.mkdir(parents=True, exist_ok=True)
    atheris.Setup(argv, one_input)
    atheris.Fuzz()


_INTERESTING = [0, 1, 0x7F, 0x80, 0xFF, 0x7FFF, 0x8000, 0xFFFF, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF]


def _mutate(rng: random.Random, data: bytes, corpus: list[bytes], max_len: int) -> bytes:
    buf = bytearray(data)
    for _ in range(rng.choice((1, 1, 2, 4, 8))):
        op = rng.randrange(8)
        if op == 0 and buf:  # flip a bit
            i = rng.randrange(len(buf))
            buf[i] ^= 1 << rng.randrange(8)
        elif op == 1 and buf:  # set a byte
            buf[rng.randrange(len(buf))] = rng.randrange(256)
        elif op == 2:  # insert bytes
            i = rng.randrange(len(buf) + 1)
            buf[i:i] = rng.randbytes(rng.choice((1, 2, 4, 16)))
        elif op == 3 and buf:  # delete a run
            i = rng.randrange(len(buf))
            del buf[i : i + rng.choice((1, 2, 4, 16, 64))]
        elif op == 4 and len(buf) >= 4:  # an interesting integer
            i = rng.randrange(len(buf) - 3)
            size, fmt = rng.choice(((1, ">B"), (2, ">H"), (4, ">I")))
            buf[i : i + size] = struct.pack(fmt, rng.choice(_INTERESTING) & ((1 << (8 * size)) - 1))
        elif op == 5 and corpus:  # splice with another input
            other = rng.choice(corpus)
            i, j = rng.randrange(len(buf) + 1), rng.randrange(len(other) + 1)
            buf = buf[:i] + other[j:]
        elif op == 6 and buf:  # duplicate a run
            i = rng.randrange(len(buf))
            run = buf[i : i + rng.choice((1, 4, 32, 256))]
            buf[i:i] = run * rng.choice((2, 8, 64))
        elif op == 7:  # an ASCII token that parsers branch on
            i = rng.randrange(len(buf) + 1)
            buf[i:i] = rng.choice((b"{", b"}", b"[", b"]", b'"', b":", b",", b"\\", b"\\u", b"\x01", b"\x02", b"\n"))
    return bytes(buf[:max_len])


def _child_builtin(name: str, seconds: int, out: Path, artifacts: Path, args: argparse.Namespace) -> None:
    """Mutation fuzzing guided by the lines of rmq/protocol each input runs (sys.settrace)."""
    from rmq.fuzzing import targets as fuzz_targets
    from rmq.protocol.errors import ProtocolError

    target = fuzz_targets.TARGETS[name]
    findings = _Findings(name, out, artifacts)
    marker = f"rmq{os.sep}protocol{os.sep}"
    seen: set[tuple[Any, int]] = set()
    current: set[tuple[Any, int]] = set()

    def tracer(frame: Any, event: str, arg: Any) -> Any:
        if marker not in frame.f_code.co_filename:
            return None
        if event == "line":
            current.add((frame.f_code, frame.f_lineno))
        return tracer

    def execute(data: bytes) -> bool:
        current.clear()
        sys.settrace(tracer)
        try:
            target(data)
        except ProtocolError:
            pass
        except Exception as exc:  # noqa: BLE001 - the findings
            sys.settrace(None)
            findings.add(exc, data)
        finally:
            sys.settrace(None)
        new = not current <= seen
        seen.update(current)
        return new

    rng = random.Random(args.seed)
    corpus = list(fuzz_targets.SEEDS[name]) or [b""]
    for seed in corpus:
        execute(seed)
    runs, start = 0, time.monotonic()
    deadline = start + seconds
    while time.monotonic() < deadline:
        for _ in range(100):
            data = _mutate(rng, rng.choice(corpus), corpus, args.max_len)
            runs += 1
            if execute(data):
                corpus.append(data)
    print(f"Done {runs} runs in {int(time.monotonic() - start)} second(s)", file=sys.stderr)
    print(f"stat::number_of_executed_units: {runs}", file=sys.stderr)
    print(f"#{runs}\tDONE   cov: {len(seen)} ft: {len(seen)} corp: {len(corpus)}", file=sys.stderr)


# -- in the parent: one child per target --------------------------------------------------------


def _have_atheris() -> bool:
    try:
        import atheris  # type: ignore[import-not-found,import-untyped,unused-ignore]  # noqa: F401
    except ImportError:
        return False
    return True


def _parse_stats(stderr: str) -> dict[str, Any]:
    stats: dict[str, Any] = {}
    if m := re.search(r"stat::number_of_executed_units:\s*(\d+)", stderr):
        stats["runs"] = int(m.group(1))
    elif m := re.search(r"Done (\d+) runs", stderr):
        stats["runs"] = int(m.group(1))
    else:
        pulses = re.findall(r"^#(\d+)\s", stderr, re.M)
        stats["runs"] = int(pulses[-1]) if pulses else 0
    lines = re.findall(r"cov: (\d+) ft: (\d+) corp: (\d+)", stderr)
    if lines:
        stats["cov"], stats["ft"], stats["corpus"] = (int(x) for x in lines[-1])
    crash = re.search(r"ERROR: libFuzzer: ([\w-]+)", stderr)
    if crash:
        stats["libfuzzer_error"] = crash.group(1)
        art = re.search(r"Test unit written to (\S+)", stderr)
        stats["libfuzzer_artifact"] = art.group(1) if art else None
    return stats


def _start(name: str, args: argparse.Namespace, out: Path, engine: str) -> subprocess.Popen[bytes]:
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        name,
        "--engine",
        engine,
        "--seconds",
        str(args.seconds),
        "--findings-file",
        str(out),
        "--artifacts",
        str(args.artifacts),
        "--input-timeout",
        str(args.input_timeout),
        "--rss-limit-mb",
        str(args.rss_limit_mb),
        "--max-len",
        str(args.max_len),
    ]
    if args.seed is not None:
        cmd += ["--seed", str(args.seed)]
    # libFuzzer logs every new corpus entry: into a file, as a pipe nobody drains would fill
    log = out.with_suffix(".log").open("w")
    try:
        return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log, cwd=ROOT)
    finally:
        log.close()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--child" in argv:
        # the child imports rmq.protocol itself, after atheris hooks imports to instrument it
        names = [argv[argv.index("--child") + 1]]
    else:
        from rmq.fuzzing.targets import TARGETS

        names = sorted(TARGETS)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=int, default=60, help="per target (default 60)")
    parser.add_argument("--target", action="append", choices=names, help="repeatable; default all")
    parser.add_argument("--jobs", type=int, default=max(1, min(2, os.cpu_count() or 1)), help="targets at once")
    parser.add_argument("--engine", choices=("auto", "atheris", "builtin"), default="auto")
    parser.add_argument("--artifacts", type=Path, default=Path("fuzz-artifacts"), help="inputs of findings")
    parser.add_argument("--seed", type=int, default=None, help="fuzzer seed (default: random)")
    parser.add_argument("--input-timeout", type=int, default=10, help="seconds one input may take")
    parser.add_argument("--rss-limit-mb", type=int, default=2048)
    parser.add_argument("--max-len", type=int, default=64 * 1024, help="longest input tried")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--findings-file", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.artifacts = args.artifacts.resolve()

    engine = args.engine
    if engine == "auto":
        engine = "atheris" if _have_atheris() else "builtin"
    elif engine == "atheris" and not _have_atheris():
        parser.error("atheris is not installed: pip install 'rmq[fuzz]' (or use --engine builtin)")

    if args.child:
        run = _child_atheris if engine == "atheris" else _child_builtin
        run(args.child, args.seconds, args.findings_file, args.artifacts, args)
        return 0

    names = args.target or names
    print(f"fuzzing {len(names)} decoder(s) for {args.seconds} s each with {engine}, {args.jobs} at a time")
    workdir = Path(tempfile.mkdtemp(prefix="rmq-fuzz-decoders-"))
    results: dict[str, dict[str, Any]] = {}
    pending = list(names)
    running: dict[str, tuple[subprocess.Popen[bytes], Path]] = {}
    limit = args.seconds + 120  # a child that does not stop by itself is killed
    started: dict[str, float] = {}
    while pending or running:
        while pending and len(running) < args.jobs:
            name = pending.pop(0)
            out = workdir / f"{name}.jsonl"
            running[name] = (_start(name, args, out, engine), out)
            started[name] = time.monotonic()
        time.sleep(0.2)
        for name, (proc, out) in list(running.items()):
            if proc.poll() is None and time.monotonic() - started[name] < limit:
                continue
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            stderr = out.with_suffix(".log").read_text(errors="replace")
            del running[name]
            stats = _parse_stats(stderr)
            stats["exit"] = proc.returncode
            found = []
            if out.exists():
                found = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
            stats["findings"] = found
            if proc.returncode not in (0, None) and "libfuzzer_error" not in stats:
                stats["child_error"] = stderr.strip().splitlines()[-5:]
            results[name] = stats
            n = len(found) + (1 if "libfuzzer_error" in stats else 0)
            print(
                f"  {name:<17} {stats.get('runs', 0):>10,} execs  cov {stats.get('cov', '-'):>5}"
                f"  corpus {stats.get('corpus', '-'):>5}  findings {n}"
            )

    total = 0
    print()
    for name in names:
        stats = results[name]
        for f in stats["findings"]:
            total += 1
            print(f"FINDING {name}: {f['signature']}: {f['message']}\n    input: {f['input']}")
        if "libfuzzer_error" in stats:
            total += 1
            print(f"FINDING {name}: libFuzzer {stats['libfuzzer_error']}; input: {stats.get('libfuzzer_artifact')}")
        if "child_error" in stats:
            total += 1
            print(f"FINDING {name}: the fuzzing process failed (exit {stats['exit']}):")
            for line in stats["child_error"]:
                print(f"    {line}")
    runs = sum(r.get("runs", 0) for r in results.values())
    print(f"total: {runs:,} executions over {len(names)} decoder(s), {total} finding(s)")
    with contextlib.suppress(OSError):
        for p in workdir.iterdir():
            p.unlink()
        workdir.rmdir()
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
