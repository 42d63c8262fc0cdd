"""Broker groups as real processes with a fault proxy on every link between them.

* ``DLedgerCluster``: three members of one DLedger group. Member i's dLegerPeers names
  itself at its real DLedger port (it binds there) and every other member j at the proxy
  for the link i -> j, so each direction between two members is a proxy of its own.
* ``HACluster``: a master (SYNC_MASTER or ASYNC_MASTER) and a slave whose haMasterAddress
  is the proxy for the link slave -> master.
* ``ControllerCluster``: three brokers in controller mode and three controller processes;
  each broker reaches each controller through a proxy of its own (a partition cuts a broker
  off from the controllers; the HA links, found through the name server, are not proxied).

Each member also registers with the name server through a proxy of its own (its
namesrvAddr), which can be slowed down to make its registrations arrive late. Clients and
the name server itself are not proxied: a partitioned member stays reachable for
producers, as a broker cut off from its group but not from its clients would be. (A
follower's metadata sync to its master's broker port is not proxied either.)

The nemesis steers faults through the methods here; every one names the member it hits.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import trio

from rmq.client import MQAdmin
from rmq.client.errors import MQClientError
from rmq.protocol import RemotingCommand, RequestCode, ResponseCode
from rmq.protocol import body as json_body
from rmq.remoting import RemotingClient, RemotingError
from tests.broker.ha.procs import BrokerProcess, ControllerProcess, DLedgerGroup, free_port_block

from .proxy import CutMode, Proxy

STATUS_TIMEOUT = 1.5  # seconds for a member's runtime info; a paused one never answers
# broker.conf lines for every member. RocketMQ's default registration period: a registration
# that left a wrong route stands until the next one, as long as it would in production. The
# stores are small, but the disk is shared: the default 75 % refused writes when others filled it.
DEFAULTS = {"registerNameServerPeriod": "30000", "diskMaxUsedSpaceRatio": "95"}


class State(enum.Enum):
    UP = "up"
    PAUSED = "paused"
    KILLED = "killed"


@dataclass(eq=False)
class Member:
    name: str
    proc: BrokerProcess
    namesrv_link: Proxy
    state: State = State.UP

    @property
    def address(self) -> str:
        return self.proc.address

    def __str__(self) -> str:
        return f"{self.name} ({self.address})"


@dataclass
class Convergence:
    """What ``settle`` saw last: done, and each member's state as words."""

    done: bool
    seconds: float
    states: dict[str, str] = field(default_factory=dict)
    leader: str | None = None


class ProcessCluster:
    """Members as processes, the proxies between them, and the faults both can take."""

    kind: str
    group: str

    def __init__(self, root: Path, namesrv: str) -> None:
        self.root = root
        self.namesrv = namesrv
        self.members: list[Member] = []
        # (a, b) -> the proxy a's connections to b go through
        self.links: dict[tuple[str, str], Proxy] = {}
        self._client: RemotingClient | None = None

    async def _proxy(self, nursery: trio.Nursery, target: str, name: str) -> Proxy:
        proxy = Proxy(target, name)
        await nursery.start(proxy.serve)
        return proxy

    async def start(self, nursery: trio.Nursery, client: RemotingClient) -> None:
        """Proxies in ``nursery``, then every member's process (each returns once booted)."""
        raise NotImplementedError

    async def _boot(self, client: RemotingClient) -> None:
        self._client = client
        for m in self.members:
            await trio.to_thread.run_sync(m.proc.start)

    def by_address(self, address: str) -> Member | None:
        return next((m for m in self.members if m.address == address), None)

    def proxies(self) -> list[Proxy]:
        return [*self.links.values(), *(m.namesrv_link for m in self.members)]

    # -- who leads --------------------------------------------------------------------------

    async def runtime(self, member: Member, timeout: float = STATUS_TIMEOUT) -> dict[str, str] | None:
        """The member's GET_BROKER_RUNTIME_INFO table; None when it does not answer in time."""
        if member.state is not State.UP or self._client is None:
            return None
        request = RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO)
        try:
            with trio.fail_after(timeout):
                response = await self._client.invoke(member.address, request, timeout)
        except (RemotingError, trio.TooSlowError):
            return None
        if response.code != ResponseCode.SUCCESS:
            return None
        return dict(json_body.loads(response.body)["table"])

    async def leader(self) -> Member | None:
        """The member that takes sends now (by its own account), None when none says so."""
        raise NotImplementedError

    async def ready(self, timeout: float) -> None:
        """Wait until the group could fail over (what a schedule should start from)."""

    async def namesrv_master(self) -> str | None:
        """The address the name server gives as the group's master (brokerId 0)."""
        try:
            async with MQAdmin(namesrv=self.namesrv, timeout=2.0, remoting=self._client) as admin:
                info = await admin.cluster_info()
        except MQClientError:
            return None
        data = info.brokers.get(self.group)
        return data.addrs.get(0) if data is not None else None

    # -- faults on links --------------------------------------------------------------------

    def _touching(self, member: Member) -> list[tuple[tuple[str, str], Proxy]]:
        return [(k, p) for k, p in self.links.items() if member.name in k]

    def isolate(self, member: Member, mode: CutMode) -> None:
        """Every link between ``member`` and the others cut, both ways."""
        for _, proxy in self._touching(member):
            proxy.cut(mode)

    def one_way(self, member: Member, way: Literal["out", "in"]) -> None:
        """``out``: nothing ``member`` sends reaches the others; ``in``: nothing they send
        reaches it. The other direction still flows."""
        for (a, _b), proxy in self._touching(member):
            outgoing = a == member.name  # a link the member dialed
            if (way == "out") == outgoing:
                proxy.drop("to_target")
            else:
                proxy.drop("to_client")

    def slow(self, member: Member, seconds: float) -> None:
        for _, proxy in self._touching(member):
            proxy.delay(seconds)

    def reset(self, member: Member) -> None:
        for _, proxy in self._touching(member):
            proxy.reset()

    def slow_registration(self, member: Member, seconds: float) -> None:
        member.namesrv_link.delay(seconds)

    def heal_links(self, member: Member) -> None:
        for _, proxy in self._touching(member):
            proxy.heal()

    # -- faults on processes ----------------------------------------------------------------

    def pause(self, member: Member) -> None:
        member.proc.pause()
        member.state = State.PAUSED

    def resume(self, member: Member) -> None:
        member.proc.resume()
        member.state = State.UP

    async def kill(self, member: Member) -> None:
        await trio.to_thread.run_sync(member.proc.kill)
        member.state = State.KILLED

    async def restart(self, member: Member) -> None:
        """Start a killed member again on its own store; returns once it booted."""
        await trio.to_thread.run_sync(member.proc.start)
        member.state = State.UP

    async def heal_all(self) -> None:
        """Every proxy healed, every paused member resumed, every killed one restarted."""
        for proxy in self.proxies():
            proxy.heal()
        for m in self.members:
            if m.state is State.PAUSED:
                self.resume(m)
            elif m.state is State.KILLED:
                await self.restart(m)

    def environment(self) -> list[str]:
        """What the members' logs say went wrong with this machine rather than with them."""
        found = []
        for m in self.members:
            try:
                text = m.proc.log_path.read_text(errors="replace")
            except OSError:
                continue
            lines = [line for line in text.splitlines() if "refusing writes" in line]
            if lines:
                found.append(f"{m.name}'s disk was too full: {len(lines)} times, e.g. {lines[0][-80:]}")
        return found

    def stop(self) -> None:
        """Every member stopped cleanly (SIGCONT, SIGTERM), so its store is flushed."""
        for m in self.members:
            m.proc.stop()
            m.state = State.KILLED

    # -- after the faults ----------------------------------------------------------------------

    async def settle(self, timeout: float) -> Convergence:
        """Wait up to ``timeout`` s for every member to hold, apply and dispatch the same log
        and for the name server to name the leader as the master."""
        t0 = trio.current_time()
        last = Convergence(False, 0.0)
        while True:
            last = await self._converged()
            last.seconds = trio.current_time() - t0
            if last.done or last.seconds >= timeout:
                return last
            await trio.sleep(0.25)

    async def _converged(self) -> Convergence:
        raise NotImplementedError


class DLedgerCluster(ProcessCluster):
    kind = "dledger"

    def __init__(self, root: Path, namesrv: str, size: int = 3, **conf: str) -> None:
        super().__init__(root, namesrv)
        self.group = "broker-d"
        self.size = size
        self.conf = {**DEFAULTS, **conf}

    async def start(self, nursery: trio.Nursery, client: RemotingClient) -> None:
        ports = DLedgerGroup.pick_ports(self.size)
        real = {f"n{i}": f"127.0.0.1:{p + 2}" for i, p in enumerate(ports)}
        for a in real:
            for b in real:
                if a != b:
                    self.links[(a, b)] = await self._proxy(nursery, real[b], f"{a}->{b}")
        peers = [
            ";".join(f"{b}-{real[b] if b == a else self.links[(a, b)].address}" for b in real)
            for a in real
        ]  # fmt: skip
        ns_links = [await self._proxy(nursery, self.namesrv, f"{a}->namesrv") for a in real]
        group = DLedgerGroup(
            self.root, self.namesrv, self.group, self.size, ports=ports, peers=peers,
            namesrvs=[p.address for p in ns_links], **self.conf,
        )  # fmt: skip
        self.dledger = group
        self.members = [Member(f"n{i}", proc, ns_links[i]) for i, proc in enumerate(group.members)]
        await self._boot(client)

    async def leader(self) -> Member | None:
        best: tuple[int, Member] | None = None
        for m in self.members:
            info = await self.runtime(m)
            if info and info.get("dLegerRole") == "LEADER":
                term = int(info.get("dLegerTerm", "0"))
                if best is None or term > best[0]:
                    best = (term, m)
        return best[1] if best else None

    async def _converged(self) -> Convergence:
        states: dict[str, str] = {}
        seen: set[tuple[str, str, str]] = set()
        leaders = []
        done = True
        for m in self.members:
            info = await self.runtime(m)
            if info is None:
                states[m.name] = f"{m.state.value}, no answer"
                done = False
                continue
            end, commit, applied = info["dLegerEndIndex"], info["dLegerCommitIndex"], info["dLegerAppliedIndex"]
            behind = info.get("dispatchBehindBytes", "0")
            states[m.name] = (
                f"{info['dLegerRole']} term {info['dLegerTerm']} end {end} commit {commit} applied {applied} "
                f"dispatch behind {behind} max offset {info['commitLogMaxOffset']}"
            )
            seen.add((end, commit, applied))
            done = done and end == commit == applied and behind == "0"
            if info["dLegerRole"] == "LEADER":
                leaders.append(m)
        master = await self.namesrv_master()
        states["namesrv"] = f"master {master}"
        done = done and len(seen) == 1 and len(leaders) == 1 and master == leaders[0].address
        return Convergence(done, 0.0, states, leaders[0].address if len(leaders) == 1 else None)

    def roles(self) -> str:
        return self.dledger.roles()

    async def hand_leadership(self, member: Member, timeout: float = 10.0) -> bool:
        """Ask the leader to hand over to ``member`` (LEADERSHIP_TRANSFER); True once it serves
        as the master (its term's first entry committed, registered as brokerId 0) within
        ``timeout`` s."""
        with trio.move_on_after(timeout):
            leader = await self.leader()
            if leader is not None and leader is not member:
                try:
                    async with MQAdmin(timeout=timeout) as admin:
                        await admin.transfer_leadership(leader.address, member.name)
                except MQClientError:
                    return False
            while True:
                info = await self.runtime(member)
                if info and info.get("dLegerRole") == "LEADER" and info.get("brokerRole") != "SLAVE":
                    return True
                await trio.sleep(0.05)
        return False


class HACluster(ProcessCluster):
    kind = "ha"

    def __init__(self, root: Path, namesrv: str, role: str = "SYNC_MASTER", **conf: str) -> None:
        super().__init__(root, namesrv)
        self.group = "broker-a"
        self.role = role
        self.conf = {**DEFAULTS, **conf}

    async def start(self, nursery: trio.Nursery, client: RemotingClient) -> None:
        ns_master = await self._proxy(nursery, self.namesrv, "master->namesrv")
        ns_slave = await self._proxy(nursery, self.namesrv, "slave->namesrv")
        master = BrokerProcess(self.root / "master", ns_master.address, self.group, role=self.role, **self.conf)
        link = await self._proxy(nursery, master.ha_address, "slave->master")
        self.links[("slave", "master")] = link
        slave = BrokerProcess(
            self.root / "slave", ns_slave.address, self.group, role="SLAVE", haMasterAddress=link.address, **self.conf
        )
        self.members = [Member("master", master, ns_master), Member("slave", slave, ns_slave)]
        await self._boot(client)

    async def leader(self) -> Member | None:
        master = self.members[0]
        return master if master.state is State.UP else None

    async def _converged(self) -> Convergence:
        states: dict[str, str] = {}
        ends: set[str] = set()
        done = True
        for m in self.members:
            info = await self.runtime(m)
            if info is None:
                states[m.name] = f"{m.state.value}, no answer"
                done = False
                continue
            behind = info.get("dispatchBehindBytes", "0")
            states[m.name] = f"{info['brokerRole']} max offset {info['commitLogMaxOffset']} dispatch behind {behind}"
            ends.add(info["commitLogMaxOffset"])
            done = done and behind == "0"
        master = await self.namesrv_master()
        states["namesrv"] = f"master {master}"
        done = done and len(ends) == 1 and master == self.members[0].address
        return Convergence(done, 0.0, states, self.members[0].address)


class ControllerCluster(ProcessCluster):
    """Brokers n0..n2 of one group in controller mode (allAckInSyncStateSet on), three
    controllers c0..c2 (never faulted here: their own faults are tests/controller's)."""

    kind = "controller"

    def __init__(self, root: Path, namesrv: str, size: int = 3, **conf: str) -> None:
        super().__init__(root, namesrv)
        self.group = "broker-c"
        self.size = size
        self.conf = {**DEFAULTS, **CONTROLLER_BROKER, **conf}
        self.controllers: list[ControllerProcess] = []

    async def start(self, nursery: trio.Nursery, client: RemotingClient) -> None:
        self.controllers = ControllerProcess.group(self.root / "controllers", 3)
        for c in self.controllers:
            await trio.to_thread.run_sync(c.start)
        procs = []
        for i in range(self.size):
            name = f"n{i}"
            addrs = []
            for j, c in enumerate(self.controllers):
                link = await self._proxy(nursery, c.address, f"{name}->c{j}")
                self.links[(name, f"c{j}")] = link
                addrs.append(link.address)
            ns_link = await self._proxy(nursery, self.namesrv, f"{name}->namesrv")
            proc = BrokerProcess(
                self.root / name, ns_link.address, self.group, port=free_port_block(5),
                enableControllerMode="true", controllerAddr=";".join(addrs), **self.conf,
            )  # fmt: skip
            procs.append(Member(name, proc, ns_link))
        self.members = procs
        await self._boot(client)

    async def leader(self) -> Member | None:
        best: tuple[int, Member] | None = None
        for m in self.members:
            info = await self.runtime(m)
            if info and info.get("brokerRole") in ("SYNC_MASTER", "ASYNC_MASTER"):
                epoch = int(info.get("controllerMasterEpoch", "0"))
                if best is None or epoch > best[0]:
                    best = (epoch, m)
        return best[1] if best else None

    async def ready(self, timeout: float) -> None:
        """Every broker in the master's SyncStateSet: the controller elects only from it."""
        with trio.move_on_after(timeout):
            while True:
                leader = await self.leader()
                info = await self.runtime(leader) if leader is not None else None
                if info and info.get("syncStateSet", "").count(",") == self.size - 1:
                    return
                await trio.sleep(0.2)

    async def _converged(self) -> Convergence:
        states: dict[str, str] = {}
        ends: set[str] = set()
        masters = []
        done = True
        for m in self.members:
            info = await self.runtime(m)
            if info is None:
                states[m.name] = f"{m.state.value}, no answer"
                done = False
                continue
            behind = info.get("dispatchBehindBytes", "0")
            states[m.name] = (
                f"{info['brokerRole']} epoch {info.get('controllerMasterEpoch')} "
                f"max offset {info['commitLogMaxOffset']} dispatch behind {behind}"
            )
            ends.add(info["commitLogMaxOffset"])
            done = done and behind == "0"
            if info["brokerRole"] != "SLAVE":
                masters.append(m)
        master = await self.namesrv_master()
        states["namesrv"] = f"master {master}"
        done = done and len(ends) == 1 and len(masters) == 1 and master == masters[0].address
        return Convergence(done, 0.0, states, masters[0].address if len(masters) == 1 else None)

    def stop(self) -> None:
        super().stop()
        for c in self.controllers:
            c.stop()


# every controller-mode broker's settings: failover within a few seconds
CONTROLLER_BROKER = {
    "allAckInSyncStateSet": "true",
    "controllerHeartBeatTimeoutMills": "3000",
    "syncBrokerMetadataPeriod": "1000",
    "checkSyncStateSetPeriod": "1000",
    "haMaxTimeSlaveNotCatchup": "5000",
    "haSendHeartbeatInterval": "1000",
    "flushDiskType": "ASYNC_FLUSH",
}
