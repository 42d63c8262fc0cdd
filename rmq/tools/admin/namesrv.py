"""mqadmin's name-server commands: getNamesrvConfig, updateNamesrvConfig, wipeWritePerm,
addWritePerm, updateKvConfig, deleteKvConfig."""

from __future__ import annotations

from rmq.client.admin import MQAdmin

from . import options as o
from .options import Args, Commands, Parser, Runner
from .output import Out, config_table


async def get_namesrv_config(admin: MQAdmin, args: Args, out: Out) -> int:
    for addr, table in (await admin.namesrv_config()).items():
        config_table(out, addr, table)
    return 0


async def update_namesrv_config(admin: MQAdmin, args: Args, out: Out) -> int:
    addrs = await admin.update_namesrv_config({args.key.strip(): args.value.strip()})
    print(f"update name server config success![{', '.join(addrs)}]\n{args.key} : {args.value}", file=out)
    return 0


def _write_perm(add: bool) -> Runner:
    async def run(admin: MQAdmin, args: Args, out: Out) -> int:
        word = "add" if add else "wipe"
        for ns, count in await admin.change_write_perm(args.broker_name, add=add):
            print(f"{word} write perm of broker[{args.broker_name}] in name server[{ns}] OK, {count}", file=out)
        return 0

    return run


async def update_kv_config(admin: MQAdmin, args: Args, out: Out) -> int:
    await admin.put_kv_config(args.namespace, args.key, args.value)
    print("create or update kv config to namespace success.", file=out)
    return 0


async def delete_kv_config(admin: MQAdmin, args: Args, out: Out) -> int:
    await admin.delete_kv_config(args.namespace, args.key)
    print("delete kv config from namespace success.", file=out)
    return 0


def _kv_args(p: Parser, value: bool = True) -> None:
    p.add_argument("-s", "--namespace", required=True)
    p.add_argument("-k", "--key", required=True)
    if value:
        p.add_argument("-v", "--value", required=True)


COMMANDS: Commands = {
    "getNamesrvConfig": ("print the name servers' settings", get_namesrv_config, lambda p: None),
    "updateNamesrvConfig": ("change a setting of the name servers", update_namesrv_config, o.key_value),
    "wipeWritePerm": ("take write permission from a broker", _write_perm(add=False), o.broker_name),
    "addWritePerm": ("give write permission back to a broker", _write_perm(add=True), o.broker_name),
    "updateKvConfig": ("create or update a name-server KV entry", update_kv_config, _kv_args),
    "deleteKvConfig": ("delete a name-server KV entry", delete_kv_config, lambda p: _kv_args(p, value=False)),
}
