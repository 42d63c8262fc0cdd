"""A deterministic simulator for rmq.raft: one seed, one run, replayed bit for bit.

Virtual time only. Each member has a RaftNode, a log in memory and a "disk" that catches up
as its writes complete (after a random delay; slow disks are slower). The network drops,
delays (and so reorders) and duplicates messages and can be cut in one direction only. Members
crash (writes still in flight are lost or done, at random; the term and vote survive, as
PersistTerm is synchronous) and restart from their disk; clocks drift. Retention deletes the
head of a member's log (committed entries only), so followers that fall behind are rebuilt
from their leader's first entry.

A run has a fault phase and then a heal phase (every member up, a reliable network). Checked
throughout and at the end: at most one leader per term; every member commits the same entry
at an index (nothing committed is ever lost or changed); logs match wherever index and term
match; and after healing a leader commits, and every acknowledged proposal is in every
member's committed log exactly once, in acknowledgement order.
"""

from __future__ import annotations

import dataclasses
import heapq
import multiprocessing
import os
import random
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from rmq.raft.core import (
    BecomeLeader,
    Commit,
    NotLeader,
    PersistEntries,
    PersistentState,
    PersistTerm,
    RaftConfig,
    RaftNode,
    Send,
)
from rmq.raft.messages import Entry, Message

CONFIG = RaftConfig(election_timeout_ms=300, heartbeat_interval_ms=100, push_timeout_ms=100, max_batch=16)
TICK_MS = 20


class InvariantViolated(AssertionError):
    pass


@dataclass
class Faults:
    """How hostile a run is (probabilities per message or per fault-phase step)."""

    drop: float = 0.1
    duplicate: float = 0.05
    max_delay_ms: int = 60
    crash_rate: float = 0.006  # per member per tick during the fault phase
    leader_crash_rate: float = 0.01  # the leader, on top (it is the interesting one)
    power_failure_rate: float = 0.003  # per tick: a majority crashes at once (durability)
    partition_rate: float = 0.03
    disk_max_ms: int = 20
    slow_disk_ms: int = 150
    drift: float = 0.2  # clocks run at 1 ± drift
    retention_rate: float = 0.05  # per tick: a member deletes a committed head of its log


class MemLog:
    """The LogView: the log as written (durable or not); ``entries`` from ``begin_index`` on."""

    def __init__(self, entries: list[Entry] | None = None, begin: int = 0) -> None:
        self.entries: list[Entry] = list(entries or [])
        self.begin_index = begin

    def copy(self) -> MemLog:
        return MemLog(self.entries, self.begin_index)

    @property
    def end_index(self) -> int:
        return self.begin_index + len(self.entries) - 1

    def term_at(self, index: int) -> int | None:
        e = self.entry_at(index)
        return None if e is None else e.term

    def entry_at(self, index: int) -> Entry | None:
        i = index - self.begin_index
        return self.entries[i] if 0 <= i < len(self.entries) else None

    def apply(self, op: PersistEntries) -> None:
        if op.rebuild:
            self.entries, self.begin_index = [], op.entries[0].index
        elif op.truncate_after is not None:
            if op.truncate_after < self.begin_index - 1:
                raise InvariantViolated(
                    f"truncate after {op.truncate_after}, before the log's first {self.begin_index}"
                )
            del self.entries[op.truncate_after + 1 - self.begin_index :]
        for e in op.entries:
            if e.index != self.end_index + 1:
                raise InvariantViolated(f"append of {e.index} at end {self.end_index}")
            self.entries.append(e)

    def forget_before(self, index: int) -> None:
        """Retention: entries before ``index`` are deleted."""
        del self.entries[: index - self.begin_index]
        self.begin_index = index


@dataclass
class Member:
    id: str
    node: RaftNode | None
    memory: MemLog
    disk: MemLog = field(default_factory=MemLog)
    term: int = 0
    voted_for: str | None = None
    pending: list[tuple[int, PersistEntries]] = field(default_factory=list)  # (op id, op), in order
    drift: float = 1.0
    slow_disk: bool = False
    committed: int = -1  # what this incarnation has committed


class Sim:
    def __init__(self, seed: int, n: int = 3, faults: Faults | None = None,
                 fault_ms: int = 3000, heal_ms: int = 4000) -> None:  # fmt: skip
        self.seed = seed
        self.rng = random.Random(seed)
        # every other seed with lazy pushes (the broker's default) and every other without
        self.config = dataclasses.replace(CONFIG, lazy_push_ms=0 if seed % 2 else 2 * TICK_MS)
        self.faults = faults or Faults()
        self.ids = [f"n{i}" for i in range(n)]
        self.fault_ms = fault_ms
        self.end_ms = fault_ms + heal_ms
        self.now = 0
        self._seq = 0
        self.queue: list[tuple[int, int, str, Any]] = []
        self.members: dict[str, Member] = {}
        for i in self.ids:
            m = Member(i, None, MemLog())
            m.drift = 1 + self.rng.uniform(-self.faults.drift, self.faults.drift)
            m.slow_disk = self.rng.random() < 0.2
            self.members[i] = m
            self._start(m)
        self.blocked: set[tuple[str, str]] = set()
        self.leaders: dict[int, str] = {}
        self.committed: dict[int, Entry] = {}  # index -> the entry every member commits there
        self.acked: list[bytes] = []  # proposals acknowledged to a client, in order
        self.proposed = 0
        self.healed_commit = -1  # the highest committed index when the faults stopped
        self.stats = {
            "elections": 0, "crashes": 0, "partitions": 0, "dropped": 0, "duplicated": 0, "commits": 0,
            "retentions": 0, "rebuilds": 0,
        }  # fmt: skip
        for i in self.ids:
            self._at(self.rng.randrange(TICK_MS), "tick", i)
        self._at(5, "client", None)
        self._at(10, "chaos", None)

    # -- plumbing ----------------------------------------------------------------------------

    def _at(self, t: int, kind: str, payload: Any) -> None:
        self._seq += 1
        heapq.heappush(self.queue, (t, self._seq, kind, payload))

    def _local(self, m: Member) -> int:
        return int(self.now * m.drift)

    def _start(self, m: Member) -> None:
        m.memory = m.disk.copy()
        m.pending = []
        m.committed = -1
        state = PersistentState(m.term, m.voted_for, -1)
        m.node = RaftNode(m.id, self.ids, m.memory, group="sim", config=self.config, state=state,
                          rng=random.Random(self.rng.random()), now_ms=self._local(m))  # fmt: skip

    def _healing(self) -> bool:
        return self.now >= self.fault_ms

    # -- the driver --------------------------------------------------------------------------

    def _run_actions(self, m: Member, actions: list[Any]) -> None:
        for a in actions:
            if m.node is None:
                return
            if isinstance(a, Send):
                self._send(m.id, a.to, a.message)
            elif isinstance(a, PersistTerm):
                if a.term < m.term:
                    raise InvariantViolated(f"{m.id} term went back from {m.term} to {a.term}")
                m.term, m.voted_for = a.term, a.voted_for
            elif isinstance(a, PersistEntries):
                m.memory.apply(a)
                self.stats["rebuilds"] += a.rebuild
                if a.entries:
                    self._run_actions(m, m.node.appended(self._local(m)))
                self._seq += 1
                m.pending.append((self._seq, a))
                delay = self.rng.randrange(
                    1, (self.faults.slow_disk_ms if m.slow_disk else self.faults.disk_max_ms) + 1
                )
                self._at(self.now + delay, "disk", (m.id, self._seq))
            elif isinstance(a, Commit):
                self._commit(m, a.index)
            elif isinstance(a, BecomeLeader):
                self.stats["elections"] += 1
                holder = self.leaders.setdefault(a.term, m.id)
                if holder != m.id:
                    raise InvariantViolated(f"two leaders in term {a.term}: {holder} and {m.id}")

    def _commit(self, m: Member, index: int) -> None:
        assert m.node is not None
        for i in range(m.committed + 1, index + 1):
            e = m.memory.entry_at(i)
            if e is None and i < m.memory.begin_index:
                if i not in self.committed:  # deleted or skipped by a rebuild: committed before
                    raise InvariantViolated(f"{m.id} counts {i}, before its log, as committed; nobody committed it")
                continue
            if e is None:
                raise InvariantViolated(f"{m.id} commits {i} beyond its log end {m.memory.end_index}")
            seen = self.committed.setdefault(i, e)
            if seen != e:
                raise InvariantViolated(f"index {i} committed as {seen} and as {e} (by {m.id})")
            if m.node.is_leader and e.body and e.term == m.node.term and self._proposals.get(e.body) == m.id:
                self.acked.append(e.body)
                del self._proposals[e.body]
        if index > m.committed:
            m.committed = index
            self.stats["commits"] += 1

    _proposals: dict[bytes, str] = {}

    def _send(self, src: str, dst: str, msg: Message) -> None:
        f = self.faults
        if (src, dst) in self.blocked:
            return
        if not self._healing() and self.rng.random() < f.drop:
            self.stats["dropped"] += 1
            return
        copies = 2 if not self._healing() and self.rng.random() < f.duplicate else 1
        self.stats["duplicated"] += copies - 1
        for _ in range(copies):
            self._at(self.now + self.rng.randrange(1, f.max_delay_ms + 1), "deliver", (src, dst, msg))

    def _disk_done(self, mid: str, op_id: int) -> None:
        m = self.members[mid]
        if m.node is None or not m.pending or m.pending[0][0] != op_id:
            if m.node is not None and any(o == op_id for o, _ in m.pending):
                self._at(self.now + 1, "disk", (mid, op_id))  # writes complete in order
            return
        _, op = m.pending.pop(0)
        m.disk.apply(op)
        # Durable up to where disk and memory agree: a later pending truncate may cut below.
        upto = m.disk.end_index
        for _, later in m.pending:
            if later.truncate_after is not None:
                upto = min(upto, later.truncate_after)
            elif later.rebuild:
                upto = min(upto, later.entries[0].index - 1)
        self._run_actions(m, m.node.persisted(upto, self._local(m)))

    def _crash(self, m: Member) -> None:
        self.stats["crashes"] += 1
        # in-flight writes: some finish (in order), the rest are lost
        keep = self.rng.randrange(len(m.pending) + 1)
        for _, op in m.pending[:keep]:
            m.disk.apply(op)
        m.pending = []
        m.node = None
        self._at(self.now + self.rng.randrange(50, 800), "restart", m.id)

    # -- the run -------------------------------------------------------------------------------

    def run(self) -> Sim:
        self._proposals = {}
        while self.queue:
            t, _, kind, payload = heapq.heappop(self.queue)
            if t > self.end_ms:
                break
            self.now = t
            self._step(kind, payload)
        self._final_checks()
        return self

    def _step(self, kind: str, payload: Any) -> None:
        if kind == "tick":
            m = self.members[payload]
            if m.node is not None:
                self._run_actions(m, m.node.tick(self._local(m)))
            self._at(self.now + TICK_MS, "tick", payload)
        elif kind == "deliver":
            src, dst, msg = payload
            m = self.members[dst]
            if m.node is not None and (src, dst) not in self.blocked:
                self._run_actions(m, m.node.receive(msg, self._local(m)))
        elif kind == "disk":
            self._disk_done(*payload)
        elif kind == "restart":
            m = self.members[payload]
            if m.node is None:
                self._start(m)
        elif kind == "client":
            self._client()
            self._at(self.now + self.rng.randrange(5, 30), "client", None)
        elif kind == "chaos":
            self._chaos()
            self._at(self.now + TICK_MS, "chaos", None)

    def _client(self) -> None:
        leaders = [m for m in self.members.values() if m.node is not None and m.node.is_leader]
        if not leaders:
            return
        m = self.rng.choice(leaders)
        assert m.node is not None
        self.proposed += 1
        body = b"p%d" % self.proposed
        try:
            _, actions = m.node.propose(body, self._local(m))
        except NotLeader:
            return
        self._proposals[body] = m.id
        self._run_actions(m, actions)

    def _chaos(self) -> None:
        f = self.faults
        if self._healing() and self.healed_commit < 0:
            self.healed_commit = max(self.committed, default=-1)
        if self._healing():
            self.blocked.clear()
            for m in self.members.values():
                if m.node is None:
                    self._start(m)
            return
        for m in self.members.values():
            if m.node is None:
                continue
            rate = f.crash_rate + (f.leader_crash_rate if m.node.is_leader else 0.0)
            if self.rng.random() < rate:
                self._crash(m)
        if self.rng.random() < f.power_failure_rate:
            alive = [m for m in self.members.values() if m.node is not None]
            for m in self.rng.sample(alive, min(len(alive), len(self.ids) // 2 + 1)):
                self._crash(m)
        if self.rng.random() < f.retention_rate:
            self._retention(self.rng.choice(list(self.members.values())))
        if self.rng.random() < f.partition_rate:
            self.stats["partitions"] += 1
            self.blocked.clear()
            kind = self.rng.random()
            if kind < 0.4:  # isolate one member
                lone = self.rng.choice(self.ids)
                self.blocked = {(a, b) for a in self.ids for b in self.ids if a != b and lone in (a, b)}
            elif kind < 0.7:  # asymmetric: one member hears nobody, but is heard
                deaf = self.rng.choice(self.ids)
                self.blocked = {(a, deaf) for a in self.ids if a != deaf}
            elif kind < 0.9:  # a random split
                side = set(self.rng.sample(self.ids, self.rng.randrange(1, len(self.ids))))
                self.blocked = {(a, b) for a in self.ids for b in self.ids if (a in side) != (b in side)}
            # else: heal for a while

    def _retention(self, m: Member) -> None:
        """Delete a head of ``m``'s log, as a store's retention deletes old data files: only
        committed entries, never the last one, and (for the model's simplicity) only when no
        write is in flight, so that disk and memory are the same log."""
        if m.node is None or m.pending:
            return
        log = m.memory
        top = min(m.node.commit_index + 1, log.end_index)
        if top <= log.begin_index:
            return
        upto = self.rng.randrange(log.begin_index + 1, top + 1)
        log.forget_before(upto)
        m.disk.forget_before(upto)
        self.stats["retentions"] += 1

    # -- checks --------------------------------------------------------------------------------

    def _final_checks(self) -> None:
        nodes = [m for m in self.members.values() if m.node is not None]
        leaders = [m for m in nodes if m.node is not None and m.node.is_leader]
        if not leaders:
            raise InvariantViolated("no leader after healing")
        # Logs match: wherever two members hold the same index with the same term, the prefixes agree.
        for a in nodes:
            for b in nodes:
                if a.id >= b.id:
                    continue
                common = min(a.memory.end_index, b.memory.end_index)
                first = max(a.memory.begin_index, b.memory.begin_index)
                for i in range(common, first - 1, -1):
                    if a.memory.term_at(i) == b.memory.term_at(i):
                        if any(a.memory.entry_at(k) != b.memory.entry_at(k) for k in range(first, i + 1)):
                            raise InvariantViolated(f"{a.id} and {b.id} agree at {i} but not before it")
                        break
        # Liveness and acknowledged proposals: everything acked is committed everywhere, once, in order.
        committed_bodies = [self.committed[i].body for i in sorted(self.committed) if self.committed[i].body]
        position = {body: n for n, body in enumerate(committed_bodies)}
        if len(position) != len(committed_bodies):
            raise InvariantViolated("a proposal was committed twice")
        missing = [b for b in self.acked if b not in position]
        if missing:
            raise InvariantViolated(f"acknowledged proposals lost: {missing[:5]}")
        order = [position[b] for b in self.acked]
        if order != sorted(order):
            raise InvariantViolated("acknowledged proposals committed out of order")
        top = max(m.committed for m in nodes)
        if top < 0 or not self.acked:
            raise InvariantViolated("nothing was committed after healing")
        # Every member caught up after healing, even one whose leader had deleted what it lacked.
        for m in nodes:
            assert m.node is not None
            if m.node.commit_index < self.healed_commit:
                raise InvariantViolated(f"{m.id} committed only to {m.node.commit_index} after healing, "
                                        f"{self.healed_commit} was committed when the faults stopped")  # fmt: skip
        for m in nodes:
            for i in range(m.memory.begin_index, m.committed + 1):
                if m.memory.entry_at(i) != self.committed[i]:
                    raise InvariantViolated(f"{m.id} holds {m.memory.entry_at(i)} at committed index {i}")


def run_seed(seed: int, n: int = 3, faults: Faults | None = None, **kw: Any) -> Sim:
    """One run; raises InvariantViolated (with the seed in the message) when a check fails."""
    try:
        return Sim(seed, n, faults, **kw).run()
    except InvariantViolated as exc:
        raise InvariantViolated(f"seed {seed} ({n} nodes): {exc} -- replay: RAFT_SEED={seed} RAFT_NODES={n}") from exc


def sweep_on_every_core(seeds: range, n: int) -> list[str]:
    """``sweep`` with the seeds dealt out to one process per core: the runs are independent,
    and the suite has a time bound. Under pytest-xdist the cores are shared with the other
    workers, whose tests (elections, failovers) must not be starved."""
    sharing = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    workers = min((os.cpu_count() or 1) // max(sharing, 1), 8)
    if workers < 2 or len(seeds) < 4 * workers:
        return sweep(seeds, n)
    parts = [seeds[i::workers] for i in range(workers)]
    # spawn, not fork: the test process may hold threads (and their locks) of its own
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        return [failure for part in pool.map(sweep, parts, [n] * workers) for failure in part]


def sweep(seeds: range, n: int, on_run: Callable[[Sim], None] | None = None) -> list[str]:
    failures = []
    for seed in seeds:
        try:
            sim = run_seed(seed, n)
        except InvariantViolated as exc:
            failures.append(str(exc))
            continue
        if on_run is not None:
            on_run(sim)
    return failures
