"""A broker's registration that a name server did not confirm is sent again within a second
or two, not a registration period later: a new master is in the routes as soon as a name
server takes it."""

from __future__ import annotations

from typing import Any

import trio

from rmq.broker.registration import RETRY_FIRST, Registration
from rmq.namesrv.config import NamesrvConfig
from rmq.namesrv.server import NamesrvServer
from rmq.remoting import RemotingClient

from ...ports import free_ports

PERIOD = 30.0  # a round every 30 s: the retries must not wait for it


def wrapper() -> dict[str, Any]:
    config = {"perm": 6, "readQueueNums": 4, "topicName": "Late", "writeQueueNums": 4}
    return {"dataVersion": {"counter": 1, "timestamp": 1}, "topicConfigTable": {"Late": config}}


async def test_a_name_server_that_was_down_has_the_broker_within_seconds_of_coming_up() -> None:
    port = free_ports()
    addr = f"127.0.0.1:{port}"
    broker = "127.0.0.1:30911"
    async with RemotingClient() as client, trio.open_nursery() as nursery:
        registration = Registration(
            client, (addr,), lambda: ("broker-a", broker, "C", broker, 0), wrapper, PERIOD, state_version=lambda: 7
        )
        await nursery.start(registration.run)  # refused: nothing listens yet
        assert registration.unconfirmed == (addr,)
        await trio.sleep(1.0)
        config = NamesrvConfig(listen_host="127.0.0.1", listen_port=port, kv_config_path=None)
        async with NamesrvServer(config) as ns:
            up = trio.current_time()
            with trio.fail_after(4 * RETRY_FIRST + 2.0):
                while broker not in ns.routes.live:
                    await trio.sleep(0.02)
            took = trio.current_time() - up
            assert ns.routes.brokers["broker-a"].broker_addrs == {0: broker}
            assert ns.routes.live[broker].data_version.state_version == 7  # the term, as stateVersion
            with trio.fail_after(2):
                while registration.unconfirmed:
                    await trio.sleep(0.02)
            nursery.cancel_scope.cancel()
    assert took < PERIOD / 10, took
