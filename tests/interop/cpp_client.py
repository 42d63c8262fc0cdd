"""Drive the official RocketMQ C++ client against our servers, one subprocess per scenario.

The client is PyPI ``rocketmq`` 0.4.4: a ctypes wrapper around the ``librocketmq.so`` it
bundles (apache/rocketmq-client-cpp 1.2.3). Each scenario runs ``cpp_child.py`` in a fresh
Python process with a hard deadline, because the native client starts threads, blocks in
sends for up to ~10 s when a server does not answer, and can crash the interpreter. The
child prints JSON lines; this module turns them into :class:`ScenarioResult` objects.

Building a scenario (plain data, nothing runs yet)::

    produce(ns, "TopicTest", 3, tags="TagA", keys="K-{i}", properties={"p": "v{i}"})
    produce(ns, "TopicTest", 5, method="orderly", sharding_key=7)      # also batch, oneway, async
    produce(ns, "TopicTest", 1, body_size=5000)                        # >= 4096: zlib-compressed
    push_consume(ns, "TopicTest", 3, group="CG", expression="TagA || TagB", fail_first=1)
    pull_consume(ns, "TopicTest")                                      # every queue to its end

Running it::

    result = run_sync(spec).check()                  # from sync code
    result = (await run_scenario(spec)).check()      # from a pytest-trio test

    async with start_scenario(push_consume(ns, "T", 2, group="CG")) as run:
        await run.wait_for("started")                # the consumer has started and rebalanced
        ...                                          # send with our own client meanwhile
        result = (await run.wait()).check()

``check()`` raises :class:`ScenarioFailed` (an ``AssertionError``) with the events, stderr
and the tail of the C++ client's own log unless the child exited 0 in time without errors.
``result.sends`` / ``result.messages`` / ``result.deliveries`` are typed views of the events.

Templates: ``body``, ``keys``, ``tags`` and property values are ``str.format`` templates
with ``{i}``, the message's index. ``body_size`` repeats the formatted body to that exact
length (``b"x"`` when the body is empty), so ``spec.messages[i].body`` is what a consumer
should get back.

Test modules mark themselves with ``pytestmark = [pytest.mark.interop, requires_cpp_client]``;
``requires_cpp_client`` skips with the import error when ``rocketmq`` cannot be loaded.

What a test should know about this client (details in ``tests/vectors/cpp-client/README.md``):

* Push consumers start from CONSUME_FROM_LAST_OFFSET (the C API has no setter). For a new
  group the client asks QUERY_CONSUMER_OFFSET; on 22 QUERY_NOT_FOUND it uses GET_MAX_OFFSET
  and skips what is already stored. Messages sent before the consumer started are only seen
  if the broker answers offset 0 for a new group whose queue still starts at 0, as the Java
  broker does. Otherwise start the consumer first and wait for ``"started"``.
* ``fail_first=k`` makes the first ``k`` deliveries return RECONSUME_LATER through a raw
  callback (the wrapper's ``subscribe`` callback cannot fail). Concurrent consumers then send
  CONSUMER_SEND_MSG_BACK and get the message again from ``%RETRY%<group>``; orderly
  consumers suspend the queue for a moment and redeliver locally.
* Received bodies are read through a C string: a body with a NUL byte comes back cut at
  the NUL. Properties can only be read by name (``DEFAULT_PROPERTY_KEYS`` + ``property_keys``).
* The batch send result has an empty ``msg_id``; oneway sends have no result at all.
* ``FetchSubscriptionMessageQueues`` succeeds with no queues when the name server is
  unreachable; the pull scenario reports that as an error.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

import pytest
import trio

__all__ = [
    "DEFAULT_PROPERTY_KEYS",
    "Credentials",
    "MessageSpec",
    "ProduceSpec",
    "PullConsumeSpec",
    "PushConsumeSpec",
    "ReceivedMessage",
    "ScenarioFailed",
    "ScenarioResult",
    "ScenarioRun",
    "SendMethod",
    "SendOutcome",
    "make_messages",
    "produce",
    "pull_consume",
    "push_consume",
    "requires_cpp_client",
    "run_scenario",
    "run_sync",
    "start_scenario",
    "unavailable_reason",
]

CHILD_SCRIPT = Path(__file__).with_name("cpp_child.py")

#: Seconds the child may run past its spec's ``time_limit`` before it is killed: a native
#: send or shutdown in progress at the soft deadline can take ~10 s to return.
SHUTDOWN_GRACE = 15.0

#: Properties read from every received message (the C API cannot list them).
DEFAULT_PROPERTY_KEYS = (
    "KEYS",
    "TAGS",
    "UNIQ_KEY",
    "WAIT",
    "DELAY",
    "RETRY_TOPIC",
    "REAL_TOPIC",
    "REAL_QID",
    "ORIGIN_MESSAGE_ID",
    "RECONSUME_TIME",
    "MAX_RECONSUME_TIMES",
    "CONSUME_START_TIME",
    "MIN_OFFSET",
    "MAX_OFFSET",
    "TRAN_MSG",
    "PGROUP",
    "CLUSTER",
    "MSG_REGION",
    "TRACE_ON",
)

_CLIENT_LOG_LIMIT = 1 << 20  # keep the last 1 MiB of the C++ client's log in a result
_STDERR_LIMIT = 1 << 20

SendMethod = Literal["sync", "oneway", "batch", "orderly", "oneway_orderly", "async"]
LogLevel = Literal["fatal", "error", "warn", "info", "debug", "trace"]


# ---------------------------------------------------------------------------------------------
# availability


@functools.cache
def unavailable_reason() -> str | None:
    """None when ``rocketmq.client`` imports in a fresh interpreter, else why not.

    The probe runs in a subprocess so the test process never loads ``librocketmq.so``.
    """
    with tempfile.TemporaryDirectory(prefix="rmq-cpp-probe-") as home:
        code = f"import os; os.environ['HOME'] = {home!r}; import rocketmq.client"
        try:
            proc = subprocess.run(  # noqa: S603 - sys.executable with a fixed script
                [sys.executable, "-c", code],
                capture_output=True,
                timeout=60,
                stdin=subprocess.DEVNULL,
                cwd=home,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"cannot probe the rocketmq C++ client: {exc!r}"
    if proc.returncode != 0:
        last = proc.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["(no output)"]
        return f"the rocketmq C++ client (pip install rocketmq==0.4.4) cannot be imported: {last[0]}"
    return None


#: ``pytestmark = [pytest.mark.interop, requires_cpp_client]``. Skips without the client,
#: except in CI (``CI`` set), where scripts/bootstrap.sh installs it: there the tests run
#: and fail with the reason rather than pass by skipping.
requires_cpp_client = pytest.mark.skipif(
    unavailable_reason() is not None and not os.environ.get("CI"),
    reason=str(unavailable_reason()),
)


# ---------------------------------------------------------------------------------------------
# scenario specs


@dataclass(frozen=True)
class Credentials:
    """ACL session credentials (``set_session_credentials``); ``channel`` becomes OnsChannel."""

    access_key: str
    secret_key: str
    channel: str = "LOCAL"


@dataclass(frozen=True)
class MessageSpec:
    """One message to send. ``topic`` overrides the scenario's topic."""

    body: bytes = b""
    keys: str | None = None
    tags: str | None = None
    properties: Mapping[str, str] = field(default_factory=dict)
    delay_level: int | None = None
    sharding_key: int | None = None
    topic: str | None = None

    def to_child(self) -> dict[str, Any]:
        return {
            "body_b64": base64.b64encode(self.body).decode("ascii"),
            "keys": self.keys,
            "tags": self.tags,
            "properties": dict(self.properties),
            "delay_level": self.delay_level,
            "sharding_key": self.sharding_key,
            "topic": self.topic,
        }


def _sized(body: bytes, size: int | None) -> bytes:
    if size is None:
        return body
    unit = body or b"x"
    return (unit * (size // len(unit) + 1))[:size]


def make_messages(
    count: int,
    *,
    body: str | bytes = "msg-{i}",
    keys: str | None = "KEY-{i}",
    tags: str | None = None,
    properties: Mapping[str, str] | None = None,
    delay_level: int | None = None,
    body_size: int | None = None,
    sharding_key: int | Callable[[int], int] | None = None,
    topic: str | None = None,
) -> tuple[MessageSpec, ...]:
    """``count`` messages from templates; ``{i}`` in str fields is the message index.

    A ``bytes`` body is used verbatim (it may contain NUL: the child sends it with
    SetByteMessageBody).
    """
    out = []
    for i in range(count):
        raw = body if isinstance(body, bytes) else body.format(i=i).encode("utf-8")
        key = sharding_key(i) if callable(sharding_key) else sharding_key
        out.append(
            MessageSpec(
                body=_sized(raw, body_size),
                keys=None if keys is None else keys.format(i=i),
                tags=None if tags is None else tags.format(i=i),
                properties={k: v.format(i=i) for k, v in (properties or {}).items()},
                delay_level=delay_level,
                sharding_key=key,
                topic=topic,
            )
        )
    return tuple(out)


def _child_value(value: Any) -> Any:
    if isinstance(value, MessageSpec):
        return value.to_child()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _child_value(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): _child_value(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [_child_value(v) for v in value]
    return value


class _Spec:
    scenario: ClassVar[str]
    time_limit: float

    def to_child(self, home: Path) -> dict[str, Any]:
        """The JSON object ``cpp_child.py`` takes as its argument."""
        assert dataclasses.is_dataclass(self)
        args = {f.name: _child_value(getattr(self, f.name)) for f in dataclasses.fields(self)}
        args.update(scenario=self.scenario, home=str(home))
        return args


@dataclass(frozen=True)
class ProduceSpec(_Spec):
    """Send ``messages`` with one ``method``, returning one :class:`SendOutcome` per send.

    ``batch`` sends ``batch_size`` messages per SendBatchMessage (all when None);
    ``orderly``/``oneway_orderly`` select queue ``sharding_key % queue_count`` (per-message
    ``sharding_key`` first); ``async`` issues every send, then waits for all callbacks.
    ``linger`` is a sleep before ``shutdown()`` (None: 0.5 s for oneway methods, so the
    bytes leave before the socket closes; else 0). ``compress_over`` is the body size from
    which the client compresses (its default is 4096).
    """

    scenario: ClassVar[str] = "produce"
    namesrv: str
    topic: str
    messages: tuple[MessageSpec, ...]
    method: SendMethod = "sync"
    group: str = "PG_cpp_interop"
    send_timeout_ms: int | None = None
    batch_size: int | None = None
    sharding_key: int = 0
    retry_times: int = 3
    compress_level: int | None = None
    compress_over: int | None = None
    max_message_size: int | None = None
    credentials: Credentials | None = None
    instance_name: str | None = None
    stop_on_error: bool = False
    linger: float | None = None
    time_limit: float = 30.0
    log_level: LogLevel | None = None


@dataclass(frozen=True)
class PushConsumeSpec(_Spec):
    """A PushConsumer subscribed to ``topic`` with ``expression``.

    Runs until ``count`` deliveries returned CONSUME_SUCCESS (then ``linger`` more seconds,
    to catch duplicates) or until ``time_limit``; ``count=0`` consumes for the whole
    ``time_limit`` and still succeeds. The first ``fail_first`` deliveries return
    RECONSUME_LATER.
    """

    scenario: ClassVar[str] = "push_consume"
    namesrv: str
    topic: str
    group: str = "CG_cpp_interop"
    expression: str = "*"
    count: int = 1
    fail_first: int = 0
    orderly: bool = False
    broadcasting: bool = False
    linger: float = 0.0
    thread_count: int | None = None
    batch_max_size: int | None = None
    property_keys: tuple[str, ...] = ()
    credentials: Credentials | None = None
    instance_name: str | None = None
    time_limit: float = 30.0
    log_level: LogLevel | None = None


@dataclass(frozen=True)
class PullConsumeSpec(_Spec):
    """A PullConsumer reading every queue of ``topic`` from ``start_offsets`` (default 0).

    With ``count=None`` it stops after one pass in which every queue reached NO_NEW_MSG (a
    BROKER_TIMEOUT queue is retried); with a count it keeps passing until that many messages
    were pulled or ``time_limit`` passes.
    """

    scenario: ClassVar[str] = "pull_consume"
    namesrv: str
    topic: str
    group: str = "CG_cpp_interop_pull"
    expression: str = "*"
    count: int | None = None
    max_num: int = 32
    start_offsets: Mapping[int, int] = field(default_factory=dict)
    property_keys: tuple[str, ...] = ()
    credentials: Credentials | None = None
    time_limit: float = 30.0
    log_level: LogLevel | None = None


Spec = ProduceSpec | PushConsumeSpec | PullConsumeSpec


def produce(
    namesrv: str,
    topic: str,
    count: int = 1,
    *,
    method: SendMethod = "sync",
    messages: Sequence[MessageSpec] | None = None,
    body: str | bytes = "msg-{i}",
    keys: str | None = "KEY-{i}",
    tags: str | None = None,
    properties: Mapping[str, str] | None = None,
    delay_level: int | None = None,
    body_size: int | None = None,
    **options: Any,
) -> ProduceSpec:
    """A :class:`ProduceSpec` of ``count`` templated messages (or the given ``messages``).

    ``options`` are the other :class:`ProduceSpec` fields (group, sharding_key, batch_size,
    credentials, time_limit, ...).
    """
    if messages is None:
        messages = make_messages(
            count, body=body, keys=keys, tags=tags, properties=properties, delay_level=delay_level, body_size=body_size
        )
    return ProduceSpec(namesrv=namesrv, topic=topic, messages=tuple(messages), method=method, **options)


def push_consume(namesrv: str, topic: str, count: int = 1, **options: Any) -> PushConsumeSpec:
    """A :class:`PushConsumeSpec`; ``options`` are its other fields."""
    return PushConsumeSpec(namesrv=namesrv, topic=topic, count=count, **options)


def pull_consume(namesrv: str, topic: str, count: int | None = None, **options: Any) -> PullConsumeSpec:
    """A :class:`PullConsumeSpec`; ``options`` are its other fields."""
    return PullConsumeSpec(namesrv=namesrv, topic=topic, count=count, **options)


# ---------------------------------------------------------------------------------------------
# results


@dataclass(frozen=True)
class SendOutcome:
    """One send (one batch for ``batch``). ``status`` is a SendStatus name, None for oneway."""

    method: str
    index: int
    count: int
    ok: bool
    status: str | None
    msg_id: str | None
    offset: int | None
    queue_index: int | None
    queue_count: int | None
    error: str | None
    error_type: str | None
    elapsed: float

    @classmethod
    def from_event(cls, e: Mapping[str, Any]) -> SendOutcome:
        return cls(
            method=e["method"],
            index=e["index"],
            count=e.get("count", 1),
            ok=e["ok"],
            status=e.get("status"),
            msg_id=e.get("msg_id"),
            offset=e.get("offset"),
            queue_index=e.get("queue_index"),
            queue_count=e.get("queue_count"),
            error=e.get("error"),
            error_type=e.get("error_type"),
            elapsed=e.get("elapsed", 0.0),
        )


@dataclass(frozen=True)
class ReceivedMessage:
    """A message as the C++ client handed it to the application.

    ``result`` is CONSUME_SUCCESS or RECONSUME_LATER (what the push callback returned) or
    PULLED; ``delivery`` is the push callback's call number. ``msg_id`` is the UNIQ_KEY when
    the message has one, else the offset id.
    """

    topic: str
    tags: str
    keys: str
    body: bytes
    msg_id: str
    queue_id: int
    queue_offset: int
    commit_log_offset: int
    reconsume_times: int
    delay_time_level: int
    store_size: int
    born_timestamp: int
    store_timestamp: int
    properties: Mapping[str, str]
    result: str
    delivery: int | None

    @classmethod
    def from_event(cls, e: Mapping[str, Any]) -> ReceivedMessage:
        return cls(
            topic=e["topic"],
            tags=e["tags"],
            keys=e["keys"],
            body=base64.b64decode(e["body_b64"]),
            msg_id=e["msg_id"],
            queue_id=e["queue_id"],
            queue_offset=e["queue_offset"],
            commit_log_offset=e["commit_log_offset"],
            reconsume_times=e["reconsume_times"],
            delay_time_level=e["delay_time_level"],
            store_size=e["store_size"],
            born_timestamp=e["born_timestamp"],
            store_timestamp=e["store_timestamp"],
            properties=dict(e["properties"]),
            result=e["result"],
            delivery=e.get("delivery"),
        )


class ScenarioFailed(AssertionError):
    """Raised by :meth:`ScenarioResult.check` and :meth:`ScenarioRun.wait_for`."""


@dataclass
class ScenarioResult:
    """What one child run produced. ``returncode`` is negative when a signal ended it."""

    spec: Spec
    returncode: int | None
    timed_out: bool
    duration: float
    events: list[dict[str, Any]]
    stray_stdout: list[str]
    stderr: str
    client_log: str
    work_dir: Path | None

    def events_of(self, name: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("event") == name]

    @property
    def errors(self) -> list[dict[str, Any]]:
        return self.events_of("error")

    @property
    def completed(self) -> bool:
        """The child reached its ``done`` line (it was not killed and did not crash)."""
        return bool(self.events_of("done"))

    @property
    def aborted_in_shutdown(self) -> bool:
        """librocketmq 0.4.4 can abort inside a push consumer's ``shutdown()`` (one of its own
        threads lets ``boost::thread_interrupted`` escape) after everything the scenario asked
        for had happened: the child said so just before shutting down, then died of SIGABRT."""
        last = self.events_of("shutting_down")[-1:]
        return (
            bool(last)
            and bool(last[0].get("ok"))
            and self.returncode == -6
            and "boost::thread_interrupted" in self.stderr
        )

    @property
    def ok(self) -> bool:
        if self.timed_out or self.errors:
            return False
        return (self.returncode == 0 and self.completed) or self.aborted_in_shutdown

    @property
    def sends(self) -> list[SendOutcome]:
        return [SendOutcome.from_event(e) for e in self.events_of("send")]

    @property
    def deliveries(self) -> list[ReceivedMessage]:
        """Every message event, failed deliveries included, in the order they happened."""
        return [ReceivedMessage.from_event(e) for e in self.events_of("message")]

    @property
    def messages(self) -> list[ReceivedMessage]:
        """Messages consumed successfully (push) or pulled (pull)."""
        return [m for m in self.deliveries if m.result != "RECONSUME_LATER"]

    def check(self) -> ScenarioResult:
        """Return self if :attr:`ok`, else raise :class:`ScenarioFailed` with diagnostics."""
        if not self.ok:
            raise ScenarioFailed(self.describe())
        return self

    def describe(self, *, log_tail_lines: int = 40) -> str:
        state = "timed out and was killed" if self.timed_out else f"exited with {self.returncode}"
        lines = [
            f"C++ client {self.spec.scenario} {state} after {self.duration:.2f}s"
            f" (spec time_limit {self.spec.time_limit}s)"
        ]
        lines += ["events:"] + ([f"  {json.dumps(e)[:400]}" for e in self.events] or ["  (none)"])
        if self.stray_stdout:
            lines += ["stray stdout:"] + [f"  {s[:400]}" for s in self.stray_stdout[-20:]]
        if self.stderr.strip():
            lines += ["stderr (tail):"] + [f"  {s}" for s in self.stderr.strip().splitlines()[-30:]]
        if self.client_log:
            tail = self.client_log.strip().splitlines()[-log_tail_lines:]
            lines += ["C++ client log (tail):"] + [f"  {s}" for s in tail]
        if self.work_dir is not None:
            lines.append(f"work dir: {self.work_dir}")
        return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# running


class _WorkDir:
    """The child's HOME and cwd: the given directory (kept), or a temp dir removed afterwards."""

    def __init__(self, given: str | os.PathLike[str] | None) -> None:
        if given is None:
            self.path = Path(tempfile.mkdtemp(prefix="rmq-cpp-client-"))
            self.keep = False
        else:
            self.path = Path(given)
            self.path.mkdir(parents=True, exist_ok=True)
            self.keep = True

    def collect_log(self) -> str:
        files = sorted((self.path / "logs" / "rocketmq-cpp").glob("*.log*"))
        text = "".join(f.read_text("utf-8", errors="replace") for f in files if f.is_file())
        return text[-_CLIENT_LOG_LIMIT:]

    def finish(self) -> tuple[str, Path | None]:
        log = self.collect_log()
        self.discard()
        return log, (self.path if self.keep else None)

    def discard(self) -> None:
        if not self.keep:
            shutil.rmtree(self.path, ignore_errors=True)


class _Lines:
    """Splits the child's stdout into events (JSON objects with "event") and stray lines."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.stray: list[str] = []
        self._partial = bytearray()

    def feed(self, data: bytes) -> int:
        """Consume a chunk; returns how many events it completed."""
        self._partial += data
        before = len(self.events)
        while (nl := self._partial.find(b"\n")) >= 0:
            self._line(bytes(self._partial[:nl]))
            del self._partial[: nl + 1]
        return len(self.events) - before

    def close(self) -> None:
        if self._partial:
            self._line(bytes(self._partial))
            self._partial.clear()

    def _line(self, raw: bytes) -> None:
        text = raw.decode("utf-8", errors="replace").strip()
        if not text:
            return
        try:
            obj = json.loads(text)
        except ValueError:
            obj = None
        if isinstance(obj, dict) and "event" in obj:
            self.events.append(obj)
        else:
            self.stray.append(text)


def _command(spec: Spec, home: Path) -> list[str]:
    text = json.dumps(spec.to_child(home))
    if len(text) > 64 * 1024:  # Linux caps one argument at 128 KiB
        path = home / "spec.json"
        path.write_text(text, encoding="utf-8")
        text = f"@{path}"
    return [sys.executable, "-X", "faulthandler", str(CHILD_SCRIPT), text]


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(PYTHONUNBUFFERED="1", PYTHONIOENCODING="utf-8", PYTHONDONTWRITEBYTECODE="1")
    return env


def _kill_after(spec: Spec, kill_after: float | None) -> float:
    return spec.time_limit + SHUTDOWN_GRACE if kill_after is None else kill_after


def run_sync(
    spec: Spec,
    *,
    kill_after: float | None = None,
    work_dir: str | os.PathLike[str] | None = None,
) -> ScenarioResult:
    """Run ``spec`` in a child and wait for it; SIGKILL it after ``kill_after`` seconds.

    A killed child still gives a result (``timed_out``, the events printed before). ``kill_after``
    defaults to ``spec.time_limit + SHUTDOWN_GRACE``. ``work_dir`` (kept) is the
    child's HOME, where the C++ client writes ``logs/rocketmq-cpp/``; by default a temporary
    directory is used and removed after its log was read into ``client_log``.
    """
    wd = _WorkDir(work_dir)
    hard = _kill_after(spec, kill_after)
    timed_out = False
    t0 = time.monotonic()
    try:
        proc = subprocess.Popen(  # noqa: S603 - our own script with sys.executable
            _command(spec, wd.path),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=wd.path,
            env=_child_env(),
        )
    except BaseException:
        wd.discard()
        raise
    try:
        try:
            out, err = proc.communicate(timeout=hard)
        except subprocess.TimeoutExpired:
            timed_out = True
            proc.kill()
            out, err = proc.communicate()
    except BaseException:
        proc.kill()
        proc.wait()
        wd.discard()
        raise
    duration = time.monotonic() - t0
    lines = _Lines()
    lines.feed(out)
    lines.close()
    log, kept = wd.finish()
    return ScenarioResult(
        spec=spec,
        returncode=proc.returncode,
        timed_out=timed_out,
        duration=duration,
        events=lines.events,
        stray_stdout=lines.stray,
        stderr=err.decode("utf-8", errors="replace")[-_STDERR_LIMIT:],
        client_log=log,
        work_dir=kept,
    )


class ScenarioRun:
    """A running child, as yielded by :func:`start_scenario`."""

    def __init__(self, spec: Spec, proc: trio.Process, wd: _WorkDir, kill_after: float) -> None:
        self.spec = spec
        self._proc = proc
        self._wd = wd
        self._kill_after = kill_after
        self._lines = _Lines()
        self._stderr = bytearray()
        self._changed = trio.Event()
        self._stdout_closed = False
        self._timed_out = False
        self._t0 = trio.current_time()
        self._finished = trio.Event()
        self._result: ScenarioResult | None = None

    @property
    def pid(self) -> int:
        return int(self._proc.pid)

    @property
    def events(self) -> list[dict[str, Any]]:
        """The events printed so far."""
        return list(self._lines.events)

    def kill(self) -> None:
        """SIGKILL the child now, e.g. to test how a server handles a client that vanishes."""
        self._proc.kill()

    def stop_sending(self) -> None:
        """Ask a producing child to send nothing more (SIGUSR1): it ends the send it is in,
        reports ``stopped`` and shuts down as if its messages were all sent."""
        self._proc.send_signal(signal.SIGUSR1)

    async def wait_for(
        self,
        event: str,
        *,
        timeout: float = 30.0,  # noqa: ASYNC109 - raises ScenarioFailed with the events seen
        where: Callable[[dict[str, Any]], bool] | None = None,
    ) -> dict[str, Any]:
        """The first event named ``event`` (and matching ``where``), waiting up to ``timeout``.

        Raises :class:`ScenarioFailed` listing the events so far when the time passes or the
        child ends first.
        """
        seen = 0
        with trio.move_on_after(timeout):
            while True:
                events = self._lines.events
                for e in events[seen:]:
                    if e.get("event") == event and (where is None or where(e)):
                        return e
                seen = len(events)
                if self._stdout_closed:
                    break
                await self._changed.wait()
        why = "the child ended" if self._stdout_closed else f"{timeout}s passed"
        raise ScenarioFailed(
            f"no {event!r} event from the C++ client before {why}; events so far:\n"
            + "\n".join(f"  {json.dumps(e)[:400]}" for e in self._lines.events)
        )

    async def wait(self) -> ScenarioResult:
        """Wait until the child exits (or is killed at ``kill_after``); the result."""
        await self._finished.wait()
        assert self._result is not None
        return self._result

    def _notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def _read_stdout(self) -> None:
        assert self._proc.stdout is not None
        try:
            while chunk := await self._proc.stdout.receive_some(65536):
                if self._lines.feed(chunk):
                    self._notify()
        finally:
            self._lines.close()
            self._stdout_closed = True
            self._notify()

    async def _read_stderr(self) -> None:
        assert self._proc.stderr is not None
        while chunk := await self._proc.stderr.receive_some(65536):
            self._stderr += chunk
            if len(self._stderr) > 2 * _STDERR_LIMIT:
                del self._stderr[:-_STDERR_LIMIT]

    async def _supervise(self) -> None:
        try:
            async with trio.open_nursery() as readers:
                readers.start_soon(self._read_stdout)
                readers.start_soon(self._read_stderr)
                with trio.move_on_after(self._kill_after) as deadline:
                    await self._proc.wait()
                if deadline.cancelled_caught:
                    self._timed_out = True
                    self._proc.kill()
                    await self._proc.wait()
                # The pipes reach EOF when the child is gone; bound it anyway.
                readers.cancel_scope.deadline = trio.current_time() + 5.0
        finally:
            with trio.CancelScope(shield=True):
                if self._proc.returncode is None:
                    self._proc.kill()
                    await self._proc.wait()
                duration = trio.current_time() - self._t0
                log, kept = await trio.to_thread.run_sync(self._wd.finish)
                self._result = ScenarioResult(
                    spec=self.spec,
                    returncode=self._proc.returncode,
                    timed_out=self._timed_out,
                    duration=duration,
                    events=list(self._lines.events),
                    stray_stdout=list(self._lines.stray),
                    stderr=self._stderr.decode("utf-8", errors="replace")[-_STDERR_LIMIT:],
                    client_log=log,
                    work_dir=kept,
                )
                self._stdout_closed = True
                self._notify()
                self._finished.set()


@asynccontextmanager
async def start_scenario(
    spec: Spec,
    *,
    kill_after: float | None = None,
    work_dir: str | os.PathLike[str] | None = None,
) -> AsyncIterator[ScenarioRun]:
    """Start ``spec`` in a child; the block runs while it does.

    Leaving the block normally waits for the child to end by itself (at most until the
    ``kill_after``, see :func:`run_sync`); leaving it with an exception or a cancellation
    kills the child. Either way the child is reaped before this returns.
    """
    wd = _WorkDir(work_dir)
    try:
        proc = await trio.lowlevel.open_process(
            _command(spec, wd.path),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=wd.path,
            env=_child_env(),
        )
    except BaseException:
        wd.discard()
        raise
    run = ScenarioRun(spec, proc, wd, _kill_after(spec, kill_after))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(run._supervise)
        yield run


async def run_scenario(
    spec: Spec,
    *,
    kill_after: float | None = None,
    work_dir: str | os.PathLike[str] | None = None,
) -> ScenarioResult:
    """Async :func:`run_sync`: run ``spec`` in a child while other Trio tasks keep running."""
    async with start_scenario(spec, kill_after=kill_after, work_dir=work_dir) as run:
        return await run.wait()
