"""A controller-mode group for tests: three `rmq controller` processes and three brokers
(processes) of one group, the name server in the test's own process."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import trio

from rmq.protocol import RemotingCommand, RequestCode, ResponseCode
from rmq.protocol import body as json_body
from rmq.remoting import RemotingClient, RemotingError
from tests.broker.ha.procs import BrokerProcess, ControllerProcess, free_port_block
from tests.faults.clusters import CONTROLLER_BROKER

GROUP = "broker-c"


class ControllerGroup:
    def __init__(self, root: Path, namesrv: str, size: int = 3, **conf: str) -> None:
        self.controllers = ControllerProcess.group(root / "controllers", 3)
        addrs = ";".join(c.address for c in self.controllers)
        settings = {**CONTROLLER_BROKER, "diskMaxUsedSpaceRatio": "95", **conf}
        self.brokers = [
            BrokerProcess(
                root / f"b{i}",
                namesrv,
                GROUP,
                port=free_port_block(5),
                enableControllerMode="true",
                controllerAddr=addrs,
                **settings,
            )  # fmt: skip
            for i in range(size)
        ]

    def start(self) -> None:
        for c in self.controllers:
            c.start()
        for b in self.brokers:
            b.start()

    def stop(self) -> None:
        for b in self.brokers:
            b.stop()
        for c in self.controllers:
            c.stop()

    def by_address(self, address: str) -> BrokerProcess:
        return next(b for b in self.brokers if b.address == address)


async def runtime(client: RemotingClient, address: str) -> dict[str, str] | None:
    request = RemotingCommand.request(RequestCode.GET_BROKER_RUNTIME_INFO)
    try:
        with trio.fail_after(2):
            r = await client.invoke(address, request, 2.0)
    except (RemotingError, trio.TooSlowError):
        return None
    if r.code != ResponseCode.SUCCESS:
        return None
    return dict(json_body.loads(r.body)["table"])


async def master_of(client: RemotingClient, group: ControllerGroup, timeout: float = 30.0) -> tuple[BrokerProcess, int]:
    """The broker serving as master (by its own account), and its epoch."""
    with trio.fail_after(timeout):
        while True:
            best = None
            for b in group.brokers:
                if b.proc is None or b.proc.poll() is not None:
                    continue
                info = await runtime(client, b.address)
                if info and info.get("brokerRole") == "SYNC_MASTER":
                    epoch = int(info.get("controllerMasterEpoch", "0"))
                    if best is None or epoch > best[1]:
                        best = (b, epoch)
            if best is not None:
                return best
            await trio.sleep(0.1)


async def wait_for(predicate: Callable[[], object], what: str, timeout: float = 30.0) -> None:
    with trio.move_on_after(timeout):
        while not predicate():
            await trio.sleep(0.05)
        return
    raise AssertionError(f"no {what} after {timeout} s")


def dump(obj: object) -> str:
    return json.dumps(obj, indent=1, default=str)


async def all_in_sync(client: RemotingClient, master: BrokerProcess, size: int = 3, timeout: float = 30.0) -> None:
    """Until the master's SyncStateSet holds ``size`` brokers: a group fit to fail over (the
    controller elects only from the set)."""
    with trio.fail_after(timeout):
        while ((await runtime(client, master.address)) or {}).get("syncStateSet", "").count(",") != size - 1:
            await trio.sleep(0.2)
