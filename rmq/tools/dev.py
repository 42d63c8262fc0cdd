"""`rmq dev`: a name server and a broker in one process, store in a local folder.

For a newcomer's first minute and for embedding: the same objects tests start, in one
Trio run. Ctrl-C (or SIGTERM) stops both cleanly.

`rmq dev --cluster dledger` runs a DLedger group of three brokers (RaftNode00, as in
conf/dledger/) that elect their master.

`rmq dev --cluster controller` runs RocketMQ 5's controller mode: three controllers (a Raft
group of their own, ports broker port + 30010..30012) and broker-c's three brokers
(allAckInSyncStateSet=true), whose master the controllers elect.

`rmq dev --cluster 2m-2s-sync` (or `2m-2s-async`) runs RocketMQ's two-group deployment
instead: broker-a and broker-b, each a master (SYNC_MASTER or ASYNC_MASTER) and a SLAVE
replicating it over the HA port, with the ports and roles of the example files in
conf/2m-2s-*/. All five servers share this one process (one Trio run): it starts in about
a second and stops cleanly with Ctrl-C, which is what a first look needs; to see a master
die for real, start the same conf files as separate `mqbroker -c` processes and kill one.
Replication still goes over real sockets (the HA ports), as between processes.

A gRPC proxy for RocketMQ 5.x clients serves on --proxy-port (8081, the proxy's default) in
front of the broker(s); `--no-proxy` leaves it out.

`--metrics` turns on the Prometheus endpoints (metricsExporterType=PROM): the broker on
--metrics-port (default 5557, RocketMQ's), the name server on the next port, further brokers
of a --cluster on the ports after that, the gRPC proxy on the port after all of them; 0 takes
free ports. Each URL is printed at start.

The four configurations are built here rather than read from conf/, which an installed
package does not carry; tests/tools/test_ha_cluster.py keeps the two in step. Stores go to
<store>/<brokerName>-master and <store>/<brokerName>-slave (default ./store).
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable, Sequence
from pathlib import Path

import trio

from rmq import metrics
from rmq.broker.config import BrokerConfig, ConfigError
from rmq.broker.controller import BrokerController
from rmq.controller.config import ControllerConfig
from rmq.controller.server import ControllerServer
from rmq.lifetime import SignalledRun, exit_status, until_signalled
from rmq.namesrv import NamesrvConfig, NamesrvServer
from rmq.proxy import ProxyConfig, ProxyServer

log = logging.getLogger("rmq.tools.dev")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rmq dev",
        description="Run a name server and a broker (with --cluster: two master/slave groups) in one process.",
    )
    parser.add_argument("--store", default="store", help="store root directory (default ./store)")
    parser.add_argument("--host", default="127.0.0.1", help="address both servers listen on (default 127.0.0.1)")
    parser.add_argument("--namesrv-port", type=int, default=9876, help="default 9876")
    parser.add_argument(
        "--broker-port", type=int, default=10911, help="default 10911 (with --cluster: the first of 4, 10 apart)"
    )
    parser.add_argument("--broker-name", default="broker-a")
    parser.add_argument(
        "--cluster",
        choices=sorted(CLUSTERS),
        help="run two broker groups, each a master and a slave (2m-2s-*), a three-member DLedger group, "
        "or a controller-mode group of three brokers with three controllers",
    )
    parser.add_argument(
        "--metrics", action="store_true", help="serve Prometheus metrics (metricsExporterType=PROM) on every server"
    )
    parser.add_argument(
        "--metrics-port",
        type=int,
        default=5557,
        help="the broker's metrics port (default 5557); the name server takes the next one, further brokers the ones "
        "after; 0 = free ports",
    )
    parser.add_argument(
        "--proxy-port", type=int, default=8081, help="the gRPC proxy's port for 5.x clients (default 8081; 0 = free)"
    )
    parser.add_argument("--no-proxy", action="store_true", help="no gRPC proxy")
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    return parser


async def start_proxy(
    args: argparse.Namespace, namesrv: NamesrvServer, run: SignalledRun, metrics_index: int
) -> ProxyServer | None:
    """The gRPC proxy (cluster mode, in this process) in front of the brokers, for 5.x clients;
    with --metrics, its Prometheus endpoint is server `metrics_index`'s (see `metrics_props`)."""
    if args.no_proxy:
        return None
    settings: dict[str, object] = {"namesrvAddr": namesrv.address, "grpcServerPort": args.proxy_port}
    if args.metrics:
        settings |= metrics_props(args, metrics_index)
        settings["metricsPromExporterHost"] = "127.0.0.1" if args.host == "0.0.0.0" else args.host
    proxy = ProxyServer(ProxyConfig.from_mapping(settings), host=args.host)
    await run.nursery.start(proxy.serve)
    print(f"The gRPC proxy boot success. 5.x clients: endpoints {args.host}:{proxy.port}", flush=True)
    _print_metrics("proxy", proxy)
    return proxy


def metrics_props(args: argparse.Namespace, index: int) -> dict[str, str]:
    """The metrics keys of server `index` (0: the first broker, 1: the name server, 2...:
    further brokers, then the proxy), none without --metrics."""
    if not args.metrics:
        return {}
    port = args.metrics_port + index if args.metrics_port else 0
    return {"metricsExporterType": "PROM", "metricsPromExporterPort": str(port)}


def _print_metrics(name: str, server: object) -> None:
    exporter = getattr(server, "metrics", None)
    if exporter is not None:
        print(f"{name} metrics: {exporter.url}", flush=True)


# (brokerName, brokerId, listenPort - base) of the 2m-2s deployments: with the default base
# 10911 these are the ports of conf/2m-2s-*/.
CLUSTER_BROKERS = (
    ("broker-a", 0, 0),
    ("broker-a", 1, 10),
    ("broker-b", 0, 20),
    ("broker-b", 1, 30),
)
CLUSTERS = {"2m-2s-sync": "SYNC_MASTER", "2m-2s-async": "ASYNC_MASTER", "dledger": "", "controller": ""}
CONTROLLERS = 3  # the controller group of --cluster controller
# The dledger group: three members of RaftNode00 (conf/dledger/), listenPort base + 0/10/20,
# DLedger ports base + 30000 + 0/1/2 (40911..40913 with the default base, as RocketMQ's).
DLEDGER_MEMBERS = 3


def dledger_configs(
    namesrv: str,
    store: Path,
    host: str = "127.0.0.1",
    base_port: int = 10911,
    more: Callable[[int], dict[str, str]] | None = None,
) -> list[BrokerConfig]:
    """The three members of the example DLedger group, stores under `store`/node0<k>;
    `more(k)` adds keys to member k's."""
    if base_port + 30000 + DLEDGER_MEMBERS > 65535:
        raise ConfigError(f"--broker-port {base_port}: the DLedger ports (broker port + 30000) would pass 65535")
    ip = "127.0.0.1" if host in ("127.0.0.1", "0.0.0.0") else host
    peers = ";".join(f"n{k}-{ip}:{base_port + 30000 + k}" for k in range(DLEDGER_MEMBERS))
    return [
        BrokerConfig.load(
            None,
            {
                "brokerClusterName": "RaftCluster",
                "brokerName": "RaftNode00",
                "namesrvAddr": namesrv,
                "listenPort": str(base_port + 10 * k),
                "bindAddress": host,
                "brokerIP1": ip,
                "storePathRootDir": str(store / f"node0{k}"),
                "enableDLegerCommitLog": "true",
                "dLegerGroup": "RaftNode00",
                "dLegerPeers": peers,
                "dLegerSelfId": f"n{k}",
                **(more(k) if more is not None else {}),
            },
            environ={},
        )
        for k in range(DLEDGER_MEMBERS)
    ]


def controller_configs(store: Path, host: str = "127.0.0.1", base_port: int = 10911) -> list[ControllerConfig]:
    """The controller group of --cluster controller: members c0..c2 on broker port + 30010 + k."""
    if base_port + 30010 + CONTROLLERS > 65535:
        raise ConfigError(f"--broker-port {base_port}: the controller ports (broker port + 30010) would pass 65535")
    ip = "127.0.0.1" if host in ("127.0.0.1", "0.0.0.0") else host
    peers = ";".join(f"c{k}-{ip}:{base_port + 30010 + k}" for k in range(CONTROLLERS))
    configs = []
    for k in range(CONTROLLERS):
        config, _ = ControllerConfig().with_properties(
            {
                "controllerDLegerGroup": "DevControllers",
                "controllerDLegerPeers": peers,
                "controllerDLegerSelfId": f"c{k}",
                "controllerStorePath": str(store / "controller" / f"c{k}"),
                "bindAddress": host,
            }
        )
        config.validate()
        configs.append(config)
    return configs


def controller_broker_configs(
    namesrv: str,
    controllers: list[ControllerConfig],
    store: Path,
    host: str = "127.0.0.1",
    base_port: int = 10911,
    more: Callable[[int], dict[str, str]] | None = None,
) -> list[BrokerConfig]:
    """broker-c's three brokers in controller mode, listenPort base + 0/10/20."""
    return [
        BrokerConfig.load(
            None,
            {
                "brokerClusterName": "DefaultCluster",
                "brokerName": "broker-c",
                "namesrvAddr": namesrv,
                "listenPort": str(base_port + 10 * k),
                "bindAddress": host,
                "brokerIP1": "127.0.0.1" if host in ("127.0.0.1", "0.0.0.0") else host,
                "storePathRootDir": str(store / f"broker-c-{k}"),
                "enableControllerMode": "true",
                "controllerAddr": ";".join(c.address for c in controllers),
                "allAckInSyncStateSet": "true",
                **(more(k) if more is not None else {}),
            },
            environ={},
        )
        for k in range(3)
    ]


def cluster_configs(
    kind: str,
    namesrv: str,
    store: Path,
    host: str = "127.0.0.1",
    base_port: int = 10911,
    more: Callable[[int], dict[str, str]] | None = None,
) -> list[BrokerConfig]:
    """The brokers of `kind` ("2m-2s-sync", "2m-2s-async" or "dledger"), stores under `store`;
    `more(i)` adds keys to the i-th broker's."""
    if kind == "dledger":
        return dledger_configs(namesrv, store, host, base_port, more)
    master_role = CLUSTERS[kind]
    configs: list[BrokerConfig] = []
    for name, broker_id, port in CLUSTER_BROKERS:
        role = master_role if broker_id == 0 else "SLAVE"
        configs.append(
            BrokerConfig.load(
                None,
                {
                    "brokerClusterName": "DefaultCluster",
                    "brokerName": name,
                    "brokerId": str(broker_id),
                    "brokerRole": role,
                    "namesrvAddr": namesrv,
                    "listenPort": str(base_port + port),
                    "bindAddress": host,
                    "brokerIP1": "127.0.0.1" if host in ("127.0.0.1", "0.0.0.0") else host,
                    "storePathRootDir": str(store / f"{name}-{'master' if broker_id == 0 else 'slave'}"),
                    "flushDiskType": "ASYNC_FLUSH",
                    **(more(len(configs)) if more is not None else {}),
                },
                environ={},
            )
        )
    return configs


async def run(args: argparse.Namespace) -> None:
    store = Path(args.store).resolve()  # noqa: ASYNC240  once, before anything serves
    async with until_signalled(log) as run:
        namesrv_config = NamesrvConfig(
            listen_host=args.host,
            listen_port=args.namesrv_port,
            kv_config_path=str(store / "namesrv" / "kvConfig.json"),
            metrics_exporter_type="PROM" if args.metrics else "DISABLE",
            metrics_prom_exporter_port=args.metrics_port + 1 if args.metrics_port else 0,
        )
        async with NamesrvServer(namesrv_config) as namesrv:
            if args.cluster:
                await _run_cluster(args, namesrv, store, run)
                return
            config = BrokerConfig.load(
                None,
                {
                    "namesrvAddr": namesrv.address,
                    "storePathRootDir": str(store),
                    "listenPort": str(args.broker_port),
                    "bindAddress": args.host,
                    "brokerIP1": "127.0.0.1" if args.host in ("127.0.0.1", "0.0.0.0") else args.host,
                    "brokerName": args.broker_name,
                    **metrics_props(args, 0),
                },
            )
            broker = await run.nursery.start(BrokerController(config).serve)
            print(f"The Name Server boot success. listening on {namesrv.address}", flush=True)
            print(f"The broker[{config.broker_name}, {broker.address}] boot success. store: {store}", flush=True)
            _print_metrics("name server", namesrv)
            _print_metrics(f"broker {config.broker_name}", broker)
            proxy = await start_proxy(args, namesrv, run, 2)
            print(f"export NAMESRV_ADDR={namesrv.address}", flush=True)
            await run.wait()
            await run.stop(lambda: _stop([broker], proxy))


async def _run_cluster(args: argparse.Namespace, namesrv: NamesrvServer, store: Path, run: SignalledRun) -> None:
    more = (lambda i: metrics_props(args, 0 if i == 0 else i + 1)) if args.metrics else None
    controllers: list[ControllerServer] = []
    if args.cluster == "controller":
        members = controller_configs(store, args.host, args.broker_port)
        for member in members:
            controllers.append(await run.nursery.start(ControllerServer(member).serve))
            print(f"The Controller Server boot success. {member.self_id} listening on {member.address}", flush=True)
        configs = controller_broker_configs(namesrv.address, members, store, args.host, args.broker_port, more)
    else:
        configs = cluster_configs(args.cluster, namesrv.address, store, args.host, args.broker_port, more)
    print(f"The Name Server boot success. listening on {namesrv.address}", flush=True)
    _print_metrics("name server", namesrv)
    brokers = []
    for config in configs:  # masters first: their slaves find them at once
        broker = await run.nursery.start(BrokerController(config).serve)
        brokers.append(broker)
        if config.enable_d_leger_commit_log:
            role = f"DLedger member {config.d_leger_self_id} (elects a leader)"
        elif config.enable_controller_mode:
            role = "controller mode (the controllers elect the master)"
        else:
            role = f"role: {config.broker_role.value}, brokerId: {config.broker_id}"
        print(
            f"The broker[{config.broker_name}, {broker.address}] boot success. "
            f"{role}, store: {config.store_path_root_dir}",
            flush=True,
        )
        _print_metrics(f"broker {config.broker_name}/{config.broker_id}", broker)
    proxy = await start_proxy(args, namesrv, run, len(brokers) + 1)
    print(f"export NAMESRV_ADDR={namesrv.address}", flush=True)
    await run.wait()
    await run.stop(lambda: _stop(brokers, proxy, controllers))


async def _stop(
    brokers: list[BrokerController], proxy: ProxyServer | None = None, controllers: Sequence[ControllerServer] = ()
) -> None:
    if proxy is not None:
        proxy.shutdown()
    for broker in brokers:
        broker.shutdown()
    for broker in brokers:
        await broker.wait_stopped()
    for controller in controllers:
        await controller.aclose()


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    metrics.install()  # metricsExporterType=PROM in a server's config serves its metrics
    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)-7s %(name)s - %(message)s")
    return exit_status("rmq dev", lambda: trio.run(run, args), bad_config=(ConfigError,))
