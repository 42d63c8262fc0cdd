"""What the admin operations share: their own error, the time notation, and which brokers a
command addresses (`-b addr` or `-c cluster`)."""

from __future__ import annotations

import time
from datetime import datetime

from rmq.client import MQClientError
from rmq.client.admin import MQAdmin


class AdminError(MQClientError):
    """A problem an operation found itself (no such message, a bad timestamp...)."""


def now_ms() -> int:
    return int(time.time() * 1000)


def parse_timestamp(text: str, now_ms: int) -> int:
    """`now`, milliseconds since the epoch, or local time as yyyy-MM-dd#HH:mm:ss:SSS."""
    text = text.strip()
    if text == "now":
        return now_ms
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return int(datetime.strptime(text, "%Y-%m-%d#%H:%M:%S:%f").timestamp() * 1000)
    except ValueError:
        raise AdminError(f"bad timestamp {text!r}: use now, milliseconds, or yyyy-MM-dd#HH:mm:ss:SSS") from None


async def masters_or(admin: MQAdmin, broker_addr: str | None, cluster: str | None) -> list[str]:
    """`broker_addr`, or the masters of `cluster`."""
    if broker_addr:
        return [broker_addr]
    return (await admin.cluster_info()).master_addrs(cluster or "")


async def members_or(admin: MQAdmin, broker_addr: str | None, cluster: str | None) -> list[str]:
    """`broker_addr`, or every master and slave of `cluster` (fetchMasterAndSlaveAddrByClusterName)."""
    if broker_addr:
        return [broker_addr]
    return (await admin.cluster_info()).all_addrs(cluster or "")
