"""`rmq fuzz --grpc HOST:PORT`: hostile gRPC over HTTP/2 to a RocketMQ 5.x gRPC proxy.

    rmq fuzz --grpc 127.0.0.1:8081 [--seconds 30] [--cases N] [--seed S] [--unsafe]
             [--timeout 5] [--concurrency 4] [--topic T] [--group G] [--category C]
    rmq fuzz --grpc 127.0.0.1:8081 --replay SEED:CASE [--unsafe]

The cases come from rmq.fuzzing.grpc, over the requests of apache.rocketmq.v2.MessagingService
(built here from the proxy's protobuf classes, naming --topic and --group): malformed
protobuf in each method's request, unknown methods, oversized and mis-prefixed messages,
hostile headers, streams opened and abandoned or never read, garbage instead of the HTTP/2
preface, malformed frames. Each case runs on a connection of its own, and after it a fresh
connection's QueryRoute must still be answered (any Status will do). Only the address given
is contacted; the run stops after --seconds or --cases.

Findings, as for the remoting port:

    crash       the connection closed without the answer a call was owed, or the proxy
                stopped accepting connections
    hang        a call owed an answer got none within --timeout, a connection the proxy had
                to close stayed open, or the QueryRoute after the case went unanswered
    bad-answer  HTTP/2 that does not parse (frames, HPACK), a PUSH_PROMISE, a call's end
                without grpc-status, a response message the method's type cannot read

A call ended with grpc-status UNKNOWN, or answered with the proxy's INTERNAL_SERVER_ERROR,
whose message names an exception type is an internal error (--strict counts them).

Exit status: 0 no findings, 1 findings, 2 the proxy could not be reached.
"""

from __future__ import annotations

import collections
import contextlib
import math
import random
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field

import trio
from google.protobuf.message import DecodeError
from google.protobuf.message import Message as Proto

from rmq.fuzzing import cases as F
from rmq.fuzzing import grpc as G
from rmq.proxy.v2 import definition_pb2 as d
from rmq.proxy.v2 import service_pb2 as s

from .fuzz_report import CategoryStats, Finding, category_lines, finding_lines

CRASH, HANG, BAD_ANSWER, INTERNAL_ERROR = "crash", "hang", "bad-answer", "internal-error"
SERVICE = s.DESCRIPTOR.services_by_name["MessagingService"]
QUERY_ROUTE = f"/{SERVICE.full_name}/QueryRoute"
# methods that leave the proxy's and the brokers' state alone (a client id of the fuzzer's own)
SAFE = frozenset(
    {"QueryRoute", "QueryAssignment", "Heartbeat", "QueryOffset", "GetOffset", "NotifyClientTermination"}
    | {"RecallMessage", "SyncLiteSubscription"}
)
DEFAULT_TOPIC, DEFAULT_GROUP = "rmq-fuzz-topic", "rmq-fuzz-group"
GRPC_NAMES = (
    "OK CANCELLED UNKNOWN INVALID_ARGUMENT DEADLINE_EXCEEDED NOT_FOUND ALREADY_EXISTS PERMISSION_DENIED "
    "RESOURCE_EXHAUSTED FAILED_PRECONDITION ABORTED OUT_OF_RANGE UNIMPLEMENTED INTERNAL UNAVAILABLE DATA_LOSS "
    "UNAUTHENTICATED"
).split()


@dataclass(frozen=True, slots=True)
class GrpcFuzzOptions:
    host: str
    port: int
    seconds: float = 30.0
    cases: int | None = None
    seed: int | None = None
    unsafe: bool = False
    timeout: float = 5.0
    concurrency: int = 4
    topic: str = DEFAULT_TOPIC
    group: str = DEFAULT_GROUP
    max_message: int = G.DEFAULT_MAX_MESSAGE
    categories: tuple[str, ...] = ()
    strict: bool = False

    @property
    def target(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


@dataclass
class GrpcReport:
    target: str
    seed: int
    unsafe: bool
    run_args: str = ""
    elapsed: float = 0.0
    cases: int = 0
    connections: int = 0
    categories: dict[str, CategoryStats] = field(default_factory=lambda: collections.defaultdict(CategoryStats))
    statuses: collections.Counter[str] = field(default_factory=collections.Counter)
    findings: list[Finding[G.GrpcCase]] = field(default_factory=list)
    internal_errors: list[Finding[G.GrpcCase]] = field(default_factory=list)
    unreachable: str | None = None
    replayed: G.GrpcCase | None = None
    trace: list[str] = field(default_factory=list)

    def failures(self, strict: bool = False) -> list[Finding[G.GrpcCase]]:
        return self.findings + (self.internal_errors if strict else [])

    def replay_command(self, case: G.GrpcCase) -> str:
        unsafe = " --unsafe" if self.unsafe else ""
        return f"rmq fuzz --grpc {self.target}{unsafe}{self.run_args} --replay {case.replay}"

    def summary(self, strict: bool = False) -> str:
        rate = self.cases / self.elapsed if self.elapsed else 0.0
        mode = "unsafe" if self.unsafe else "safe"
        lines = [
            f"rmq fuzz --grpc {self.target} ({mode} mode), seed {self.seed}: "
            f"{self.cases} cases in {self.elapsed:.1f} s ({rate:.0f}/s), {self.connections} connections"
        ]
        if self.unreachable:
            lines.append(f"  proxy unreachable: {self.unreachable}")
        lines += category_lines(self.categories, G.CATEGORY_NAMES, 16)
        statuses = ", ".join(f"{name} {n}" for name, n in self.statuses.most_common(10))
        lines.append(f"  grpc-status: {statuses or 'none'}")
        lines += finding_lines(self.failures(strict), self.internal_errors, strict, self.replay_command)
        return "\n".join(lines)


# -- the methods' requests ----------------------------------------------------------------------


def _requests(name: str, topic: str, group: str) -> list[Proto]:
    t, g = d.Resource(name=topic), d.Resource(name=group)
    queue = d.MessageQueue(topic=t, id=0, broker=d.Broker(name="broker-a"))
    tags = d.FilterExpression(type=d.TAG, expression="*")
    wait = {"seconds": 1}
    out: dict[str, list[Proto]] = {
        "QueryRoute": [s.QueryRouteRequest(topic=t), s.QueryRouteRequest(topic=d.Resource(name="TBW102"))],
        "Heartbeat": [s.HeartbeatRequest(group=g, client_type=d.SIMPLE_CONSUMER), s.HeartbeatRequest()],
        "QueryAssignment": [s.QueryAssignmentRequest(topic=t, group=g)],
        "QueryOffset": [s.QueryOffsetRequest(message_queue=queue, query_offset_policy=d.END)],
        "GetOffset": [s.GetOffsetRequest(group=g, message_queue=queue)],
        "NotifyClientTermination": [s.NotifyClientTerminationRequest(group=g)],
        "SendMessage": [
            s.SendMessageRequest(
                messages=[
                    d.Message(
                        topic=t,
                        body=b"rmq fuzz",
                        system_properties=d.SystemProperties(
                            message_id="01RMQFUZZ000000000000000000", body_encoding=d.IDENTITY, message_type=d.NORMAL
                        ),
                    )
                ]
            )
        ],
        "ReceiveMessage": [
            s.ReceiveMessageRequest(
                group=g,
                message_queue=queue,
                filter_expression=tags,
                batch_size=1,
                invisible_duration={"seconds": 10},
                long_polling_timeout=wait,
            )
        ],
        "PullMessage": [
            s.PullMessageRequest(
                group=g, message_queue=queue, batch_size=1, filter_expression=tags, long_polling_timeout=wait
            )
        ],
        "AckMessage": [
            s.AckMessageRequest(group=g, topic=t, entries=[s.AckMessageEntry(message_id="x", receipt_handle="y")])
        ],
        "ChangeInvisibleDuration": [
            s.ChangeInvisibleDurationRequest(
                group=g, topic=t, receipt_handle="y", invisible_duration=wait, message_id="x"
            )
        ],
        "ForwardMessageToDeadLetterQueue": [
            s.ForwardMessageToDeadLetterQueueRequest(group=g, topic=t, receipt_handle="y", message_id="x")
        ],
        "UpdateOffset": [s.UpdateOffsetRequest(group=g, message_queue=queue, offset=0)],
        "EndTransaction": [s.EndTransactionRequest(topic=t, message_id="x", transaction_id="y", resolution=d.ROLLBACK)],
        "Telemetry": [
            s.TelemetryCommand(settings=d.Settings(client_type=d.PRODUCER, publishing=d.Publishing(topics=[t]))),
            s.TelemetryCommand(),
        ],
    }
    return out.get(name) or [SERVICE.methods_by_name[name].input_type._concrete_class()]


def methods_table(topic: str, group: str) -> dict[str, G.GrpcMethod]:
    """Every method of MessagingService with valid requests naming `topic` and `group`."""
    table = {}
    for m in SERVICE.methods:
        kind = "bidi" if m.client_streaming else "server_stream" if m.server_streaming else "unary"
        requests = tuple(r.SerializeToString() for r in _requests(m.name, topic, group))
        path = f"/{SERVICE.full_name}/{m.name}"
        table[path] = G.GrpcMethod(path, kind, requests, m.name in SAFE)
    return table


def _response_type(path: str) -> type[Proto] | None:
    method = SERVICE.methods_by_name.get(path.rsplit("/", 1)[-1])
    return method.output_type._concrete_class if method is not None else None


# -- one connection ---------------------------------------------------------------------------------


class _Unreachable(Exception):
    pass


@dataclass
class _Outcome:
    reader: G.Reader
    closed: bool  # the proxy closed the connection (EOF or a reset)


class _Run:
    def __init__(self, options: GrpcFuzzOptions, seed: int) -> None:
        self.options = options
        self.seed = seed
        self.methods = methods_table(options.topic, options.group)
        self.report = GrpcReport(options.target, seed, options.unsafe, _run_args(options))
        self.verbose = False
        self.stopped = False
        self.probe_steps = G.probe(QUERY_ROUTE, self.methods[QUERY_ROUTE].requests[0])

    async def connect(self) -> trio.SocketStream:
        last: Exception | None = None
        for attempt in range(3):
            try:
                with trio.fail_after(self.options.timeout):
                    stream = await trio.open_tcp_stream(self.options.host, self.options.port)
                self.report.connections += 1
                return stream
            except (OSError, trio.TooSlowError) as exc:
                last = exc
                await trio.sleep(0.2 * (attempt + 1))
        raise _Unreachable(f"cannot connect to {self.options.target}: {last}")

    async def exchange(
        self, steps: tuple[G.Step, ...], owed: frozenset[int], *, reads: bool, must_close: bool, eof: bool
    ) -> _Outcome:
        """Send the steps on a fresh connection; read until every owed stream is answered
        (or the connection closes, or it must close), at most --timeout after the last step."""
        stream = await self.connect()
        reader = G.Reader()
        closed = trio.Event()
        progress = [trio.Event()]

        async def read() -> None:
            try:
                while data := await stream.receive_some(65536):
                    reader.feed(data)
                    progress[0].set()
                    progress[0] = trio.Event()
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                pass
            closed.set()
            progress[0].set()

        def finished() -> bool:
            if closed.is_set() or reader.errors:
                return True
            if must_close:
                return False
            return all(reader.streams.get(sid, G.Answer()).done for sid in owed)

        try:
            async with trio.open_nursery() as nursery:
                if reads:
                    nursery.start_soon(read)
                with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                    for step in steps:
                        await self._step(stream, step, reader, progress, reads)
                    if eof:
                        await stream.send_eof()
                if reads:
                    with trio.move_on_after(self.options.timeout):
                        while not finished():
                            await progress[0].wait()
                nursery.cancel_scope.cancel()
        finally:
            await trio.aclose_forcefully(stream)
        return _Outcome(reader, closed.is_set())

    async def _step(
        self, stream: trio.SocketStream, step: G.Step, reader: G.Reader, progress: list[trio.Event], reads: bool
    ) -> None:
        if isinstance(step, G.Send):
            await stream.send_all(step.data)
        elif isinstance(step, G.Pause):
            await trio.sleep(step.seconds)
        else:
            data = step.data
            while True:
                room = min(reader.max_frame, len(data), reader.window(step.stream_id) if reads else len(data))
                if room <= 0 and data:
                    with trio.fail_after(self.options.timeout):  # the proxy opens no window: a hang
                        await progress[0].wait()
                    continue
                chunk, data = data[:room], data[room:]
                flags = G.END_STREAM if step.end_stream and not data else 0
                reader.sent(step.stream_id, len(chunk))
                await stream.send_all(G.frame(G.DATA, flags, step.stream_id, chunk))
                if not data:
                    return

    # -- a case --------------------------------------------------------------------------------

    def finding(self, kind: str, case: G.GrpcCase, detail: str) -> None:
        if self.verbose:
            self.report.trace.append(f"{kind}: {detail}")
        target = self.report.internal_errors if kind == INTERNAL_ERROR else self.report.findings
        target.append(Finding(kind, case, detail))

    async def run_case(self, case: G.GrpcCase) -> None:
        stats = self.report.categories[case.category]
        stats.sent += 1
        try:
            out = await self.exchange(case.steps, case.owed, reads=case.reads, must_close=case.must_close, eof=case.eof)
        except trio.TooSlowError:
            self.finding(HANG, case, f"the proxy opened no flow-control window within {self.options.timeout:g} s")
            out = None
        if out is not None:
            self.judge(case, out, stats)
        await self.probe(case)

    def judge(self, case: G.GrpcCase, out: _Outcome, stats: CategoryStats) -> None:
        reader = out.reader
        if out.closed:
            stats.closed += 1
        if self.verbose:
            self.report.trace.append(
                f"streams {sorted(reader.streams)}, goaway {reader.goaway}, closed {out.closed}, errors {reader.errors}"
            )
        for error in reader.errors:
            self.finding(BAD_ANSWER, case, error)
        answered = True
        for sid in sorted(case.owed):
            answer = reader.streams.get(sid)
            if answer is None or not answer.done:
                answered = False
                if out.closed or reader.goaway is not None:
                    if not case.may_close:
                        self.finding(CRASH, case, f"the connection closed without an answer on stream {sid}")
                elif not reader.errors:
                    self.finding(HANG, case, f"no answer on stream {sid} within {self.options.timeout:g} s")
                continue
            self.check_answer(case, sid, answer)
        if case.owed and answered:
            stats.answered += 1
        if case.must_close and not out.closed and not reader.errors:
            self.finding(HANG, case, f"the proxy did not close the connection within {self.options.timeout:g} s")
        for sid, answer in reader.streams.items():
            if sid not in case.owed and answer.done and answer.reset is None and answer.headers:
                self.check_answer(case, sid, answer, owed=False)

    def check_answer(self, case: G.GrpcCase, sid: int, answer: G.Answer, *, owed: bool = True) -> None:
        if answer.reset is not None:
            self.report.statuses[f"RST_STREAM {answer.reset}"] += 1
            return
        if self.verbose:
            self.report.trace.append(f"stream {sid}: {answer.headers}"[:800])
        status = answer.trailer("grpc-status")
        if status is None or not status.isdigit():
            self.finding(BAD_ANSWER, case, f"stream {sid} ended without grpc-status: {answer.headers}"[:400])
            return
        code = int(status)
        self.report.statuses[GRPC_NAMES[code] if code < len(GRPC_NAMES) else status] += 1
        text = urllib.parse.unquote(answer.trailer("grpc-message") or "")
        if code == 2 and F.internal_error(1, text):
            self.finding(INTERNAL_ERROR, case, f"grpc-status UNKNOWN: {text[:200]!r}")
        messages = answer.messages()
        if messages is None:
            self.finding(BAD_ANSWER, case, f"stream {sid}: broken gRPC framing in the answer")
            return
        response = _response_type(case.path) if owed and sid in case.owed else None
        if response is None or not case.path or case.category == "unknown-method":
            return
        for raw in messages:
            msg = response()
            try:
                msg.ParseFromString(raw)
            except DecodeError as exc:
                self.finding(BAD_ANSWER, case, f"stream {sid}: not a {response.__name__}: {exc}")
                return
            st = _status_of(msg)
            if st is not None and st[0] == d.INTERNAL_SERVER_ERROR and F.internal_error(1, st[1]):
                self.finding(INTERNAL_ERROR, case, f"Status INTERNAL_SERVER_ERROR: {st[1][:200]!r}")

    async def probe(self, case: G.GrpcCase) -> None:
        """A QueryRoute on a fresh connection must be answered after every case."""
        try:
            out = await self.exchange(self.probe_steps, frozenset({1}), reads=True, must_close=False, eof=False)
        except _Unreachable as exc:
            self.finding(CRASH, case, f"the proxy stopped accepting connections: {exc}")
            self.stopped = True
            return
        except trio.TooSlowError:
            out = None
        answer = out.reader.streams.get(1) if out is not None else None
        if answer is None or not answer.done or answer.trailer("grpc-status") != "0":
            got = "nothing" if answer is None else f"{answer.headers}"[:300]
            self.finding(HANG, case, f"a QueryRoute on a fresh connection after it was not answered: {got}")
            self.stopped = True  # what follows would only report the same
        elif self.verbose:
            self.report.trace.append("the QueryRoute after it was answered")

    async def worker(self, next_case: Callable[[], int | None]) -> None:
        o = self.options
        while not self.stopped and (number := next_case()) is not None:
            category = random.Random(f"{self.seed}:{number}").choice(o.categories) if o.categories else None
            case = G.make_case(
                self.seed, number, self.methods, unsafe=o.unsafe, max_message=o.max_message, category=category
            )
            if self.verbose:
                self.report.replayed = case
            self.report.cases += 1
            try:
                await self.run_case(case)
            except _Unreachable as exc:
                self.finding(CRASH, case, f"the proxy stopped accepting connections: {exc}")
                self.stopped = True


def _status_of(msg: Proto) -> tuple[int, str] | None:
    """(code, message) of a response's rocketmq.v2 Status, None without one."""
    if "status" in type(msg).DESCRIPTOR.fields_by_name and msg.HasField("status"):
        status = msg.status
        return int(status.code), str(status.message)
    return None


async def fuzz_grpc(options: GrpcFuzzOptions, *, only_case: int | None = None) -> GrpcReport:
    """Run the gRPC fuzzer (or, with ``only_case``, replay one case) and return its report."""
    seed = options.seed if options.seed is not None else random.randrange(2**32)
    run = _Run(options, seed)
    run.verbose = only_case is not None
    try:
        await run.connect()
        run.report.connections = 0
    except _Unreachable as exc:
        run.report.unreachable = str(exc)
        return run.report
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

    workers = 1 if only_case is not None else max(1, options.concurrency)
    # a case takes at most its pauses (a few seconds) and two timeouts, its probe's included
    with trio.move_on_after(options.seconds + 4 * options.timeout + 10):
        async with trio.open_nursery() as nursery:
            for _ in range(workers):
                nursery.start_soon(run.worker, next_case)
    run.report.elapsed = time.monotonic() - start
    return run.report


def _run_args(options: GrpcFuzzOptions) -> str:
    """The options besides the target and --unsafe that decide a case's bytes."""
    out = "".join(f" --category {c}" for c in options.categories)
    if options.topic != DEFAULT_TOPIC:
        out += f" --topic {options.topic}"
    if options.group != DEFAULT_GROUP:
        out += f" --group {options.group}"
    if options.max_message != G.DEFAULT_MAX_MESSAGE:
        out += f" --max-message {options.max_message}"
    return out


def show_replay(report: GrpcReport) -> None:
    case = report.replayed
    if case is None:
        return
    print(case.describe())
    print(f"  owed {sorted(case.owed)}, may close {case.may_close}, must close {case.must_close}")
    for step in case.steps:
        if isinstance(step, G.Send):
            print(f"  send {len(step.data)} bytes: {step.data[:64].hex()}")
        elif isinstance(step, G.Data):
            print(
                f"  DATA on stream {step.stream_id}: {len(step.data)} bytes{' END_STREAM' if step.end_stream else ''}"
            )
        else:
            print(f"  pause {step.seconds:g} s")
    for line in report.trace:
        print(f"  {line}")
