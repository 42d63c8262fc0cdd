"""RouteWatch: while the faults run, whether the name server names the member that leads.

Every ``period`` s it asks the members who leads and the name server whom it names as the
group's master (brokerId 0). A new leader registers at once, so the two agree again within
a moment of any change; a stretch where they do not, longer than a bound, is a route that
sends every producer that reads it to the wrong member (or to none), as a late
registration from a deposed leader can leave it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import trio

from .clusters import ProcessCluster


@dataclass
class WrongRoute:
    start: float
    end: float
    named: str | None  # whom the name server named (None: no master)
    leader: str  # who led

    @property
    def seconds(self) -> float:
        return self.end - self.start


@dataclass
class RouteWatch:
    cluster: ProcessCluster
    period: float = 1.0
    samples: list[tuple[float, str | None, str]] = field(default_factory=list)  # (time, named, leader)
    stop: trio.Event = field(default_factory=trio.Event)

    async def run(self) -> None:
        """Sample until ``stop`` is set."""
        while not self.stop.is_set():
            leader = await self.cluster.leader()
            named = await self.cluster.namesrv_master()
            if leader is not None:  # during an election nobody is wrong
                self.samples.append((trio.current_time(), named, leader.address))
            with trio.move_on_after(self.period):
                await self.stop.wait()

    def wrong(self) -> list[WrongRoute]:
        """Every stretch of samples in which the name server named someone else, from its
        first such sample to the first sample that agreed again (or the last sample)."""
        out: list[WrongRoute] = []
        current: WrongRoute | None = None
        for t, named, leader in self.samples:
            if named != leader:
                if current is None:
                    current = WrongRoute(t, t, named, leader)
                current.end = t
            elif current is not None:
                current.end = t
                out.append(current)
                current = None
        if current is not None:
            out.append(current)
        return out
