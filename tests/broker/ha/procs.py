"""Brokers as real processes (`python -m rmq broker -c broker.conf`), for tests that kill them
with SIGKILL or pause them with SIGSTOP. The name server runs in the test's own process.

    b = BrokerProcess(tmp_path / "a-m", namesrv, "broker-a", role="SYNC_MASTER")
    b.start()            # returns once the broker printed its boot line
    b.kill()             # SIGKILL; the store stays on disk as the crash left it
    b.start()            # the same store and ports again
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from rmq.store import iter_commitlog

from ...ports import free_ports

ROOT = Path(__file__).resolve().parents[3]
COMMITLOG_SIZE = 1024 * 1024


def start_rmq(
    args: list[str], log_path: Path, timeout: float, env: dict[str, str] | None = None, ready: str = "boot success"
) -> subprocess.Popen[str] | None:
    """`python -m rmq ARGS` with stderr appended to ``log_path``, once it printed a line with
    ``ready`` (its boot line); None when it exited or stayed silent for ``timeout`` s."""
    log = open(log_path, "a")  # noqa: SIM115 - owned by the process's lifetime
    proc = subprocess.Popen(
        [sys.executable, "-m", "rmq", *args],
        stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL, text=True, cwd=ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
    )  # fmt: skip
    log.close()
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if ready in line:
            return proc
        if not line and proc.poll() is not None:
            break
    return None


def free_port_block(size: int = 4) -> int:
    """A port p with p-2 .. p+size-1 all free now (a broker uses listenPort-2, listenPort, +1)."""
    return free_ports(size, below=2)


class BrokerProcess:
    def __init__(
        self,
        store: Path,
        namesrv: str,
        name: str,
        *,
        role: str = "ASYNC_MASTER",
        broker_id: int | None = None,
        port: int | None = None,
        flush: str = "ASYNC_FLUSH",
        **extra: str,
    ) -> None:
        self.store = store
        self.name = name
        self.role = role
        self.port = port or free_port_block()
        self.proc: subprocess.Popen[str] | None = None
        props = {
            "brokerClusterName": "HaCluster",
            "brokerName": name,
            "brokerId": str(broker_id if broker_id is not None else (1 if role == "SLAVE" else 0)),
            "brokerRole": role,
            "namesrvAddr": namesrv,
            "brokerIP1": "127.0.0.1",
            "bindAddress": "127.0.0.1",
            "listenPort": str(self.port),
            "storePathRootDir": str(store),
            "flushDiskType": flush,
            "mappedFileSizeCommitLog": str(COMMITLOG_SIZE),
            "mappedFileSizeConsumeQueue": str(3000 * 20),
            "maxMessageSize": str(256 * 1024),
            "registerNameServerPeriod": "10000",
            **extra,
        }
        store.mkdir(parents=True, exist_ok=True)
        self.conf = store.parent / f"{store.name}.conf"
        self.conf.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        self.log_path = store.parent / f"{store.name}.log"

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def ha_address(self) -> str:
        return f"127.0.0.1:{self.port + 1}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self, timeout: float = 30.0) -> None:
        env = {"RMQ_RUN_DIR": str(self.store.parent / "run")}
        self.proc = start_rmq(["broker", "-c", str(self.conf)], self.log_path, timeout, env)
        if self.proc is None:
            raise RuntimeError(f"broker {self.name} did not start; its log:\n{self.log()}")

    def log(self) -> str:
        try:
            return self.log_path.read_text()[-6000:]
        except OSError:
            return ""

    def kill(self) -> None:
        """SIGKILL: no shutdown, no flush, the abort file stays."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def pause(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGCONT)
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)

    def commitlog(self) -> dict[int, bytes]:
        """Every record on disk, by offset (read-only; works on a killed broker's store). A
        DLedger member's records are in its DLedger data files."""
        members = sorted(self.store.glob("dledger-*"))
        if members:
            return dict(iter_commitlog(members[0] / "data", dledger=True))
        return dict(iter_commitlog(self.store / "commitlog"))

    def commitlog_range(self, start: int, end: int) -> bytes:
        out = bytearray()
        directory = self.store / "commitlog"
        for name in sorted(os.listdir(directory)):
            base = int(name)
            if base + COMMITLOG_SIZE <= start or base >= end:
                continue
            with open(directory / name, "rb") as f:
                data = f.read()
            lo, hi = max(start, base) - base, min(end, base + COMMITLOG_SIZE) - base
            out += data[lo:hi]
        return bytes(out)


class DLedgerGroup:
    """Three (or more) brokers of one DLedger group as processes, DLedger port = listenPort + 2.

    ``conf`` overrides broker.conf keys for every member (timeouts, flushDiskType, ...).
    ``ports`` (from ``DLedgerGroup.pick_ports``) fixes each member's listenPort; ``peers``
    gives each member a dLegerPeers of its own and ``namesrvs`` a namesrvAddr of its own (a
    test that puts proxies between members and name servers builds them from the ports).
    """

    def __init__(
        self,
        root: Path,
        namesrv: str,
        name: str = "broker-d",
        size: int = 3,
        *,
        ports: list[int] | None = None,
        peers: list[str] | None = None,
        namesrvs: list[str] | None = None,
        **conf: str,
    ) -> None:
        ports = ports or self.pick_ports(size)
        shared = ";".join(f"n{i}-127.0.0.1:{p + 2}" for i, p in enumerate(ports))
        settings = {"dLegerElectionTimeoutMs": "1000", "dLegerHeartbeatIntervalMs": "200", **conf}
        self.members = [
            BrokerProcess(
                root / f"n{i}",
                namesrvs[i] if namesrvs else namesrv,
                name,
                port=p,
                enableDLegerCommitLog="true",
                dLegerGroup=name,
                dLegerPeers=peers[i] if peers else shared,
                dLegerSelfId=f"n{i}",
                **settings,
            )  # fmt: skip
            for i, p in enumerate(ports)
        ]

    @staticmethod
    def pick_ports(size: int = 3) -> list[int]:
        """A listenPort for each member, with its neighbours free (DLedger's is listenPort + 2)."""
        return [free_port_block(5) for _ in range(size)]

    def start(self) -> None:
        for m in self.members:
            m.start()

    def stop(self) -> None:
        for m in self.members:
            m.stop()

    def by_address(self, address: str) -> BrokerProcess:
        return next(m for m in self.members if m.address == address)

    def roles(self) -> str:
        """Every member's elections and role changes from its log, in time order (for a
        failure's message: who led when)."""
        marks = ("stands for", "is the leader", "follows", "serves as the master", "is now", "SIGTERM")
        lines = []
        for m in self.members:
            try:
                text = m.log_path.read_text()
            except OSError:
                continue
            lines += [f"{line[11:23]} {m.store.name}: {line.partition(' - ')[2]}" for line in text.splitlines()
                      if any(k in line for k in marks)]  # fmt: skip
        return "\n".join(sorted(lines))


class ControllerProcess:
    """One controller member as a process (its Raft and request port in the peers): `rmq
    controller`, or with `namesrv_port` a name server (`rmq namesrv`) with the member inside
    (enableControllerInNamesrv). ``conf`` adds or overrides controller.conf lines."""

    def __init__(
        self, root: Path, self_id: str, peers: str, address: str, namesrv_port: int | None = None, **conf: str
    ) -> None:
        self.id, self.address = self_id, address
        self.namesrv = None if namesrv_port is None else f"127.0.0.1:{namesrv_port}"
        root.mkdir(parents=True, exist_ok=True)
        self.conf = root / f"{self_id}.conf"
        self.log_path = root / f"{self_id}.log"
        props = {
            "controllerDLegerGroup": "cgroup", "controllerDLegerPeers": peers, "controllerDLegerSelfId": self_id,
            "controllerStorePath": str(root / self_id), "mappedFileSize": str(1024 * 1024),
            "bindAddress": "127.0.0.1", "controllerDLegerElectionTimeoutMs": "1000",
            "controllerDLegerHeartbeatIntervalMs": "200",
            "scanNotActiveBrokerInterval": "1000", "scanInactiveMasterInterval": "1000",
        }  # fmt: skip
        if namesrv_port is not None:
            props.update(
                listenPort=str(namesrv_port), kvConfigPath=str(root / f"{self_id}-kv.json"),
                enableControllerInNamesrv="true",
            )  # fmt: skip
        props.update(conf)
        self.conf.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        self.proc: subprocess.Popen[str] | None = None

    @classmethod
    def group(cls, root: Path, size: int = 3, **conf: str) -> list[ControllerProcess]:
        ports = [free_ports() for _ in range(size)]
        peers = ";".join(f"c{i}-127.0.0.1:{p}" for i, p in enumerate(ports))
        return [cls(root, f"c{i}", peers, f"127.0.0.1:{p}", **conf) for i, p in enumerate(ports)]

    def start(self, timeout: float = 30.0) -> None:
        if self.namesrv is None:
            self.proc = start_rmq(["controller", "-c", str(self.conf)], self.log_path, timeout)
        else:  # the name server boots before its controller member
            args = ["namesrv", "-c", str(self.conf)]
            self.proc = start_rmq(args, self.log_path, timeout, ready="The ControllerManager boot success")
        if self.proc is None:
            raise RuntimeError(f"controller {self.id} did not start:\n{self.log_path.read_text()[-4000:]}")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
