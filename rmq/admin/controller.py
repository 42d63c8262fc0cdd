"""RocketMQ 5's controller (docs/controller.md): the SyncStateSets of broker groups named or of
a cluster's, and the epoch caches of controller-mode brokers (mqadmin's getSyncStateSet and
getBrokerEpoch). The single requests (metadata, elections, cleaning, settings) are MQAdmin's."""

from __future__ import annotations

from dataclasses import dataclass

from rmq.client import MQClientError
from rmq.client.admin import MQAdmin
from rmq.protocol.bodies.controller import BrokerReplicasInfo, EpochEntryCache

from .common import AdminError


def first_controller(addrs: str) -> str:
    """The first address of `a:9878;b:9878` (getSyncStateSet asks one member)."""
    first = addrs.strip().split(";")[0].strip()
    if not first:
        raise AdminError("no controller address: pass -a host:port")
    return first


def controllers(addrs: str) -> list[str]:
    """Every address of `a:9878;b:9878`."""
    out = [a.strip() for a in addrs.split(";") if a.strip()]
    if not out:
        raise AdminError("no controller address: pass -a host:port[;host:port...]")
    return out


async def sync_state_sets(
    admin: MQAdmin, controller_addr: str, broker_name: str | None, cluster: str | None
) -> BrokerReplicasInfo:
    """The SyncStateSet of `broker_name`, or of every broker group of `cluster` (by the name
    servers' cluster info), from the controller's leader."""
    names = [broker_name] if broker_name else (await admin.cluster_info()).broker_names(cluster or "")
    return await admin.sync_state_data(controller_addr, names)


@dataclass
class BrokerEpochs:
    """One broker's epoch cache, or the error it answered with."""

    addr: str
    cache: EpochEntryCache | None = None
    error: MQClientError | None = None


async def epoch_caches(admin: MQAdmin, broker_name: str | None, cluster: str | None) -> list[BrokerEpochs]:
    """The epoch cache of every master and slave of `broker_name`, or of `cluster`, by address."""
    info = await admin.cluster_info()
    if broker_name:
        data = info.brokers.get(broker_name)
        if data is None:
            raise AdminError(f"broker {broker_name!r} is not known to the name server")
        addrs = sorted(set(data.addrs.values()))
    else:
        addrs = sorted(set(info.all_addrs(cluster or "")))
    out = []
    for addr in addrs:
        try:
            out.append(BrokerEpochs(addr, await admin.broker_epoch_cache(addr)))
        except MQClientError as exc:
            out.append(BrokerEpochs(addr, error=exc))
    return out
