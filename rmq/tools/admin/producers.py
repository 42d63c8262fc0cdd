"""mqadmin's producer: every producer group's connections to one broker."""

from __future__ import annotations

from rmq.client.admin import MQAdmin
from rmq.protocol.bodies.clients import ProducerInfo

from .options import Args, Commands, Parser
from .output import Out


def producer_line(group: str, p: ProducerInfo) -> str:
    """ProducerSubCommand's line: ProducerInfo.toString after the group."""
    return (
        f"producer group ({group}) instance : clientId={p.client_id},remoteIP={p.remote_ip}, "
        f"language={p.language}, version={p.version}, lastUpdateTimestamp={p.last_update_timestamp}"
    )


async def producer(admin: MQAdmin, args: Args, out: Out) -> int:
    table = await admin.all_producer_info(args.broker.strip())
    for group, infos in table.data.items():
        if not infos:
            print(f"producer group ({group}) instances are empty", file=out)
        for info in infos:
            print(producer_line(group, info), file=out)
    return 0


def _producer_args(p: Parser) -> None:
    p.add_argument("-b", "--broker", required=True, help="broker address ip:port")


COMMANDS: Commands = {
    "producer": ("query producers' instances and connections on a broker", producer, _producer_args),
}
