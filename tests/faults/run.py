"""One run: a cluster of processes, load, a seeded nemesis, then the checker.

    report = await run(Scenario("dledger", seed=3, seconds=25), tmp_path)
    assert not report.problems, report.summary()

Files under ``root``: each member's store and log, ``nemesis.log`` (the plan, then every
fault and heal as it happened, with times) and ``history.jsonl`` (every send attempt).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import trio

from rmq.client import Producer
from rmq.remoting import RemotingClient
from tests.broker.cluster import loopback_namesrv

from .checker import Checker, Report, failovers, recoveries
from .clusters import ControllerCluster, DLedgerCluster, HACluster, ProcessCluster
from .load import CppLoad, History, PinnedLoad, PyLoad
from .nemesis import KINDS, EventLog, Fault, Nemesis, leader_faults, plan
from .watch import RouteWatch

BOOT_TIMEOUT = 60.0  # seconds to the first SEND_OK after the members started
TAIL = 2.0  # seconds of load after the first SEND_OK that follows the last heal


@dataclass(frozen=True)
class Scenario:
    cluster: str  # "dledger", "ha" or "controller"
    seed: int
    seconds: float = 25.0  # length of the fault schedule
    role: str = "SYNC_MASTER"  # the master's, for "ha"
    senders: int = 2
    interval: float = 0.02  # seconds between one sender's sends
    cpp: bool = False  # the official C++ client sends too, in waves
    settle: float = 20.0  # seconds for the group to converge and serve everything after the heal
    failover_bound: float = 12.0  # seconds to a SEND_OK after a leader fault or a heal
    kinds: tuple[str, ...] = KINDS
    conf: dict[str, str] = field(default_factory=dict)  # broker.conf lines for every member
    faults: tuple[Fault, ...] | None = None  # a fixed schedule instead of the seed's

    def replay(self) -> str:
        """The command that runs this scenario again."""
        return (f"python bench/nemesis.py --cluster {self.cluster} --start {self.seed} --seeds 1 "
                f"--seconds {self.seconds:g}{' --cpp' if self.cpp else ''}"
                f"{' --async-master' if self.role == 'ASYNC_MASTER' else ''}"
                f"{'' if self.kinds == KINDS else ' --kinds ' + ','.join(self.kinds)}")  # fmt: skip


def make_cluster(s: Scenario, root: Path, namesrv: str) -> ProcessCluster:
    if s.cluster == "dledger":
        return DLedgerCluster(root, namesrv, **s.conf)
    if s.cluster == "controller":
        return ControllerCluster(root, namesrv, **s.conf)
    return HACluster(root, namesrv, role=s.role, **s.conf)


async def run(s: Scenario, root: Path, *, echo: bool = False) -> Report:
    """Run ``s`` with its stores under ``root``; the checker's report (faults healed, every
    member stopped)."""
    root.mkdir(parents=True, exist_ok=True)
    log = EventLog(root / "nemesis.log", echo=echo)
    faults = list(s.faults) if s.faults is not None else plan(s.seed, s.seconds, s.cluster, kinds=s.kinds)
    log(f"{s.cluster} seed {s.seed}, {len(faults)} faults planned; replay: {s.replay()}")
    for f in faults:
        log(f"  planned: {f}")
    history = History()
    report = Report(s.cluster, s.seed)
    try:
        async with loopback_namesrv() as ns, RemotingClient() as client, trio.open_nursery() as proxies:
            cluster = make_cluster(s, root, ns.address)
            checker = Checker(cluster, history, report)
            try:
                await cluster.start(proxies, client)
                log(f"members up: {', '.join(str(m) for m in cluster.members)}")
                await drive(s, cluster, faults, history, log, proxies, checker)
            finally:
                with trio.CancelScope(shield=True):
                    await trio.to_thread.run_sync(cluster.stop)
                proxies.cancel_scope.cancel()
        checker.check_offline()
        report.environment = cluster.environment()
        a = history.attempts
        report.attempts = len(a)
        report.acked = sum(1 for x in a if x.ok)
        report.errors = sum(1 for x in a if x.status.startswith("error"))
        report.not_ok = len(a) - report.acked - report.errors
        for line in report.summary().splitlines():
            log(line)
        if isinstance(cluster, DLedgerCluster):
            log("roles:\n" + cluster.roles())
        return report
    finally:  # what happened, also when the run did not get to its end
        history.dump(root / "history.jsonl")
        log.close()


async def drive(
    s: Scenario,
    cluster: ProcessCluster,
    faults: list[Fault],
    history: History,
    log: EventLog,
    nursery: trio.Nursery,
    checker: Checker,
) -> None:
    """Load and faults, the heal, then the online checks and the availability verdicts."""
    ns = cluster.namesrv
    # a count no run reaches before its stop (the bound is for a clock gone wrong)
    budget = int(s.senders * (s.seconds + 3 * s.settle + 60) / s.interval)
    py = PyLoad(ns, history, senders=s.senders, interval=s.interval, max_sends=budget)
    await first_send_ok(py, ns)
    await cluster.ready(BOOT_TIMEOUT)
    log("first SEND_OK; load and faults start")
    nemesis = Nemesis(cluster, faults, log, s.seed)
    pinned = PinnedLoad(cluster, history)
    cpp = CppLoad(ns, history) if s.cpp else None
    watch = RouteWatch(cluster)  # until the online checks are done: they wait for the route too
    nursery.start_soon(watch.run)
    async with trio.open_nursery() as work:
        work.start_soon(py.run)
        work.start_soon(pinned.run, budget)
        if cpp is not None:
            work.start_soon(cpp.run)
        await nemesis.run()
        log("all healed")
        await tail(history, log, s.settle)
        py.stop.set()
        pinned.stop.set()
        if cpp is not None:
            cpp.stop.set()
    log("load stopped")
    await checker.check_online(s.settle)
    watch.stop.set()
    judge_availability(s, checker.report, nemesis, history, watch)
    log("online checks done")


async def tail(history: History, log: EventLog, settle: float) -> None:
    """After the last heal: until a SEND_OK (``settle`` s at most), then TAIL s more."""
    healed = trio.current_time()
    with trio.move_on_after(settle):
        while history.first_ok_after(healed) is None:
            await trio.sleep(0.1)
    first = history.first_ok_after(healed)
    if first is not None and first.answered is not None:
        log(f"first SEND_OK after the heal came {first.answered - healed:.2f}s later")
        await trio.sleep(TAIL)


def judge_availability(s: Scenario, report: Report, nemesis: Nemesis, history: History, watch: RouteWatch) -> None:
    """Failovers, recoveries after heals and the name server's routes, into ``report``."""
    report.faults = nemesis.counts
    bound = s.failover_bound
    kinds = leader_faults(s.cluster)
    report.failovers, slow = failovers(nemesis.applied, history, bound, elsewhere=s.cluster != "ha", kinds=kinds)
    report.availability += slow
    report.recoveries, slow = recoveries(nemesis.applied, history, bound, trio.current_time())
    report.availability += slow
    cluster = nemesis.cluster
    for w in watch.wrong():
        report.wrong_route = max(report.wrong_route, w.seconds)
        if w.seconds > bound:
            named = cluster.by_address(w.named) if w.named else None
            leader = cluster.by_address(w.leader)
            report.availability.append(
                f"the name server named {named or w.named or 'no master'} as master while {leader or w.leader} led, "
                f"for {w.seconds:.1f}s from {w.start - history.t0:.1f}s"
            )


async def first_send_ok(load: PyLoad, namesrv: str) -> None:
    """Send until one attempt is SEND_OK (the topic then exists on the master).

    Raises:
        RuntimeError: none within BOOT_TIMEOUT, with the last attempt's answer.
    """
    last = None
    async with Producer("fault-warm", namesrv=namesrv, retry_times=0, send_timeout=3.0) as producer:
        with trio.move_on_after(BOOT_TIMEOUT):
            n = 0
            while not (last := await load.send(producer, f"warm-{n}")).ok:
                n += 1
                await trio.sleep(0.2)
            return
    raise RuntimeError(f"no SEND_OK within {BOOT_TIMEOUT:.0f}s of the members' start; the last: {last}")
