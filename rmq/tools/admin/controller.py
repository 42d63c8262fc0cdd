"""mqadmin's controller commands (RocketMQ 5, docs/controller.md): getControllerMetaData,
getSyncStateSet, getBrokerEpoch, electMaster, cleanBrokerMetadata, getControllerConfig and
updateControllerConfig, with RocketMQ 5.3.3's options and output.

`-a` names controller members (`a:9878;b:9878`): getControllerConfig and updateControllerConfig
ask each, the others ask the first, and what only the leader answers goes to the leader it
names. getBrokerEpoch asks brokers in controller mode, found through the name servers (-n).
"""

from __future__ import annotations

import sys

from rmq.admin import controller
from rmq.admin.common import AdminError
from rmq.client.admin import MQAdmin
from rmq.protocol.bodies.controller import EpochEntry, ReplicaIdentity

from . import options as o
from .options import Args, Commands, Parser
from .output import Out, config_table


def _java(value: object) -> str:
    """A value as Java's printf %s / %d shows it (null for None)."""
    return "null" if value is None else str(value)


def _replica(r: ReplicaIdentity) -> str:
    """BrokerReplicasInfo.ReplicaIdentity.toString()."""
    return (
        f"ReplicaIdentity{{brokerName='{r.broker_name}', brokerId={r.broker_id}, "
        f"brokerAddress='{_java(r.broker_address)}', alive={'true' if r.alive else 'false'}}}"
    )


def _epoch(e: EpochEntry) -> str:
    """EpochEntry.toString()."""
    return f"EpochEntry{{epoch={e.epoch}, startOffset={e.start_offset}, endOffset={e.end_offset}}}"


async def get_controller_metadata(admin: MQAdmin, args: Args, out: Out) -> int:
    meta = await admin.controller_metadata(controller.first_controller(args.controller))
    out.write(f"\n#ControllerGroup\t{_java(meta.group)}")
    out.write(f"\n#ControllerLeaderId\t{_java(meta.controller_leader_id)}")
    out.write(f"\n#ControllerLeaderAddress\t{_java(meta.controller_leader_address)}")
    for peer in (meta.peers or "").split(";"):
        if peer:
            out.write(f"\n#Peer:\t{peer}")
    out.write("\n")
    return 0


async def get_sync_state_set(admin: MQAdmin, args: Args, out: Out) -> int:
    """Each group's master, epochs and replicas in and out of the SyncStateSet; with -i,
    again every interval seconds until interrupted."""
    return await o.repeat(args, lambda: _sync_state_set_once(admin, args, out))


async def _sync_state_set_once(admin: MQAdmin, args: Args, out: Out) -> int:
    addr = controller.first_controller(args.controller)
    info = await controller.sync_state_sets(admin, addr, args.broker_name, args.cluster)
    for name, r in info.replicas_info_table.items():
        out.write(
            f"\n#brokerName\t{name}\n#MasterBrokerId\t{_java(r.master_broker_id)}\n#MasterAddr\t"
            f"{_java(r.master_address)}\n#MasterEpoch\t{r.master_epoch}\n#SyncStateSetEpoch\t"
            f"{r.sync_state_set_epoch}\n#SyncStateSetNums\t{len(r.in_sync_replicas)}\n"
        )
        for member in r.in_sync_replicas:
            out.write(f"\nInSyncReplica:\t{_replica(member)}\n")
        for member in r.not_in_sync_replicas:
            out.write(f"\nNotInSyncReplica:\t{_replica(member)}\n")
    return 0


async def get_broker_epoch(admin: MQAdmin, args: Args, out: Out) -> int:
    """Every master's and slave's epoch entries (the current one ends at the broker's max
    offset); with -i, again every interval seconds until interrupted."""
    return await o.repeat(args, lambda: _broker_epoch_once(admin, args, out))


async def _broker_epoch_once(admin: MQAdmin, args: Args, out: Out) -> int:
    failed = 0
    for b in await controller.epoch_caches(admin, args.broker_name, args.cluster):
        if b.cache is None:  # a broker not in controller mode, or gone: said, and the others go on
            print(f"warning: {b.error}", file=sys.stderr)
            failed += 1
            continue
        c = b.cache
        out.write(f"\n#clusterName\t{c.cluster_name}\n#brokerName\t{c.broker_name}\n#brokerAddr\t{b.addr}")
        out.write(f"\n#brokerId\t{c.broker_id}")
        for entry in c.shown():
            out.write(f"\n#Epoch: {_epoch(entry)}")
        out.write("\n")
    return 1 if failed else 0


async def elect_master(admin: MQAdmin, args: Args, out: Out) -> int:
    addr = controller.first_controller(args.controller)
    elected, group = await admin.elect_master(addr, args.cluster, args.broker_name, args.broker_id)
    out.write(f"\n#ClusterName\t{args.cluster}\n#BrokerName\t{args.broker_name}")
    out.write(f"\n#BrokerMasterAddr\t{_java(elected.master_address)}\n#MasterEpoch\t{_java(elected.master_epoch)}")
    out.write(f"\n#SyncStateSetEpoch\t{_java(elected.sync_state_set_epoch)}\n")
    # (Java's mqadmin reads the body as a BrokerMemberGroup, which it is not, and prints none)
    for broker_id, broker_addr in sorted((group.broker_addrs if group else {}).items()):
        out.write(f"\t#Broker\t{broker_id}\t{broker_addr}\n")
    return 0


async def clean_broker_metadata(admin: MQAdmin, args: Args, out: Out) -> int:
    ids = args.broker_ids.strip() if args.broker_ids else None
    if ids:
        try:
            [int(i) for i in ids.split(";")]
        except ValueError:
            raise AdminError(f"set <brokerControllerIdsToClean> as ids like 1;2;3, not {ids!r}") from None
    cluster = args.cluster.strip() if args.cluster else None
    if not args.clean_living and not cluster:
        raise AdminError("cleanLivingBroker option is false, clusterName option can not be empty.")
    addr = controller.first_controller(args.controller)
    await admin.clean_controller_broker_data(addr, cluster, args.broker_name.strip(), ids, args.clean_living)
    print(f"clear broker {args.broker_name.strip()} metadata from controller success! ", file=out)
    return 0


async def get_controller_config(admin: MQAdmin, args: Args, out: Out) -> int:
    for addr, table in (await admin.controller_config(controller.controllers(args.controller))).items():
        config_table(out, addr, table)
    return 0


async def update_controller_config(admin: MQAdmin, args: Args, out: Out) -> int:
    addrs = controller.controllers(args.controller)
    await admin.update_controller_config({args.key.strip(): args.value.strip()}, addrs)
    print(f"update controller config success![{', '.join(addrs)}]\n{args.key.strip()} : {args.value.strip()}", file=out)
    return 0


def _controller_addr(p: Parser, many: bool = False) -> None:
    what = "controller address(es), a:9878;b:9878" if many else "a controller member's address, host:9878"
    p.add_argument("-a", "--controllerAddress", dest="controller", required=True, help=what)


def _sync_state_set_args(p: Parser) -> None:
    _controller_addr(p)
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("-b", "--brokerName", dest="broker_name", help="this broker group")
    which.add_argument("-c", "--clusterName", dest="cluster", help="every broker group of this cluster")
    o.interval(p)


def _broker_epoch_args(p: Parser) -> None:
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("-b", "--brokerName", dest="broker_name", help="every broker of this group")
    which.add_argument("-c", "--clusterName", dest="cluster", help="every broker of this cluster")
    o.interval(p)


def _elect_master_args(p: Parser) -> None:
    _controller_addr(p)
    p.add_argument("-b", "--brokerId", dest="broker_id", type=int, required=True, help="the broker to make master")
    p.add_argument("-bn", "--brokerName", dest="broker_name", required=True, help="its broker group")
    p.add_argument("-c", "--clusterName", dest="cluster", required=True, help="its cluster")


def _clean_broker_metadata_args(p: Parser) -> None:
    _controller_addr(p)
    p.add_argument(
        "-b", "--brokerControllerIdsToClean", dest="broker_ids", help="ids to forget, 1;2;3 (none: the group)"
    )
    p.add_argument("-bn", "--brokerName", dest="broker_name", required=True, help="the broker group")
    p.add_argument("-c", "--clusterName", dest="cluster", help="its cluster (needed without -l)")
    p.add_argument("-l", "--cleanLivingBroker", dest="clean_living", action="store_true", help="alive brokers too")


def _update_controller_config_args(p: Parser) -> None:
    _controller_addr(p, many=True)
    o.key_value(p)


COMMANDS: Commands = {
    "getControllerMetaData": ("the controller group, its leader and members", get_controller_metadata,
                              _controller_addr),
    "getSyncStateSet": ("broker groups' masters and SyncStateSets, from the controller", get_sync_state_set,
                        _sync_state_set_args),
    "getBrokerEpoch": ("controller-mode brokers' epoch entries", get_broker_epoch, _broker_epoch_args),
    "electMaster": ("make a broker its group's master, through the controller", elect_master, _elect_master_args),
    "cleanBrokerMetadata": ("make the controller forget brokers or a broker group", clean_broker_metadata,
                            _clean_broker_metadata_args),
    "getControllerConfig": ("print controller members' settings", get_controller_config,
                            lambda p: _controller_addr(p, many=True)),
    "updateControllerConfig": ("change a setting of controller members", update_controller_config,
                               _update_controller_config_args),
}  # fmt: skip
