"""`rmq fuzz`: send hostile RemotingCommands to one RocketMQ server and report what broke.

    rmq fuzz --target 127.0.0.1:10911 [--seconds 30] [--cases N] [--seed S]
             [--kind namesrv|broker|dledger|auto] [--unsafe] [--timeout 5] [--concurrency 4]
    rmq fuzz --target 127.0.0.1:10911 --kind broker --replay SEED:CASE [--unsafe]
    rmq fuzz --grpc 127.0.0.1:8081 [...]   a 5.x gRPC proxy's port instead (fuzz_grpc.py)

The cases come from rmq.fuzzing.cases: requests of every code the server kind handles,
built from the project's header and body schemas and then broken one way each (wrong types,
missing and extra fields, extreme numbers, hostile strings and properties, bad bodies,
unknown codes, broken command headers, broken framing). Any RocketMQ 4.x name server or
broker will do, ours or Java's, and a DLedger member's port (`--kind dledger`: DLedger's
request codes and JSON peer messages); auto detection tells the three apart. Only the
address given is ever contacted; a connection the server closes is replaced by a new one;
the run stops after --seconds or --cases.

Each case is checked against what the server owes it, and reported as a finding when

    crash       the server closed the connection without answering a request it owed
                an answer (or stopped accepting connections)
    hang        no answer within --timeout (plus a long poll's own suspend time); for a
                case the server may ignore, a valid request sent after it got no answer;
                for broken framing, the server neither answered nor closed the connection
    bad-answer  what came back breaks the protocol: an undecodable frame, an answer whose
                opaque matches no request, a second answer, a frame that is not a response

Answers that report an unhandled exception inside the server (a SYSTEM_ERROR whose remark
names an exception type) are listed as internal errors; --strict counts them as findings.
Every finding prints the `--replay SEED:CASE` that sends the same bytes again. Without
--unsafe only requests that leave the server's state alone are sent.

Exit status: 0 no findings, 1 findings, 2 the target could not be reached.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import functools
import math
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import trio

from rmq.fuzzing import cases as F
from rmq.fuzzing import grpc as G
from rmq.protocol import DEFAULT_MAX_FRAME_SIZE, FrameDecoder, ProtocolError, RemotingCommand, ResponseCode

from .fuzz_report import CategoryStats, Finding, category_lines, finding_lines

CRASH = "crash"
HANG = "hang"
BAD_ANSWER = "bad-answer"
INTERNAL_ERROR = "internal-error"

# Answers to a connection's own requests above this many outstanding (parked long polls,
# requests a name server ignores): the connection is replaced, so they cannot pile up.
_MAX_OUTSTANDING = 16
_RETIRED_KEPT = 4096
_CONNECT_ATTEMPTS = 3


@dataclass(frozen=True, slots=True)
class FuzzOptions:
    host: str
    port: int
    seconds: float = 30.0
    cases: int | None = None
    seed: int | None = None
    kind: str = "auto"
    unsafe: bool = False
    timeout: float = 5.0
    concurrency: int = 4
    max_frame: int = DEFAULT_MAX_FRAME_SIZE
    max_body: int = F.DEFAULT_MAX_BODY
    categories: tuple[str, ...] = ()
    strict: bool = False

    @property
    def target(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


@dataclass
class Report:
    target: str
    kind: str
    seed: int
    unsafe: bool
    run_args: str = ""  # the options a replay must repeat (categories, limits)
    elapsed: float = 0.0
    cases: int = 0
    categories: dict[str, CategoryStats] = field(default_factory=lambda: collections.defaultdict(CategoryStats))
    answer_codes: collections.Counter[int] = field(default_factory=collections.Counter)
    connections: int = 0
    server_requests: int = 0
    late_answers: int = 0
    findings: list[Finding[F.Case]] = field(default_factory=list)
    internal_errors: list[Finding[F.Case]] = field(default_factory=list)
    unreachable: str | None = None
    replayed: F.Case | None = None
    trace: list[str] = field(default_factory=list)  # what happened, in replay mode

    def failures(self, strict: bool = False) -> list[Finding[F.Case]]:
        return self.findings + (self.internal_errors if strict else [])

    def replay_command(self, case: F.Case) -> str:
        unsafe = " --unsafe" if self.unsafe else ""
        return f"rmq fuzz --target {self.target} --kind {self.kind}{unsafe}{self.run_args} --replay {case.replay}"

    def summary(self, strict: bool = False) -> str:
        rate = self.cases / self.elapsed if self.elapsed else 0.0
        mode = "unsafe" if self.unsafe else "safe"
        lines = [
            f"rmq fuzz {self.target} ({self.kind}, {mode} mode), seed {self.seed}: "
            f"{self.cases} cases in {self.elapsed:.1f} s ({rate:.0f}/s), {self.connections} connections"
        ]
        if self.unreachable:
            lines.append(f"  target unreachable: {self.unreachable}")
        lines += category_lines(self.categories, F.CATEGORY_NAMES, 14)
        codes = ", ".join(f"{_response_name(c)} {n}" for c, n in self.answer_codes.most_common(8))
        lines.append(f"  answers: {codes or 'none'}")
        lines.append(f"  server requests ignored: {self.server_requests}, late answers: {self.late_answers}")
        lines += finding_lines(self.failures(strict), self.internal_errors, strict, self.replay_command)
        return "\n".join(lines)


def _response_name(code: int) -> str:
    try:
        return ResponseCode(code).name
    except ValueError:
        return str(code)


class _Unreachable(Exception):
    pass


class _Conn:
    """One connection to the target and the answers read from it."""

    def __init__(self, stream: trio.SocketStream, run: _Run) -> None:
        self.stream = stream
        self.run = run
        self.decoder = FrameDecoder(run.options.max_frame + 1024)
        self.owner: dict[int, F.Case] = {}  # outstanding opaque -> case
        self.events: dict[int, trio.Event] = {}
        self.answers: dict[int, RemotingCommand] = {}
        self.retired: collections.OrderedDict[int, None] = collections.OrderedDict()
        self.closed = trio.Event()
        self.last_case: F.Case | None = None

    def expect(self, opaque: int, case: F.Case) -> trio.Event:
        self.owner[opaque] = case
        event = self.events[opaque] = trio.Event()
        if self.closed.is_set():  # the reader is gone: nothing will answer
            event.set()
        return event

    def retire(self, opaque: int) -> None:
        """An opaque no longer waited for: a late answer to it is not a protocol break."""
        self.owner.pop(opaque, None)
        self.events.pop(opaque, None)
        self.answers.pop(opaque, None)
        self.retired[opaque] = None
        while len(self.retired) > _RETIRED_KEPT:
            self.retired.popitem(last=False)

    async def read(self) -> None:
        try:
            while True:
                data = await self.stream.receive_some(65536)
                if not data:
                    break
                self.decoder.feed(data)
                for frame in self.decoder:
                    self.on_frame(frame)
        except ProtocolError as exc:
            self.run.bad(self.last_case, f"unparseable framing from the server: {exc}")
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            self.closed.set()
            for event in self.events.values():
                event.set()
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                await self.stream.aclose()

    def on_frame(self, frame: bytes) -> None:
        case = self.last_case
        try:
            cmd = RemotingCommand.decode(frame)
            cmd.ext_fields  # noqa: B018 - parsing it is the check
        except ProtocolError as exc:
            self.run.bad(case, f"undecodable frame from the server: {exc}")
            return
        if not cmd.is_response:
            if cmd.code in F.SERVER_REQUESTS:
                self.run.report.server_requests += 1
            else:
                self.run.bad(case, f"a request (code {cmd.code}, opaque {cmd.opaque}), not a response")
            return
        owner = self.owner.pop(cmd.opaque, None)
        if owner is None:
            if cmd.opaque in self.retired:
                self.retired.pop(cmd.opaque)
                self.run.report.late_answers += 1
            else:
                self.run.bad(case, f"an answer with opaque {cmd.opaque} that matches no request: {cmd!r}"[:300])
            return
        self.run.answered(owner, cmd)
        self.answers[cmd.opaque] = cmd
        self.retired[cmd.opaque] = None  # a second answer to it is a late answer at worst
        event = self.events.pop(cmd.opaque, None)
        if event is not None:
            event.set()


class _Run:
    def __init__(self, options: FuzzOptions, kind: str, seed: int, cases: Callable[[], int | None]) -> None:
        self.options = options
        self.kind = kind
        self.seed = seed
        self.next_case = cases
        self.report = Report(options.target, kind, seed, options.unsafe, _run_args(options))
        self.verbose = False
        self._opaque = random.Random(seed).choice((1, 2**31 - 200, -5000, 0))
        self.stopped = False

    def opaque(self) -> int:
        value = self._opaque
        self._opaque = F.wrap_opaque(value + 64)  # framing cases use up to 64 opaques
        return value

    def make(self, number: int) -> F.Case:
        o = self.options
        category = None
        if o.categories:
            category = random.Random(f"{self.seed}:{number}").choice(o.categories)
        case = F.make_case(
            self.seed,
            number,
            self.kind,
            opaque=self.opaque(),
            unsafe=o.unsafe,
            max_frame=o.max_frame,
            max_body=o.max_body,
            category=category,
        )
        if self.verbose:
            self.report.replayed = case
        return case

    def finding(self, kind: str, case: F.Case | None, detail: str) -> None:
        if self.verbose:
            self.report.trace.append(f"{kind}: {detail}")
        if case is None:
            return
        target = self.report.internal_errors if kind == INTERNAL_ERROR else self.report.findings
        target.append(Finding(kind, case, detail))

    def bad(self, case: F.Case | None, detail: str) -> None:
        self.finding(BAD_ANSWER, case, detail)

    def answered(self, case: F.Case, cmd: RemotingCommand) -> None:
        self.report.answer_codes[cmd.code] += 1
        if self.verbose:
            probe = "" if cmd.opaque in case.opaques else " (the probe sent after it)"
            self.report.trace.append(f"answered{probe}: {cmd!r}"[:600])
        if cmd.opaque in case.opaques:
            self.report.categories[case.category].answered += 1
        if F.internal_error(cmd.code, cmd.remark):
            self.finding(INTERNAL_ERROR, case, f"answered {cmd.code}: {(cmd.remark or '')[:200]!r}")

    async def connect(self) -> trio.SocketStream:
        last: Exception | None = None
        for attempt in range(_CONNECT_ATTEMPTS):
            try:
                with trio.fail_after(self.options.timeout):
                    stream = await trio.open_tcp_stream(self.options.host, self.options.port)
                self.report.connections += 1
                return stream
            except (OSError, trio.TooSlowError) as exc:
                last = exc
                await trio.sleep(0.2 * (attempt + 1))
        raise _Unreachable(f"cannot connect to {self.options.target}: {last}")

    # -- one case ----------------------------------------------------------------------------

    async def request_case(self, conn: _Conn, case: F.Case, opaque: int) -> bool:
        """Send one request case on ``conn``; False when the connection is done with."""
        conn.last_case = case
        event = conn.expect(opaque, case)
        others = [o for o in case.opaques if o != opaque and o not in conn.owner]
        for o in others:
            conn.owner[o] = case
        try:
            return await self._request_case(conn, case, opaque, event)
        finally:
            for o in others:
                if conn.owner.get(o) is case:
                    conn.retire(o)

    async def _request_case(self, conn: _Conn, case: F.Case, opaque: int, event: trio.Event) -> bool:
        timeout = self.options.timeout
        stats = self.report.categories[case.category]
        with trio.move_on_after(timeout + case.extra_wait):
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                await conn.stream.send_all(case.payload)
            if case.answer == F.DUE:
                await event.wait()
                if opaque in conn.answers:
                    conn.answers.pop(opaque)
                    return True
                stats.closed += 1
                self.finding(CRASH, case, "the server closed the connection without answering")
                return False
        if case.answer == F.DUE:
            conn.retire(opaque)
            self.finding(HANG, case, f"no answer within {timeout + case.extra_wait:g} s")
            return False
        # optional: the case may be ignored or end the connection; a valid probe tells which
        probe_opaque = self.opaque()
        probe_event = conn.expect(probe_opaque, case)
        with trio.move_on_after(timeout):
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                await conn.stream.send_all(F.probe(self.kind, probe_opaque))
            await probe_event.wait()
            if conn.closed.is_set() and probe_opaque not in conn.answers:
                stats.closed += 1
                if self.verbose:
                    self.report.trace.append("the server closed the connection (allowed for this case)")
                return False
            conn.answers.pop(probe_opaque, None)
            conn.answers.pop(opaque, None)
            if opaque not in conn.owner:
                conn.retire(opaque)
            return len(conn.owner) < _MAX_OUTSTANDING
        conn.retire(probe_opaque)
        self.finding(HANG, case, f"a valid request sent after it got no answer within {timeout:g} s")
        return False

    async def raw_case(self, case: F.Case) -> None:
        """Send a framing case on a connection of its own, half-close, read until closed."""
        stream = await self.connect()
        timeout = self.options.timeout
        received = bytearray()
        stats = self.report.categories[case.category]
        closed = False
        try:
            with trio.move_on_after(timeout):
                try:
                    await stream.send_all(case.payload)
                    await stream.send_eof()
                    while data := await stream.receive_some(65536):
                        received += data
                        if len(received) > 64 * 1024 * 1024:
                            break
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    pass
                closed = True
        finally:
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                await stream.aclose()
        if closed:
            stats.closed += 1
            if self.verbose:
                self.report.trace.append(f"the server closed the connection after {len(received)} bytes")
        else:
            self.finding(HANG, case, f"the server neither closed the connection nor answered within {timeout:g} s")
        decoder = FrameDecoder(self.options.max_frame + 1024)
        try:
            decoder.feed(bytes(received))
            frames = list(decoder)
        except ProtocolError as exc:
            self.bad(case, f"unparseable framing from the server: {exc}")
            return
        for frame in frames:
            try:
                cmd = RemotingCommand.decode(frame)
                cmd.ext_fields  # noqa: B018 - parsing it is the check
            except ProtocolError as exc:
                self.bad(case, f"undecodable frame from the server: {exc}")
                continue
            if not cmd.is_response:
                if cmd.code in F.SERVER_REQUESTS:
                    self.report.server_requests += 1
                else:
                    self.bad(case, f"a request (code {cmd.code}), not a response")
            elif cmd.opaque not in case.opaques and not case.any_opaque:
                self.bad(case, f"an answer with opaque {cmd.opaque} that matches no request")
            else:
                self.answered(case, cmd)

    # -- workers -----------------------------------------------------------------------------

    async def worker(self) -> None:
        conn: _Conn | None = None
        async with trio.open_nursery() as nursery:
            try:
                while not self.stopped and (number := self.next_case()) is not None:
                    case = self.make(number)
                    self.report.cases += 1
                    self.report.categories[case.category].sent += 1
                    try:
                        if case.raw:
                            await self.raw_case(case)
                            continue
                        if conn is None or conn.closed.is_set():
                            conn = _Conn(await self.connect(), self)
                            nursery.start_soon(conn.read)
                        assert case.opaque is not None
                        if not await self.request_case(conn, case, case.opaque):
                            await conn.stream.aclose()
                            conn = None
                    except _Unreachable as exc:
                        self.finding(CRASH, case, f"the server stopped accepting connections: {exc}")
                        self.stopped = True
            finally:
                if conn is not None:
                    with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                        await conn.stream.aclose()
                nursery.cancel_scope.cancel()


async def detect_kind(options: FuzzOptions) -> str:
    """Ask GET_ROUTEINFO_BY_TOPIC, and METADATA: a name server answers the first, a broker
    neither (REQUEST_CODE_NOT_SUPPORTED), a DLedger member only the second."""
    try:
        with trio.fail_after(options.timeout):
            stream = await trio.open_tcp_stream(options.host, options.port)
    except (OSError, trio.TooSlowError) as exc:
        raise _Unreachable(f"cannot connect to {options.target}: {exc}") from None
    codes: dict[int, int] = {}  # opaque -> answer code
    async with stream:
        with trio.move_on_after(options.timeout):
            await stream.send_all(F.detect_request(1))
            decoder = FrameDecoder(options.max_frame + 1024)

            def known() -> bool:  # a name server (Java's) never answers the unknown METADATA
                return 1 in codes and (codes[1] != ResponseCode.REQUEST_CODE_NOT_SUPPORTED or 2 in codes)

            while not known() and (data := await stream.receive_some(65536)):
                decoder.feed(data)
                for frame in decoder:
                    with contextlib.suppress(ProtocolError):
                        cmd = RemotingCommand.decode(frame)
                        if cmd.is_response and cmd.opaque in (1, 2):
                            codes[cmd.opaque] = cmd.code
    return F.kind_from_answer(codes.get(1), codes.get(2))


async def fuzz(options: FuzzOptions, *, only_case: int | None = None) -> Report:
    """Run the fuzzer (or, with ``only_case``, replay one case) and return its report."""
    seed = options.seed if options.seed is not None else random.randrange(2**32)
    kind = options.kind
    if kind == "auto":
        try:
            kind = await detect_kind(options)
        except _Unreachable as exc:
            report = Report(options.target, "unknown", seed, options.unsafe)
            report.unreachable = str(exc)
            return report
    limit = options.cases if options.cases is not None else math.inf
    counter = iter(range(10**12))
    deadline = trio.current_time() + options.seconds
    start = time.monotonic()

    def next_case() -> int | None:
        if only_case is not None:
            return only_case if run.report.cases == 0 else None
        if run.report.cases >= limit or trio.current_time() >= deadline:
            return None
        return next(counter)

    run = _Run(options, kind, seed, next_case)
    run.verbose = only_case is not None
    workers = 1 if only_case is not None else max(1, options.concurrency)
    # the deadline also bounds a hang: each case waits at most timeout + a long poll's suspend
    with trio.move_on_after(options.seconds + 2 * options.timeout + 10):
        async with trio.open_nursery() as nursery:
            for _ in range(workers):
                nursery.start_soon(run.worker)
    run.report.elapsed = time.monotonic() - start
    return run.report


def _run_args(options: FuzzOptions) -> str:
    """The options besides target, kind and --unsafe that decide a case's bytes."""
    out = "".join(f" --category {c}" for c in options.categories)
    if options.max_frame != DEFAULT_MAX_FRAME_SIZE:
        out += f" --max-frame {options.max_frame}"
    if options.max_body != F.DEFAULT_MAX_BODY:
        out += f" --max-body {options.max_body}"
    return out


def _target(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host.strip("[]"), int(port)


def _replay(text: str) -> tuple[int, int]:
    seed, sep, case = text.partition(":")
    if not sep or not seed.isdigit() or not case.isdigit():
        raise argparse.ArgumentTypeError(f"expected SEED:CASE, got {text!r}")
    return int(seed), int(case)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="rmq fuzz",
        description="Send hostile RemotingCommands to one RocketMQ name server or broker (--target), or "
        "hostile gRPC over HTTP/2 to a 5.x gRPC proxy (--grpc), and report crashes, hangs and "
        "protocol-breaking answers.",
    )
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--target", type=_target, metavar="HOST:PORT", help="the only address contacted")
    where.add_argument(
        "--grpc", type=_target, metavar="HOST:PORT", help="a RocketMQ 5.x gRPC proxy's port instead (the only address)"
    )
    p.add_argument("--seconds", type=float, default=30.0, help="stop after this long (default 30)")
    p.add_argument("--cases", type=int, default=None, help="stop after this many cases")
    p.add_argument("--seed", type=int, default=None, help="run seed (default: random, printed)")
    p.add_argument("--kind", choices=("auto", *F.KINDS), default="auto")
    p.add_argument(
        "--unsafe", action="store_true", help="also send requests that change server state (not for production)"
    )
    p.add_argument("--timeout", type=float, default=5.0, help="seconds an answer may take (default 5)")
    p.add_argument("--concurrency", type=int, default=4, help="connections fuzzed at once (default 4)")
    p.add_argument(
        "--max-frame", type=int, default=DEFAULT_MAX_FRAME_SIZE, help="the server's frame limit, bytes (16 MiB)"
    )
    p.add_argument("--max-body", type=int, default=F.DEFAULT_MAX_BODY, help="largest body sent (default 4 MiB + 1)")
    p.add_argument(
        "--category",
        action="append",
        choices=sorted({*F.CATEGORY_NAMES, *G.CATEGORY_NAMES}),
        help="only these case categories (repeatable; --grpc has its own)",
    )
    p.add_argument("--topic", default="rmq-fuzz-topic", help="--grpc: the topic its requests name")
    p.add_argument("--group", default="rmq-fuzz-group", help="--grpc: the consumer group its requests name")
    p.add_argument(
        "--max-message", type=int, default=G.DEFAULT_MAX_MESSAGE, help="--grpc: the proxy's maxMessageSize (4 MiB)"
    )
    p.add_argument("--strict", action="store_true", help="count answered internal errors as findings")
    p.add_argument("--replay", type=_replay, metavar="SEED:CASE", help="send one case again and show what happens")
    return p


def _show_replay(report: Report) -> None:
    case = report.replayed
    if case is None:
        return
    print(case.describe())
    print(f"  answer owed: {case.answer}; first bytes: {case.payload[:96].hex()}")
    if not case.raw:
        try:
            print(f"  request: {RemotingCommand.decode(case.payload[4:])!r}"[:600])
        except ProtocolError as exc:
            print(f"  request: not decodable by rmq ({exc})")
    for line in report.trace:
        print(f"  {line}")


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.grpc:
        return _main_grpc(parser, args)
    wrong = [c for c in args.category or () if c not in F.CATEGORY_NAMES]
    if wrong:
        parser.error(f"--category {wrong[0]}: a --grpc category")
    host, port = args.target
    seed = args.seed
    only = None
    if args.replay:
        seed, only = args.replay
        if args.kind == "auto":
            print("rmq fuzz: --replay needs the --kind the run used", file=sys.stderr)
            return 2
    options = FuzzOptions(
        host=host,
        port=port,
        seconds=args.seconds if only is None else 3600.0,
        cases=args.cases,
        seed=seed,
        kind=args.kind,
        unsafe=args.unsafe,
        timeout=args.timeout,
        concurrency=args.concurrency,
        max_frame=args.max_frame,
        max_body=args.max_body,
        categories=tuple(args.category or ()),
        strict=args.strict,
    )
    try:
        report = trio.run(functools.partial(fuzz, options, only_case=only))
    except KeyboardInterrupt:
        return 130
    if only is not None:
        _show_replay(report)
    print(report.summary(options.strict))
    if report.unreachable:
        return 2
    return 1 if report.failures(options.strict) else 0


def _main_grpc(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from . import fuzz_grpc

    wrong = [c for c in args.category or () if c not in G.CATEGORY_NAMES]
    if wrong:
        parser.error(f"--category {wrong[0]}: not a --grpc category ({', '.join(G.CATEGORY_NAMES)})")
    host, port = args.grpc
    seed, only = args.seed, None
    if args.replay:
        seed, only = args.replay
    options = fuzz_grpc.GrpcFuzzOptions(
        host=host,
        port=port,
        seconds=args.seconds if only is None else 3600.0,
        cases=args.cases,
        seed=seed,
        unsafe=args.unsafe,
        timeout=args.timeout,
        concurrency=args.concurrency,
        topic=args.topic,
        group=args.group,
        max_message=args.max_message,
        categories=tuple(args.category or ()),
        strict=args.strict,
    )
    try:
        report = trio.run(functools.partial(fuzz_grpc.fuzz_grpc, options, only_case=only))
    except KeyboardInterrupt:
        return 130
    if only is not None:
        fuzz_grpc.show_replay(report)
    print(report.summary(options.strict))
    if report.unreachable:
        return 2
    return 1 if report.failures(options.strict) else 0
