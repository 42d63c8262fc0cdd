"""Load under faults, and the history of every send attempt it made.

A *send* is one message the application wants stored (its key goes in KEYS); an *attempt*
is one request for it, with an id of its own in the ``FA`` property. Our producer runs
with retry_times=0 and ``PyLoad`` tries a failed send again itself, as a new attempt, so
two stored copies of one attempt are the broker's doing, while two attempts of one send
stored both are the client's (a retry after an answer that never came).

``PinnedLoad`` sends SEND_MESSAGE_V2 itself, one attempt per send, to a stale master.
The official C++ client (``CppLoad``) sends in a child process. Its plain sync send retries
inside the library with the same message (cpp_child.py sets no retry count for it; a first
send of a new client was seen stored twice, in two queues), so it sends orderly
(SendMessageOrderly, which takes the retry count: 0), each message to the queue its index
selects: each message is then one attempt, with its own ``FA``.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import trio

from rmq.client import Message, MQAdmin, Producer
from rmq.client.errors import MQClientError
from rmq.client.ids import UniqueIdGenerator
from rmq.protocol import RequestCode
from rmq.protocol import properties as P
from rmq.protocol.errors import ProtocolError
from rmq.protocol.headers import SendMessageRequestHeader
from rmq.protocol.message import parse_offset_msg_id
from tests.interop.cpp_client import make_messages, produce, start_scenario

from .clusters import ProcessCluster

ATTEMPT = "FA"  # the property holding an attempt's id
TOPIC = "FaultTopic"
DOWN_RETRY = 0.005  # seconds between a stale sender's tries of a member that is down
MAX_WAVES = 2000  # C++ waves in one run (each is seconds long: a bound a run never meets)


@dataclass
class Attempt:
    id: str
    key: str
    client: str  # "py" (a long-lived producer), "py-new" (a renewed one), "pinned" or "cpp"
    topic: str
    started: float | None  # trio clock; None for the C++ client's (its own clock)
    answered: float | None = None
    status: str = ""  # SEND_OK, another SendStatus, or "error: ..."
    store: str = ""  # host:port of the member that answered SEND_OK
    offset: int = -1  # CommitLog offset it reported
    queue_id: int = -1
    queue_offset: int = -1

    @property
    def ok(self) -> bool:
        return self.status == "SEND_OK"


class History:
    """Every attempt, in the order they were made."""

    def __init__(self, t0: float | None = None) -> None:
        self.attempts: list[Attempt] = []
        self.t0 = trio.current_time() if t0 is None else t0  # times in messages count from here

    def acked(self) -> list[Attempt]:
        return [a for a in self.attempts if a.ok]

    def first_ok_after(self, t: float, *, not_from: str | None = None, client: str | None = None) -> Attempt | None:
        """The earliest SEND_OK answered after ``t`` (by a member other than ``not_from``, to
        ``client`` when given)."""
        found = [a for a in self.attempts if a.ok and a.answered is not None and a.answered > t]
        if not_from is not None:
            found = [a for a in found if a.store != not_from]
        if client is not None:
            found = [a for a in found if a.client == client]
        return min(found, key=lambda a: a.answered or 0.0, default=None)

    def dump(self, path: Path) -> None:
        with open(path, "w") as f:
            for a in self.attempts:
                f.write(json.dumps(asdict(a)) + "\n")


def body_of(attempt: str, size: int) -> bytes:
    head = f"{attempt}|".encode()
    return head + b"x" * max(0, size - len(head))


class PyLoad:
    """``senders`` tasks, each with a producer of its own, sending one message at a time,
    ``interval`` s apart, until ``stop`` is set or ``max_sends`` sends were made (each up to
    ``tries`` attempts). Even senders keep their producer for the whole run, as a long-lived
    application does (client "py"), and send to TOPIC; odd ones start a new one every
    ``renew`` s (client "py-new"), as clients that come and go do, each reading the routes
    afresh; every ``topic_every``-th one sends to a new topic, which its first send creates:
    topics come into being while members are down or cut off. (Not every one: a new topic
    makes the master register again, which would mend a wrong route sooner than anything
    else in a real system does.)"""

    def __init__(
        self,
        namesrv: str,
        history: History,
        *,
        senders: int = 2,
        interval: float = 0.02,
        max_sends: int = 5000,
        tries: int = 2,
        body_size: int = 200,
        send_timeout: float = 3.0,
        renew: float = 10.0,
        topic_every: int = 3,
    ) -> None:
        self.namesrv = namesrv
        self.history = history
        self.senders = senders
        self.interval = interval
        self.max_sends = max_sends
        self.tries = tries
        self.body_size = body_size
        self.send_timeout = send_timeout
        self.renew = renew
        self.topic_every = topic_every
        self.stop = trio.Event()
        self._sends = 0

    def producer(self, name: str) -> Producer:
        return Producer(f"fault-{name}", namesrv=self.namesrv, retry_times=0, send_timeout=self.send_timeout)

    async def run(self) -> None:
        async with trio.open_nursery() as nursery:
            for s in range(self.senders):
                nursery.start_soon(self._sender, f"py{s}", "py-new" if s % 2 else "py")

    async def _sender(self, name: str, client: str) -> None:
        i = generation = 0
        while not self.stop.is_set() and self._sends < self.max_sends:
            renewed = client == "py-new"
            topic = f"{TOPIC}-{name}-{generation // self.topic_every}" if renewed else TOPIC
            generation += 1
            async with self.producer(name) as producer:
                until = trio.current_time() + self.renew if renewed else float("inf")
                while not self.stop.is_set() and self._sends < self.max_sends and trio.current_time() < until:
                    self._sends += 1
                    await self.send(producer, f"{name}-{i}", client, topic)
                    i += 1
                    await trio.sleep(self.interval)

    async def send(self, producer: Producer, key: str, client: str = "py", topic: str = TOPIC) -> Attempt:
        """One send: attempts until SEND_OK or ``tries`` ran out; the last attempt."""
        attempt: Attempt | None = None
        for n in range(self.tries):
            attempt = Attempt(f"{key}.{n}", key, client, topic, trio.current_time())
            self.history.attempts.append(attempt)
            msg = Message(topic, body_of(attempt.id, self.body_size), keys=key, properties={ATTEMPT: attempt.id})
            try:
                result = await producer.send(msg)
            except MQClientError as exc:
                attempt.status = f"error: {type(exc).__name__}: {str(exc)[:80]}"
            else:
                attempt.status = result.status.value
                attempt.queue_id = result.message_queue.queue_id
                attempt.queue_offset = result.queue_offset
                try:
                    host, port, attempt.offset = parse_offset_msg_id(result.offset_msg_id)
                    attempt.store = f"{host}:{port}"
                except ProtocolError:
                    pass
            attempt.answered = trio.current_time()
            if attempt.ok or self.stop.is_set():
                break
            await trio.sleep(0.05)
        assert attempt is not None
        return attempt


class PinnedLoad:
    """Senders with a stale route, as the C++ client keeps one for up to 30 s: each sends
    straight to the member the name server named as master when it last asked (every
    ``refresh`` s), whatever became of that member since (client "pinned"). A member that is
    down is tried again every DOWN_RETRY s, so when one is killed and restarted at once they
    are there, sending, while it boots; and a member that no longer leads is asked to store
    sends, which it must refuse."""

    def __init__(
        self,
        cluster: ProcessCluster,
        history: History,
        *,
        senders: int = 3,
        interval: float = 0.15,
        refresh: float = 5.0,
    ) -> None:
        self.cluster = cluster
        self.history = history
        self.senders = senders
        self.interval = interval
        self.refresh = refresh
        self.stop = trio.Event()
        self._ids = UniqueIdGenerator()

    async def run(self, max_sends: int) -> None:
        async with trio.open_nursery() as nursery:
            for n in range(self.senders):
                nursery.start_soon(self._sender, f"pin{n}", max_sends // self.senders)

    async def _sender(self, name: str, max_sends: int) -> None:
        async with MQAdmin(timeout=3.0) as admin:  # a connection of its own: its own moment to connect
            await self._sends(admin, name, max_sends)

    async def _sends(self, admin: MQAdmin, name: str, max_sends: int) -> None:
        i = 0
        while not self.stop.is_set() and i < max_sends:
            addr = await self.cluster.namesrv_master()
            until = trio.current_time() + self.refresh
            while addr and not self.stop.is_set() and i < max_sends and trio.current_time() < until:
                down = await self.send(admin, addr, f"{name}-{i}", i % 4)
                i += 1
                # a member that is down is tried again soon: it is there the moment it is back
                await trio.sleep(DOWN_RETRY if down else self.interval)
            if not addr:
                await trio.sleep(self.interval)

    async def send(self, admin: MQAdmin, addr: str, key: str, queue_id: int) -> bool:
        """One attempt; True when the member could not be reached."""
        attempt = Attempt(f"{key}.0", key, "pinned", TOPIC, trio.current_time())
        self.history.attempts.append(attempt)
        msg_id = self._ids.next_id()
        props = {P.UNIQ_KEY: msg_id, P.KEYS: key, ATTEMPT: attempt.id, P.WAIT: "true"}
        header = SendMessageRequestHeader(
            producer_group="fault-pinned", topic=TOPIC, queue_id=queue_id, born_timestamp=int(time.time() * 1000),
            properties=P.encode_properties(props),
        )  # fmt: skip
        try:
            result = await admin.api.send_message(
                addr, self.cluster.group, RequestCode.SEND_MESSAGE_V2, header, body_of(attempt.id, 200), msg_id, 3.0
            )
        except MQClientError as exc:
            attempt.status = f"error: {type(exc).__name__}: {str(exc)[:80]}"
        else:
            assert result is not None
            attempt.status = result.status.value
            attempt.store, attempt.queue_id, attempt.queue_offset = addr, queue_id, result.queue_offset
            try:
                attempt.offset = parse_offset_msg_id(result.offset_msg_id)[2]
            except ProtocolError:
                pass
        attempt.answered = trio.current_time()
        return attempt.status.startswith("error: MQConnectError")


class CppLoad:
    """The official C++ client, in waves: a child process sends ``per_wave`` messages one at
    a time, then ``pause`` s pass before the next (the child cannot pace its sends, and a
    new one also looks its routes up afresh). Runs until ``stop``."""

    def __init__(self, namesrv: str, history: History, *, per_wave: int = 100, pause: float = 3.0) -> None:
        self.namesrv = namesrv
        self.history = history
        self.per_wave = per_wave
        self.pause = pause
        self.stop = trio.Event()
        self.waves = 0

    async def run(self) -> None:
        while not self.stop.is_set() and self.waves < MAX_WAVES:
            await self._wave(self.waves)
            self.waves += 1
            with trio.move_on_after(self.pause):
                await self.stop.wait()

    async def _wave(self, wave: int) -> None:
        prefix = f"cpp{wave}-"
        messages = make_messages(
            self.per_wave, body=prefix + "{i}|" + "x" * 100, keys=prefix + "{i}", properties={ATTEMPT: prefix + "{i}"},
            sharding_key=lambda i: i,
        )  # fmt: skip
        spec = produce(
            self.namesrv, TOPIC, method="orderly", messages=messages, retry_times=0, send_timeout_ms=3000,
            time_limit=60.0, group="fault-load-cpp",
        )  # fmt: skip
        async with start_scenario(spec) as run, trio.open_nursery() as nursery:

            async def stopper() -> None:
                await self.stop.wait()
                run.stop_sending()

            nursery.start_soon(stopper)
            result = await run.wait()
            nursery.cancel_scope.cancel()
        for s in result.sends:
            key = f"{prefix}{s.index}"
            status = "SEND_OK" if s.ok and s.status == "OK" else f"error: {s.status or s.error_type or s.error}"
            self.history.attempts.append(Attempt(key, key, "cpp", TOPIC, None, None, status))
