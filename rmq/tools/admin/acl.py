"""mqadmin's ACL 1.0 commands: updateAclConfig, deleteAccessConfig (deleteAclConfig),
updateGlobalWhiteAddr, clusterAclConfigVersion."""

from __future__ import annotations

from rmq.admin import acl
from rmq.admin.common import masters_or
from rmq.client.admin import MQAdmin
from rmq.protocol.acl import PlainAccessConfig

from . import options as o
from .options import Args, Commands, Parser
from .output import Out, date_text, row

ACL_VERSION = "{:<16}  {:<22}  {:<22}  {:<20}  {:<22}  {:<22}"


def _perm_list(text: str | None) -> list[str] | None:
    return None if text is None else [item.strip() for item in text.split(",") if item.strip()]


async def update_acl_config(admin: MQAdmin, args: Args, out: Out) -> int:
    config = PlainAccessConfig(
        access_key=args.access_key.strip(),
        secret_key=args.secret_key.strip(),
        white_remote_address=None if args.white_remote_address is None else args.white_remote_address.strip(),
        admin=args.admin,
        default_topic_perm=args.default_topic_perm,
        default_group_perm=args.default_group_perm,
        topic_perms=_perm_list(args.topic_perms),
        group_perms=_perm_list(args.group_perms),
    )
    async for addr in acl.update_account(admin, config, args.broker_addr, args.cluster):
        print(f"create or update plain access config to {addr} success.", file=out)
    shown = {k: v for k, v in config.to_json().items() if k != "secretKey"}
    print(f"PlainAccessConfig{shown}", file=out)
    return 0


async def delete_acl_config(admin: MQAdmin, args: Args, out: Out) -> int:
    access_key = args.access_key.strip()
    async for addr in acl.delete_account(admin, access_key, args.broker_addr, args.cluster):
        print(f"delete plain access config account from {addr} success.", file=out)
    print(f"account's accesskey is:{access_key}", file=out)
    return 0


async def update_global_white_addr(admin: MQAdmin, args: Args, out: Out) -> int:
    addresses = [a.strip() for a in args.global_white_addrs.split(",") if a.strip()]
    async for addr in acl.update_white_list(admin, addresses, args.acl_file, args.broker_addr, args.cluster):
        print(f"update global white remote addresses to {addr} success.", file=out)
    return 0


async def cluster_acl_config_version(admin: MQAdmin, args: Args, out: Out) -> int:
    addrs = await masters_or(admin, args.broker_addr, args.cluster)
    if not args.broker_addr:
        row(
            out,
            ACL_VERSION,
            "#Cluster Name",
            "#Broker Name",
            "#Broker Addr",
            "#AclFilePath",
            "#AclConfigVersionNum",
            "#AclLastUpdateTime",
        )
    for addr in addrs:
        info = await admin.acl_version_info(addr)
        for path, (counter, timestamp) in sorted(info.files.items()):
            row(
                out,
                ACL_VERSION,
                info.cluster_name,
                info.broker_name,
                info.broker_addr,
                path,
                counter,
                date_text(timestamp),
            )
    if args.broker_addr:
        print("get broker's plain access config version success.", file=out)
    else:
        print("get cluster's plain access config version success.", file=out)
    return 0


def _update_acl_args(p: Parser) -> None:
    o.broker_or_cluster(p)
    p.add_argument("-a", "--accessKey", dest="access_key", required=True, help="the account's access key")
    p.add_argument("-s", "--secretKey", dest="secret_key", required=True, help="the account's secret key")
    p.add_argument("-w", "--whiteRemoteAddress", dest="white_remote_address", help="addresses that need no signature")
    p.add_argument("-i", "--defaultTopicPerm", dest="default_topic_perm", help="DENY, PUB, SUB or PUB|SUB")
    p.add_argument("-u", "--defaultGroupPerm", dest="default_group_perm", help="DENY, PUB, SUB or PUB|SUB")
    p.add_argument("-t", "--topicPerms", dest="topic_perms", help="topicA=DENY,topicD=SUB")
    p.add_argument("-g", "--groupPerms", dest="group_perms", help="groupA=DENY,groupD=SUB")
    p.add_argument("-m", "--admin", type=o.boolean, default=False, help="true: an admin account (default false)")


def _delete_acl_args(p: Parser) -> None:
    o.broker_or_cluster(p)
    p.add_argument("-a", "--accessKey", dest="access_key", required=True, help="the account to delete")


def _update_white_args(p: Parser) -> None:
    o.broker_or_cluster(p)
    p.add_argument(
        "-g", "--globalWhiteRemoteAddresses", dest="global_white_addrs", required=True, help="10.10.103.*,192.168.0.*"
    )
    p.add_argument("-p", "--aclFileFullPath", dest="acl_file", help="the broker's ACL file (default: its own)")


COMMANDS: Commands = {
    "updateAclConfig": ("create or update an ACL account in brokers", update_acl_config, _update_acl_args),
    "deleteAccessConfig": ("delete an ACL account from brokers", delete_acl_config, _delete_acl_args),
    "updateGlobalWhiteAddr": ("set the ACL global white list of brokers", update_global_white_addr, _update_white_args),
    "clusterAclConfigVersion": ("print brokers' ACL file versions", cluster_acl_config_version, o.broker_or_cluster),
}
# these use -a/--accessKey and -s/--secretKey for the account they change (Java's options)
ACCOUNT_COMMANDS = frozenset({"updateAclConfig", "deleteAccessConfig"})
