"""A DLedger group of three real processes (`python -m rmq.broker.dledger`): a leader is
elected, appends commit on a majority, the leader is killed with SIGKILL and another takes
over, the killed member rejoins and catches up, and every committed entry is the same on
every member's disk."""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from rmq.protocol import RemotingCommand, ResponseCode
from rmq.raft import messages as M
from rmq.remoting import RemotingClient, RemotingError
from rmq.store.dledger_log import DLedgerLog

from ...ports import free_ports
from .procs import ROOT

pytestmark = pytest.mark.slow

ELECTION_MS = 600


class Member:
    def __init__(self, ident: str, peers: str, store: Path) -> None:
        self.id = ident
        self.peers = peers
        self.store = store
        self.proc: subprocess.Popen[str] | None = None

    def start(self) -> None:
        log_path = self.store.parent / f"{self.id}.log"
        log = open(log_path, "a")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "rmq.broker.dledger", "--self", self.id, "--peers", self.peers,
             "--store", str(self.store), "--election-timeout-ms", str(ELECTION_MS), "--heartbeat-ms", "150"],
            stdout=subprocess.PIPE, stderr=log, text=True, cwd=ROOT, env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )  # fmt: skip
        log.close()
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert "boot success" in line, f"member {self.id} did not start; its log:\n{log_path.read_text()[-4000:]}"

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(20)


async def metadata(client: RemotingClient, addr: str) -> dict[str, Any] | None:
    try:
        r = await client.invoke(addr, RemotingCommand.request(M.METADATA), 1.0)
    except RemotingError:
        return None
    return dict(json.loads(r.body))


async def leader_of(client: RemotingClient, addrs: dict[str, str], timeout: float) -> str:
    with trio.fail_after(timeout):
        while True:
            for ident, addr in addrs.items():
                meta = await metadata(client, addr)
                if meta and meta["role"] == "LEADER":
                    return ident
            await trio.sleep(0.05)


async def append(client: RemotingClient, addrs: dict[str, str], body: bytes, timeout: float = 20) -> tuple[str, int]:
    """Append through whoever leads now; returns (leader, index)."""
    with trio.fail_after(timeout):
        while True:
            leader = await leader_of(client, addrs, timeout)
            try:
                r = await client.invoke(addrs[leader], RemotingCommand.request(M.APPEND, body=body), 5.0)
            except RemotingError:
                continue
            if r.code == ResponseCode.SUCCESS:
                return leader, int(r.ext_fields["index"])
            await trio.sleep(0.05)


async def check_get_and_pull(client: RemotingClient, addrs: dict[str, str], commit: int) -> None:
    """GET (50002) reads an entry from the leader as DLedger's JSON; followers say NOT_LEADER;
    PULL (51003) is not supported (DLedger 0.2's handlePull answers nothing)."""
    leader = await leader_of(client, addrs, 10)
    follower = next(ident for ident in addrs if ident != leader)

    def get(remote: str, index: int) -> RemotingCommand:
        body = json.dumps({"group": "default", "remoteId": remote, "beginIndex": index}).encode()
        return RemotingCommand.request(M.GET, body=body)

    r = await client.invoke(addrs[leader], get(leader, commit), 5.0)
    answer = json.loads(r.body)
    assert r.code == ResponseCode.SUCCESS and answer["code"] == 200
    (entry,) = answer["entries"]
    assert entry["index"] == commit and entry["size"] == 48 + len(base64.b64decode(entry["body"]))
    r = await client.invoke(addrs[follower], get(follower, commit), 5.0)
    assert r.code == 404 and json.loads(r.body)["leaderId"] == leader
    r = await client.invoke(addrs[leader], get("n9", commit), 5.0)
    assert json.loads(r.body)["code"] == 401
    r = await client.invoke(addrs[leader], RemotingCommand.request(M.GET, body=b"{not json"), 5.0)
    assert json.loads(r.body)["code"] == 411
    r = await client.invoke(addrs[leader], RemotingCommand.request(M.PULL, body=b"{}"), 5.0)
    assert r.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED


def committed_bodies(store: Path, ident: str, upto: int) -> list[bytes]:
    dlog = DLedgerLog(store, ident)
    try:
        return [dlog.entry(i).body for i in range(dlog.begin_index, upto + 1)]
    finally:
        dlog.data.close()
        dlog.index.close()


async def test_leader_killed_group_elects_another_and_no_committed_entry_is_lost(tmp_path: Path) -> None:
    ports = {f"n{i}": free_ports() for i in range(3)}
    addrs = {ident: f"127.0.0.1:{port}" for ident, port in ports.items()}
    peers = ";".join(f"{ident}-{addr}" for ident, addr in addrs.items())
    members = {ident: Member(ident, peers, tmp_path / ident) for ident in addrs}
    acked: list[bytes] = []
    try:
        for m in members.values():
            (tmp_path / m.id).mkdir()
            m.start()
        async with RemotingClient() as client:
            for round_no in range(3):
                for i in range(40):
                    body = b"r%d-m%d" % (round_no, i)
                    await append(client, addrs, body)
                    acked.append(body)
                old = await leader_of(client, addrs, 10)
                t0 = trio.current_time()
                members[old].kill()
                rest = {k: v for k, v in addrs.items() if k != old}
                new = await leader_of(client, rest, 15)
                failover = trio.current_time() - t0
                assert new != old
                assert failover < 10 * ELECTION_MS / 1000
                await append(client, rest, b"after-kill-%d" % round_no)
                acked.append(b"after-kill-%d" % round_no)
                members[old].start()  # rejoins and catches up
            states: set[tuple[int, int]] = set()
            with trio.fail_after(20):
                while True:
                    metas = [await metadata(client, a) for a in addrs.values()]
                    states = {(m["commitIndex"], m["endIndex"]) for m in metas if m is not None}
                    if None not in metas and len(states) == 1:
                        break
                    await trio.sleep(0.1)
            commit = next(iter(states))[0]
            await check_get_and_pull(client, addrs, commit)
    finally:
        for m in members.values():
            m.stop()
    logs = {ident: committed_bodies(tmp_path / ident, ident, commit) for ident in addrs}
    first = next(iter(logs.values()))
    assert all(log == first for log in logs.values())
    payload = [b for b in first if b]  # leaders' no-ops are empty
    assert payload == acked  # every acknowledged append, once, in order


async def test_a_paused_leader_steps_down_and_never_acknowledges_in_its_old_term(tmp_path: Path) -> None:
    ports = {f"n{i}": free_ports() for i in range(3)}
    addrs = {ident: f"127.0.0.1:{port}" for ident, port in ports.items()}
    peers = ";".join(f"{ident}-{addr}" for ident, addr in addrs.items())
    members = {ident: Member(ident, peers, tmp_path / ident) for ident in addrs}
    try:
        for m in members.values():
            (tmp_path / m.id).mkdir()
            m.start()
        async with RemotingClient() as client:
            for i in range(10):
                await append(client, addrs, b"before-%d" % i)
            old = await leader_of(client, addrs, 10)
            old_term = (await metadata(client, addrs[old]))["term"]  # type: ignore[index]
            assert members[old].proc is not None
            members[old].proc.send_signal(signal.SIGSTOP)
            answers: list[RemotingCommand] = []

            async def send_to_paused() -> None:
                try:
                    r = await client.invoke(addrs[old], RemotingCommand.request(M.APPEND, body=b"in-old-term"), 30.0)
                    answers.append(r)
                except RemotingError:
                    pass

            async with trio.open_nursery() as nursery:
                nursery.start_soon(send_to_paused)
                rest = {k: v for k, v in addrs.items() if k != old}
                new = await leader_of(client, rest, 15)
                for i in range(10):
                    await append(client, rest, b"after-%d" % i)
                members[old].proc.send_signal(signal.SIGCONT)
            meta = await metadata(client, addrs[old])
            assert meta is not None and meta["term"] > old_term and meta["role"] != "LEADER"
            assert all(r.code != ResponseCode.SUCCESS for r in answers), [r.remark for r in answers]
            with trio.fail_after(20):
                while True:
                    metas = [await metadata(client, a) for a in addrs.values()]
                    states = {(m["commitIndex"], m["endIndex"]) for m in metas if m is not None}
                    if None not in metas and len(states) == 1:
                        break
                    await trio.sleep(0.1)
            commit = next(iter(states))[0]
            assert new != old
    finally:
        for m in members.values():
            m.stop()
    logs = {ident: committed_bodies(tmp_path / ident, ident, commit) for ident in addrs}
    first = next(iter(logs.values()))
    assert all(log == first for log in logs.values())
    assert b"in-old-term" not in first  # its uncommitted tail was replaced
    assert [b for b in first if b] == [b"before-%d" % i for i in range(10)] + [b"after-%d" % i for i in range(10)]
