"""The checker: what a run under faults must show once every fault is healed.

Online, with every member running (``check_online``):

* convergence: within ``settle`` s every member holds, applies and dispatches the same log,
  and the name server names the leader as the master;
* none lost: every SEND_OK'd attempt can be pulled (PULL_MESSAGE, so through the consume
  queues) from every member, the leader and each replica, within the same ``settle`` s;
* no duplicates: no attempt is readable twice from one member (two copies of one attempt
  are the broker's; two attempts of one send are a client retry, counted but allowed);
* in place: an attempt sits at the queue, queue offset and CommitLog offset its SEND_OK
  reported;
* availability (judged by the run, from the history, the nemesis's record and the route
  watch): a leader fault held past ``failover_bound`` s (pause, kill, partition) is
  followed within that bound by a long-lived producer's SEND_OK from another member; a
  heal followed by that long a quiet, by a SEND_OK; and the name server never names as
  master, for that long, a member that does not lead.

Offline, from the stopped members' files (``check_offline``):

* the logs agree: DLedger members hold the same entries (index, term, position, bytes)
  wherever two hold one, and each holds them at least to the committed index; a slave's
  CommitLog is a byte-identical prefix of its master's;
* every SEND_OK'd attempt is in the (committed) log once, and in a slave's;
* consume queues are complete: each record the member dispatched has the entry its queue
  offset names, pointing at it, and no entry points elsewhere.
"""

from __future__ import annotations

import collections
from collections.abc import Collection
from dataclasses import dataclass, field

import trio

from rmq.client import MQAdmin
from rmq.client.api import PullStatus
from rmq.client.errors import MQBrokerError, MQClientError
from rmq.protocol.constants import PULL_SUBSCRIPTION
from rmq.protocol.headers import PullMessageRequestHeader

from .clusters import Convergence, DLedgerCluster, ProcessCluster
from .load import ATTEMPT, Attempt, History
from .nemesis import LEADER_FAULTS, Applied
from .stores import (
    attempts_in,
    commitlog_records,
    dledger_committed,
    dledger_divergence,
    dledger_entries,
    prefix_divergence,
    queue_problems,
    span,
)

CHECK_GROUP = "fault-checker"
SHOW = 5  # examples per problem


@dataclass
class Failover:
    kind: str
    member: str
    held: float
    seconds: float | None  # fault start to the first SEND_OK from another member; None: none


@dataclass
class Report:
    cluster: str
    seed: int
    faults: collections.Counter[str] = field(default_factory=collections.Counter)
    attempts: int = 0
    acked: int = 0
    not_ok: int = 0  # answered, but not SEND_OK
    errors: int = 0  # no answer (timeouts, refused connections, ...)
    retry_copies: int = 0  # sends stored under two attempts (client retries)
    failovers: list[Failover] = field(default_factory=list)
    recoveries: list[float | None] = field(default_factory=list)  # seconds from each heal to a SEND_OK
    wrong_route: float = 0.0  # the longest the name server named as master a member that did not lead
    lost: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)
    misplaced: list[str] = field(default_factory=list)
    divergence: list[str] = field(default_factory=list)
    queues: list[str] = field(default_factory=list)
    convergence: list[str] = field(default_factory=list)
    availability: list[str] = field(default_factory=list)
    environment: list[str] = field(default_factory=list)  # the machine's doing: nothing above can be trusted
    notes: list[str] = field(default_factory=list)
    lost_count: int = 0  # the most SEND_OK attempts one member cannot serve
    duplicate_count: int = 0  # the most attempts one member serves or stores twice

    CHECKS = ("environment", "lost", "duplicates", "misplaced", "divergence", "queues", "convergence", "availability")

    @property
    def problems(self) -> list[str]:
        return [f"{name}: {p}" for name in self.CHECKS for p in getattr(self, name)]

    def failed_checks(self) -> list[str]:
        return [name for name in self.CHECKS if getattr(self, name)]

    def summary(self) -> str:
        failovers = ", ".join(
            f"{f.kind} {f.member} {'-' if f.seconds is None else f'{f.seconds:.1f}s'}/{f.held:.0f}s"
            for f in self.failovers
        )  # fmt: skip
        recovered = [r for r in self.recoveries if r is not None]
        lines = [
            f"{self.cluster} seed {self.seed}: faults {dict(self.faults)}; attempts {self.attempts}, "
            f"SEND_OK {self.acked}, not ok {self.not_ok}, errors {self.errors}, retry copies {self.retry_copies}",
            f"failovers (seconds/held): {failovers or 'none'}",
            f"from a heal to a SEND_OK: at most {max(recovered, default=0):.1f}s, "
            f"{len(self.recoveries) - len(recovered)} heals without one; the name server named a member "
            f"that did not lead for at most {self.wrong_route:.1f}s",
            *self.notes,
            *self.problems,
        ]
        return "\n".join(lines)


def failovers(
    applied: list[Applied], history: History, bound: float, *, elsewhere: bool, kinds: Collection[str] = LEADER_FAULTS
) -> tuple[list[Failover], list[str]]:
    """Each leader fault's failover (faults of ``kinds``, those that take the leader away):
    from its start to a long-lived producer's first SEND_OK from another member
    (``elsewhere``, a group that elects) or from any (a master and slave, which wait for the
    master). With ``elsewhere``, also the faults held past ``bound`` s after which none came
    within ``bound`` s."""
    out: list[Failover] = []
    slow: list[str] = []
    for a in applied:
        if not a.was_leader or a.fault.kind not in kinds:
            continue
        held = (a.healed or a.started) - a.started
        first = history.first_ok_after(a.started, not_from=a.address if elsewhere else None, client="py")
        seconds = None if first is None or first.answered is None else first.answered - a.started
        out.append(Failover(a.fault.kind, a.member, held, seconds))
        if elsewhere and held > bound and (seconds is None or seconds > bound):
            took = "none came" if seconds is None else f"the first came after {seconds:.1f}s"
            slow.append(f"{a.fault.kind} of leader {a.member} held {held:.1f}s: no SEND_OK from another member "
                        f"within {bound:.0f}s ({took})")  # fmt: skip
    return out, slow


def recoveries(
    applied: list[Applied], history: History, bound: float, end: float
) -> tuple[list[float | None], list[str]]:
    """After each heal, the time to the next SEND_OK (None: none before ``end``); and the
    heals followed by more than ``bound`` s of quiet (no fault began) without one."""
    times: list[float | None] = []
    slow: list[str] = []
    for i, a in enumerate(applied):
        healed = a.healed if a.healed is not None else a.started
        quiet_until = applied[i + 1].started if i + 1 < len(applied) else end
        first = history.first_ok_after(healed)
        took = None if first is None or first.answered is None or first.answered > end else first.answered - healed
        times.append(took)
        if quiet_until - healed > bound and (took is None or took > bound):
            what = "none came" if took is None else f"the first came after {took:.1f}s"
            slow.append(f"no SEND_OK within {bound:.0f}s of healing {a.fault.kind} of {a.member} "
                        f"({what}; quiet for {quiet_until - healed:.1f}s)")  # fmt: skip
    return times, slow


@dataclass
class Seen:
    """What one member served: attempt id -> [(queue id, queue offset, CommitLog offset)]."""

    where: dict[str, list[tuple[int, int, int]]] = field(default_factory=lambda: collections.defaultdict(list))
    refused: str = ""  # the first pull it answered with an error


class Checker:
    def __init__(self, cluster: ProcessCluster, history: History, report: Report) -> None:
        self.cluster = cluster
        self.history = history
        self.report = report
        self.convergence: Convergence | None = None
        self.commit_index = -1  # the group's, when it converged (DLedger)

    # -- online --------------------------------------------------------------------------------

    async def check_online(self, settle: float) -> None:
        t0 = trio.current_time()
        conv = await self.cluster.settle(settle)
        self.convergence = conv
        states = "; ".join(f"{k}: {v}" for k, v in conv.states.items())
        if not conv.done:
            self.report.convergence.append(f"not converged {settle:.0f}s after the heal: {states}")
        else:
            self.report.notes.append(f"converged {conv.seconds:.1f}s after the heal: {states}")
        if conv.leader and isinstance(self.cluster, DLedgerCluster):
            info = await self.cluster.runtime(self.cluster.by_address(conv.leader))  # type: ignore[arg-type]
            self.commit_index = int(info["dLegerCommitIndex"]) if info else -1
        acked = {a.id: a for a in self.history.acked()}
        deadline = t0 + settle
        async with MQAdmin(namesrv=self.cluster.namesrv, timeout=3.0) as admin:
            queues = {topic: await self._queue_ids(admin, topic) for topic in sorted({a.topic for a in acked.values()})}
            while True:
                seen = {m.name: await self._pull_all(admin, m.address, queues) for m in self.cluster.members}
                complete = all(acked.keys() <= s.where.keys() for s in seen.values())
                if complete or trio.current_time() >= deadline:
                    break
                await trio.sleep(0.5)
        self._judge(seen, acked)

    async def _queue_ids(self, admin: MQAdmin, topic: str) -> list[int]:
        ids = {a.queue_id for a in self.history.attempts if a.topic == topic and a.queue_id >= 0}
        try:
            route = await admin.topic_route(topic)
            ids |= {mq.queue_id for mq in route.subscribe_queues(topic)}
        except MQClientError as exc:
            self.report.notes.append(f"no route for {topic}: {exc}")
        return sorted(ids or range(4))

    async def _pull_all(self, admin: MQAdmin, addr: str, queues: dict[str, list[int]]) -> Seen:
        """Every message of the topics the member at ``addr`` serves, queue by queue from 0."""
        seen = Seen()
        bound = len(self.history.attempts) // 16 + 50  # pulls per queue: 32 messages each
        for topic, qid in ((t, q) for t, ids in queues.items() for q in ids):
            offset = 0
            for _ in range(bound):
                header = PullMessageRequestHeader(
                    consumer_group=CHECK_GROUP, topic=topic, queue_id=qid, queue_offset=offset, max_msg_nums=32,
                    sys_flag=PULL_SUBSCRIPTION, suspend_timeout_millis=0, subscription="*", expression_type="TAG",
                )  # fmt: skip
                try:
                    result = await admin.api.pull(addr, header, 3.0)
                except MQBrokerError as exc:
                    seen.refused = seen.refused or f"{topic}/{qid}: code {exc.response_code} {exc}"
                    break
                except MQClientError as exc:
                    seen.refused = seen.refused or f"{topic}/{qid}: {exc}"
                    break
                if result.status == PullStatus.FOUND:
                    for msg in result.messages:
                        key = msg.properties.get(ATTEMPT, "")
                        seen.where[key].append((msg.queue_id, msg.queue_offset, msg.commitlog_offset))
                if result.status not in (PullStatus.FOUND, PullStatus.OFFSET_ILLEGAL):
                    break
                if result.next_begin_offset <= offset:
                    break
                offset = result.next_begin_offset
        return seen

    def _judge(self, seen: dict[str, Seen], acked: dict[str, Attempt]) -> None:
        r = self.report
        nowhere = [k for k in acked if not any(k in s.where for s in seen.values())]
        r.lost_count = max(sum(1 for k in acked if k not in s.where) for s in seen.values())
        if nowhere:
            r.lost.append(f"{len(nowhere)} of {len(acked)} SEND_OK attempts on no member: "
                          f"{self._describe(nowhere, acked)}")  # fmt: skip
        for name, s in seen.items():
            missing = [k for k in acked if k not in s.where and k not in nowhere]
            if missing:
                why = f" (it refused: {s.refused})" if s.refused else ""
                r.lost.append(f"{len(missing)} SEND_OK attempts not readable from {name}{why}: "
                              f"{self._describe(missing, acked)}")  # fmt: skip
            elif s.refused:
                r.notes.append(f"{name} refused a pull: {s.refused}")
            twice = {k: v for k, v in s.where.items() if len(v) > 1}
            if twice:
                r.duplicate_count = max(r.duplicate_count, len(twice))
                shown = list(twice.items())[:SHOW]
                r.duplicates.append(f"{len(twice)} attempts readable more than once from {name}: {shown}")
        leader = self.convergence.leader if self.convergence else None
        member = self.cluster.by_address(leader) if leader else None
        reference = seen[member.name] if member else next(iter(seen.values()))
        keys = collections.Counter(k.rpartition(".")[0] for k in reference.where if k.startswith("py"))
        r.retry_copies = sum(1 for n in keys.values() if n > 1)
        wrong = []
        for k, a in acked.items():
            if a.offset < 0 or k not in reference.where:
                continue
            place = (a.queue_id, a.queue_offset, a.offset)
            if place not in reference.where[k]:
                wrong.append(f"{k} acked at {place} by {a.store}, stored at {reference.where[k]}")
        if wrong:
            r.misplaced.append(f"{len(wrong)} attempts not where their SEND_OK said: {wrong[:SHOW]}")

    def _describe(self, keys: list[str], acked: dict[str, Attempt]) -> str:
        out = []
        for k in keys[:SHOW]:
            a = acked[k]
            when = f" at {a.answered - self.history.t0:.2f}s" if a.answered is not None else ""
            where = f" by {a.store} (offset {a.offset}, {a.topic}/{a.queue_id} #{a.queue_offset})" if a.store else ""
            out.append(f"{k}{where}{when}")
        return ", ".join(out)

    # -- offline -------------------------------------------------------------------------------

    def check_offline(self) -> None:
        """After every member stopped cleanly: the stores themselves."""
        if isinstance(self.cluster, DLedgerCluster):
            self._dledger_logs()
        elif self.cluster.kind == "controller":
            self._replica_logs()
        else:
            self._ha_logs()

    def _in_log(self, records: list[tuple[int, bytes]], label: str) -> None:
        """Every SEND_OK'd attempt once in ``records`` (a whole committed log)."""
        where = attempts_in(records, ATTEMPT)
        missing = [a.id for a in self.history.acked() if a.id not in where]
        if missing:
            self.report.lost.append(f"{len(missing)} SEND_OK attempts not in {label}: {missing[:SHOW]}")
        twice = {k: v for k, v in where.items() if len(v) > 1}
        if twice:
            self.report.duplicate_count = max(self.report.duplicate_count, len(twice))
            shown = list(twice.items())[:SHOW]
            self.report.duplicates.append(f"{len(twice)} attempts stored twice in {label}: {shown}")

    def _dledger_logs(self) -> None:
        r = self.report
        stores = {m.name: m.proc.store for m in self.cluster.members}
        logs = {name: dledger_entries(store) for name, store in stores.items()}
        committed = max([self.commit_index, *(dledger_committed(s) for s in stores.values())])
        ends = {name: (log[-1].index if log else -1) for name, log in logs.items()}
        r.notes.append(f"DLedger logs end at {ends}, committed to {committed}")
        # entries committed after the online check (while members stopped) need only a majority
        r.divergence += dledger_divergence(logs, committed, held_by_all=min(self.commit_index, committed))
        longest = max(logs.values(), key=len)
        self._in_log([rec for e in longest if e.index <= committed for rec in e.records()], "the committed log")
        for name, log in logs.items():
            mine = [e for e in log if e.index <= committed]
            upto = mine[-1].pos + len(mine[-1].raw) if mine else 0
            records = [rec for e in log for rec in e.records()]
            r.queues += queue_problems(stores[name], records, upto=upto, label=name)

    def _replica_logs(self) -> None:
        """Controller mode: every member's CommitLog a byte-identical prefix of the longest
        (the old masters truncated to what the new ones hold), each with every SEND_OK'd
        attempt once, and its consume queues complete."""
        r = self.report
        members = self.cluster.members
        logs = {m.name: commitlog_records(m.proc.store) for m in members}
        spans = {name: span(records) for name, records in logs.items()}
        r.notes.append(f"CommitLogs span {spans}")
        longest = max(members, key=lambda m: spans[m.name][1])
        for m in members:
            if m is not longest:
                r.divergence += [f"{m.name}: {p}" for p in prefix_divergence(longest.proc.store, m.proc.store)]
        for m in members:
            self._in_log(logs[m.name], f"{m.name}'s CommitLog")
            r.queues += queue_problems(m.proc.store, logs[m.name], upto=None, label=m.name)

    def _ha_logs(self) -> None:
        r = self.report
        master, slave = self.cluster.members
        logs = {m.name: commitlog_records(m.proc.store) for m in (master, slave)}
        spans = {name: span(records) for name, records in logs.items()}
        r.notes.append(f"CommitLogs span {spans}")
        r.divergence += prefix_divergence(master.proc.store, slave.proc.store)
        self._in_log(logs["master"], "the master's CommitLog")
        self._in_log(logs["slave"], "the slave's CommitLog")
        for m in (master, slave):
            r.queues += queue_problems(m.proc.store, logs[m.name], upto=None, label=m.name)
