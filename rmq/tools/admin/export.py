"""mqadmin's exports: exportMetadata, exportConfigs, exportMetrics write a cluster's
topics and groups, settings or figures as JSON files in `-f` (Java's default: rocketmq/export
in the system's temporary folder)."""

from __future__ import annotations

from collections.abc import Callable

from rmq.admin import AdminError, export
from rmq.client.admin import MQAdmin

from .options import Args, Commands, Parser
from .output import Out


def _done(out: Out, path: object) -> int:
    print(f"export {path} success", file=out)
    return 0


async def export_metadata(admin: MQAdmin, args: Args, out: Out) -> int:
    """-b with -t or -g: that broker's wrapper (topic.json, subscriptionGroup.json);
    otherwise the masters of -c, or the one of -b, merged (metadata.json by default)."""
    what = "topic" if args.topic_only else "group" if args.group_only else ""
    if args.broker_addr and what:
        name, document = await export.broker_metadata(admin, args.broker_addr.strip(), special=args.special, what=what)
    else:
        if args.broker_addr:
            masters = [args.broker_addr.strip()]
        elif args.cluster:
            masters = (await admin.cluster_info()).master_addrs(args.cluster.strip())
        else:
            raise AdminError("give a broker (-b) or a cluster (-c)")
        name, document = await export.merged_metadata(admin, masters, special=args.special, what=what)
    return _done(out, export.write(document, args.file_path, name))


async def export_configs(admin: MQAdmin, args: Args, out: Out) -> int:
    document = await export.cluster_configs(admin, args.cluster.strip())
    return _done(out, export.write(document, args.file_path, "configs.json"))


async def export_metrics(admin: MQAdmin, args: Args, out: Out) -> int:
    document = await export.cluster_metrics(admin, args.cluster.strip())
    return _done(out, export.write(document, args.file_path, "metrics.json"))


def _file_path(p: Parser, name: str) -> None:
    p.add_argument(
        "-f",
        "--filePath",
        dest="file_path",
        default=export.DEFAULT_DIR,
        help=f"folder of {name} ({export.DEFAULT_DIR})",
    )


def _metadata_args(p: Parser) -> None:
    p.add_argument("-c", "--clusterName", dest="cluster", help="every master of this cluster")
    p.add_argument("-b", "--brokerAddr", dest="broker_addr", help="one broker ip:port")
    _file_path(p, "metadata.json")
    p.add_argument("-t", "--topic", dest="topic_only", action="store_true", help="only topics (topic.json)")
    p.add_argument(
        "-g", "--subscriptionGroup", dest="group_only", action="store_true", help="only groups (subscriptionGroup.json)"
    )
    p.add_argument("-s", "--specialTopic", dest="special", action="store_true", help="retry and dead-letter topics too")


def _cluster_args(name: str) -> Callable[[Parser], None]:
    def add(p: Parser) -> None:
        p.add_argument("-c", "--clusterName", dest="cluster", required=True, help="the cluster to export")
        _file_path(p, name)

    return add


COMMANDS: Commands = {
    "exportMetadata": ("export topics and subscription groups to metadata.json", export_metadata, _metadata_args),
    "exportConfigs": (
        "export a cluster's broker settings to configs.json",
        export_configs,
        _cluster_args("configs.json"),
    ),
    "exportMetrics": ("export a cluster's figures to metrics.json", export_metrics, _cluster_args("metrics.json")),
}
