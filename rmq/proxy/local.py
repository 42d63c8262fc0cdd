"""`mqbroker --enable-proxy`: the broker with the gRPC proxy in its process (local mode).

`-pc FILE` reads rmq-proxy.json as `rmq proxy` does; `--proxy-port` overrides its
grpcServerPort (8081). The proxy reaches its broker, and the others of the name servers the
broker registers with, through the name server and remoting, as in cluster mode: Java's
local mode calls its broker in process, which rmq does not do yet. With enableACL the proxy
reads the broker's plain_acl.yml unless rmq-proxy.json names another (aclPlainFile).
"""

from __future__ import annotations

import argparse
import logging

from rmq.broker import startup
from rmq.broker.controller import BrokerController

from .config import LOCAL, ProxyConfig
from .server import ProxyServer

log = logging.getLogger("rmq.proxy")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--enable-proxy", "--enableProxy", dest="enable", action="store_true")
    parser.add_argument("-pc", "--proxyConfigPath", dest="config")
    parser.add_argument("--proxy-port", type=int)
    args, rest = parser.parse_known_args(argv)
    if not args.enable:
        return startup.main(rest)
    try:
        config = ProxyConfig.load(args.config) if args.config else ProxyConfig.from_mapping({})
    except (OSError, ValueError) as exc:
        print(f"mqbroker: bad proxy configuration: {exc}")
        return 2
    config.proxy_mode = LOCAL
    if args.proxy_port is not None:
        config.grpc_server_port = args.proxy_port

    def beside(broker: BrokerController) -> ProxyServer:
        config.namesrv_addr = ";".join(broker.config.namesrv_addr)
        # the broker's home and ACL file, as Java's local mode, whose proxy and broker share one home
        config.rocketmq_home = config.rocketmq_home or broker.config.rocketmq_home
        if config.enable_acl and not config.acl_plain_file and broker.config.acl_file is not None:
            config.acl_plain_file = str(broker.config.acl_file)
        if not config.namesrv():
            raise ValueError("--enable-proxy: the proxy finds routes through the broker's name servers; give -n")
        return ProxyServer(config)

    return startup.main(rest, companions=[beside])
