"""The nemesis: a seeded schedule of faults, applied to a running cluster one at a time.

    faults = plan(seed=7, seconds=30, cluster="dledger")     # the same list for the same seed
    nemesis = Nemesis(cluster, faults, EventLog(path))
    await nemesis.run()                                     # applies, holds, heals each; then heals all

Kinds (each hits one member, named when the fault starts by its role then, e.g. "leader"):

* ``partition``: every link between the member and the others cut both ways, ``refuse``
  (connections reset) or ``blackhole`` (sockets open, nothing forwarded);
* ``one_way``: only what the member sends (``out``) or only what it receives (``in``) stops;
* ``pause``: SIGSTOP, then SIGCONT;
* ``kill``: SIGKILL, then a restart on the same store (at once, or after the hold);
* ``reset``: every connection of the member's links closed with a RST (no hold);
* ``slow``: latency added to the member's links;
* ``late_registration``: the member's link to the name server slowed by several seconds.
  In a DLedger group the member (a follower) is then handed the leadership and, once it
  leads, cut off from the group: deposed soon after it registered as the master, its
  registrations as master and then as slave reach the name server after its successor's.

``plan`` draws kinds, targets and holds from ``random.Random(seed)`` alone, so a seed names
a schedule. What happens under it depends on timing; the log says what did, with times.
"""

from __future__ import annotations

import collections
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

import trio

from .clusters import DLedgerCluster, Member, ProcessCluster

KINDS = ("partition", "one_way", "pause", "kill", "reset", "slow", "late_registration")
WEIGHTS = (3, 2, 3, 3, 1, 1, 2)
TARGETS = {
    "dledger": ("leader", "leader", "leader", "follower", "follower"),
    "ha": ("master", "master", "slave"),
    "controller": ("leader", "leader", "leader", "follower", "follower"),
}
# A fault that takes the leader away (the group can elect another while it lasts); a late
# registration does only in a DLedger group, where the nemesis cuts the leader off too
LEADER_FAULTS = ("partition", "pause", "kill", "late_registration")


def leader_faults(cluster: str) -> tuple[str, ...]:
    """The kinds of LEADER_FAULTS that take the leader of a ``cluster`` group away."""
    return LEADER_FAULTS if cluster == "dledger" else tuple(k for k in LEADER_FAULTS if k != "late_registration")


@dataclass(frozen=True)
class Fault:
    at: float  # planned start, seconds after the schedule starts
    kind: str
    target: str  # a role ("leader", "follower", "master", "slave"), resolved when it starts
    hold: float  # seconds until the heal (0: none, e.g. a reset)
    option: str = ""  # refuse/blackhole, out/in, or a delay in ms

    def __str__(self) -> str:
        option = f" {self.option}" if self.option else ""
        return f"{self.kind}{option} {self.target} for {self.hold:.1f}s at {self.at:.1f}s"


def plan(
    seed: int,
    seconds: float,
    cluster: str,
    *,
    long_hold: tuple[float, float] = (17.0, 22.0),
    long_share: float = 0.2,
    kinds: tuple[str, ...] = KINDS,
) -> list[Fault]:
    """Faults for ``seconds`` of schedule, one after another with quiet gaps between. Most
    hold 1-5 s and are followed by 1-3 s of quiet; ``long_share`` of them hold ``long_hold``
    instead, and as many are followed by that long a quiet: past the availability bound,
    so a leader fault that long must be failed over from, and a group healed for that long
    must be serving again."""
    rng = random.Random(seed)
    weights = [w for k, w in zip(KINDS, WEIGHTS, strict=True) if k in kinds]
    faults: list[Fault] = []
    t = 1.0
    while t < seconds:
        kind = rng.choices([k for k in KINDS if k in kinds], weights)[0]
        target = rng.choice(TARGETS[cluster])
        hold = rng.uniform(*long_hold) if rng.random() < long_share else rng.uniform(1.0, 5.0)
        option = ""
        if kind == "partition":
            option = rng.choice(("refuse", "blackhole"))
        elif kind == "one_way":
            option = rng.choice(("out", "in"))
        elif kind == "slow":
            option = str(rng.choice((20, 100, 300)))
        elif kind == "late_registration":
            option = str(rng.choice((3000, 5000, 8000)))
            hold = max(hold, int(option) / 1000 + 1)
            target = "follower" if cluster == "dledger" else target  # to be made the leader
        elif kind == "reset":
            hold = 0.0
        elif kind == "kill" and rng.random() < 0.3:
            hold = 0.0  # restarted at once: back while clients may still be sending to it
        faults.append(Fault(round(t, 2), kind, target, round(hold, 2), option))
        t += hold + (rng.uniform(*long_hold) if rng.random() < long_share else rng.uniform(1.0, 3.0))
    return faults


@dataclass
class Applied:
    """A fault as it happened: on whom, from when to when (trio clock)."""

    fault: Fault
    member: str
    address: str
    was_leader: bool
    started: float
    healed: float | None = None


class EventLog:
    """Timestamped lines, to a file as they come (a hung run still leaves its story)."""

    def __init__(self, path: Path | None = None, *, echo: bool = False) -> None:
        self.lines: list[str] = []
        self.t0 = trio.current_time()
        self.wall0 = time.time()
        self.echo = echo
        self._file: TextIO | None = open(path, "a") if path is not None else None  # noqa: SIM115

    def __call__(self, text: str) -> None:
        now = trio.current_time() - self.t0
        line = f"{now:8.2f}s {time.strftime('%H:%M:%S', time.localtime(self.wall0 + now))}  {text}"
        self.lines.append(line)
        if self._file is not None:
            self._file.write(line + "\n")
            self._file.flush()
        if self.echo:
            print(line, flush=True)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


@dataclass
class Nemesis:
    cluster: ProcessCluster
    faults: list[Fault]
    log: EventLog
    seed: int = 0
    applied: list[Applied] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)  # picks among followers, apart from the plan's draws

    @property
    def counts(self) -> collections.Counter[str]:
        return collections.Counter(a.fault.kind for a in self.applied)

    async def run(self) -> None:
        """Every fault at its planned time (later if the one before took longer), healed
        after its hold; at the end, or when cancelled, everything healed."""
        t0 = trio.current_time()
        try:
            for fault in self.faults:
                await trio.sleep_until(t0 + fault.at)
                await self._one(fault)
        finally:
            with trio.CancelScope(shield=True):
                self.log("heal all")
                await self.cluster.heal_all()

    async def _pick(self, role: str) -> tuple[Member, bool]:
        """The member to hit, and whether it leads now."""
        members = self.cluster.members
        if role == "master":
            return members[0], True
        if role == "slave":
            return members[1], False
        leader = await self.cluster.leader()
        if role == "leader" and leader is not None:
            return leader, True
        return self.rng.choice([m for m in members if m is not leader]), False

    async def _one(self, fault: Fault) -> None:
        member, was_leader = await self._pick(fault.target)
        c = self.cluster
        note = f"{fault.kind}{' ' + fault.option if fault.option else ''} {member}"
        note += f"{' (leader)' if was_leader else ''} for {fault.hold:.1f}s"
        applied = Applied(fault, member.name, member.address, was_leader, trio.current_time())
        self.applied.append(applied)
        self.log(note)
        kind = fault.kind
        if kind == "partition":
            c.isolate(member, "refuse" if fault.option == "refuse" else "blackhole")
        elif kind == "one_way":
            c.one_way(member, "out" if fault.option == "out" else "in")
        elif kind == "pause":
            c.pause(member)
        elif kind == "kill":
            await c.kill(member)
        elif kind == "reset":
            c.reset(member)
        elif kind == "slow":
            c.slow(member, int(fault.option) / 1000)
        elif kind == "late_registration":
            c.slow_registration(member, int(fault.option) / 1000)
            if isinstance(c, DLedgerCluster):
                if await c.hand_leadership(member):
                    applied.was_leader, applied.started = True, trio.current_time()
                    self.log(f"{member.name} leads; cut it off")
                c.isolate(member, "blackhole")
        await trio.sleep(fault.hold)
        if kind == "late_registration" and c.kind == "dledger":
            c.heal_links(member)  # the group again, the name server link still slow
            self.log(f"heal {member.name}'s group links; its name server link stays slow")
            await trio.sleep(int(fault.option) / 1000 + 1)
            member.namesrv_link.heal()
        elif kind == "pause":
            c.resume(member)
        elif kind == "kill":
            await c.restart(member)
        elif kind == "late_registration":
            member.namesrv_link.heal()
        elif kind != "reset":
            c.heal_links(member)
        applied.healed = trio.current_time()
        if kind != "reset":
            self.log(f"healed {member.name} ({kind})")
