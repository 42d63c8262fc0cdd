"""ACL 1.0 on brokers: accounts, the global white list, the ACL files' versions."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from rmq.client.admin import MQAdmin
from rmq.protocol.acl import PlainAccessConfig

from .common import members_or


async def update_account(
    admin: MQAdmin, config: PlainAccessConfig, broker_addr: str | None, cluster: str | None
) -> AsyncIterator[str]:
    """Create or update an account on `broker_addr`, or on every master and slave of
    `cluster`; yields each address once done."""
    for addr in await members_or(admin, broker_addr, cluster):
        await admin.update_acl_config(addr, config)
        yield addr


async def delete_account(
    admin: MQAdmin, access_key: str, broker_addr: str | None, cluster: str | None
) -> AsyncIterator[str]:
    for addr in await members_or(admin, broker_addr, cluster):
        await admin.delete_acl_config(addr, access_key)
        yield addr


async def update_white_list(
    admin: MQAdmin, addresses: Sequence[str], acl_file: str | None, broker_addr: str | None, cluster: str | None
) -> AsyncIterator[str]:
    for addr in await members_or(admin, broker_addr, cluster):
        await admin.update_global_white_addrs(addr, addresses, acl_file)
        yield addr
