"""`rmq namesrv` / `mqnamesrv`: a name server, and with enableControllerInNamesrv=true a
controller member beside it in the same process, as RocketMQ's NamesrvStartup starts a
ControllerManager after the name server.

Both read the same `-c` file: the name server its keys, the member the controller's
(controllerDLegerGroup, controllerDLegerPeers, controllerDLegerSelfId, ...). The member serves
the Raft messages and the controller's requests on its port in controllerDLegerPeers, as
RocketMQ's does on its DLedger server; the name server's port serves the name server's codes
only, as in RocketMQ (its BROKER_HEARTBEAT is the name server's own). `-p` prints the name
server's settings, then the controller's. The name server and the controller do not import
each other: this module, above both, puts them together.
"""

from __future__ import annotations

import argparse

import trio

from rmq.controller import startup as controller_startup
from rmq.controller.server import ControllerServer
from rmq.lifetime import exit_status
from rmq.namesrv import startup
from rmq.namesrv.config import KEYS as NAMESRV_KEYS
from rmq.rocketmq_keys import ConfigError


def main(argv: list[str] | None = None) -> int:
    args = startup.parse_args(argv)
    return exit_status("mqnamesrv", lambda: _run(args), bad_config=(ConfigError,))


def _run(args: argparse.Namespace) -> None:
    config = startup.load_config(args)
    if not config.enable_controller_in_namesrv:
        startup.run(args, config)
        return
    controller = controller_startup.load_config(args.config, namesrv_keys=NAMESRV_KEYS)
    if startup.printing(args):
        for props in (config.to_properties(), controller.to_properties()):
            for key, value in props.items():
                print(f"{key}={value}")
        return
    controller.validate()
    member = ControllerServer(controller)
    tip = (
        f"The ControllerManager boot success. serializeType=JSON, {controller.self_id} of {controller.group} "
        f"listening on {controller.address}"
    )
    trio.run(startup.serve_until_signalled, config, [(member, tip)])
