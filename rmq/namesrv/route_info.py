"""The name server's routing state: plain synchronous dicts, no I/O (PROTOCOL.md 3.8).

Tables, as RocketMQ's RouteInfoManager keeps them:

- `clusters`: cluster name → names of its broker groups
- `brokers`: broker name → BrokerGroup (cluster, brokerId → address; id 0 is the master)
- `topics`: topic → broker name → QueueData (queue numbers, perm, topicSysFlag)
- `live`: broker address → BrokerLiveInfo (last registration time, data version,
  the connection it registered on, its HA address)
- `filter_servers`: broker address → filter server addresses (RocketMQ 4.x leftovers;
  kept so routes carry the same `filterServerTable` field)

One broker id of a group has one address, the one that registered it last, with one
exception: a registration is refused while another address holds that id, is live, and
registered with a greater `dataVersion.stateVersion` (the DLedger term, for our DLedger
brokers; the controller's master epoch, for RocketMQ 5 brokers; absent counts as 0, so 4.x
brokers and plain master/slave groups keep "the last one wins"). A deposed DLedger leader's
late brokerId-0 registration thus cannot displace the master its group elected after it.
A refused registration changes nothing, not even the registrant's liveness.

Every method runs to completion without awaiting, so callers on the Trio thread see
each change as atomic. Time comes from the injected `clock` (seconds, monotonic), so
tests drive expiry without sleeping. Routes and cluster info come back as their wire values
(rmq.protocol.bodies.routes) or those values' JSON.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rmq.protocol.bodies.configs import DataVersion, TopicConfig
from rmq.protocol.bodies.routes import BrokerData, ClusterInfo, QueueData, TopicRouteData
from rmq.protocol.constants import MASTER_ID, PERM_WRITE

if TYPE_CHECKING:
    from collections.abc import Callable, Hashable, Mapping


@dataclass(slots=True)
class BrokerGroup:
    """A broker group's live members, changed in place by registrations; `data()` is its
    BrokerData."""

    cluster: str
    broker_name: str
    broker_addrs: dict[int, str]

    def data(self) -> BrokerData:
        return BrokerData(self.broker_name, self.cluster, dict(self.broker_addrs))


@dataclass(slots=True)
class BrokerLiveInfo:
    last_update: float
    data_version: DataVersion
    channel: Hashable | None
    ha_server_addr: str


@dataclass(frozen=True, slots=True)
class RegisterResult:
    """What a slave learns from registering: its master's address and HA address."""

    master_addr: str | None = None
    ha_server_addr: str | None = None
    refused: str | None = None  # why the registration was not taken (nothing changed)


class RouteInfoManager:
    """Clusters, broker groups, topic queues and broker liveness; see the module docstring."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.clusters: dict[str, set[str]] = {}
        self.brokers: dict[str, BrokerGroup] = {}
        self.topics: dict[str, dict[str, QueueData]] = {}
        self.live: dict[str, BrokerLiveInfo] = {}
        self.filter_servers: dict[str, list[str]] = {}

    # -- registration -----------------------------------------------------------------

    def register_broker(
        self,
        cluster: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        ha_server_addr: str,
        data_version: DataVersion,
        topic_configs: Mapping[str, TopicConfig] | None,
        filter_servers: list[str] | None = None,
        channel: Hashable | None = None,
    ) -> RegisterResult:
        """Add or refresh a broker (REGISTER_BROKER).

        A master's topic configs replace its QueueData when its data version changed or
        this is its first registration; topics the broker no longer has are kept until
        DELETE_TOPIC_IN_NAMESRV or the broker group goes away, as in RocketMQ.

        Refused (`RegisterResult.refused` says why; nothing changes) while another live
        address holds `broker_id` of the group with a greater stateVersion: see the module
        docstring.
        """
        refused = self._newer_holder(broker_name, broker_id, broker_addr, data_version)
        if refused is not None:
            return RegisterResult(refused=refused)
        self.clusters.setdefault(cluster, set()).add(broker_name)
        first = False
        data = self.brokers.get(broker_name)
        if data is None:
            first = True
            data = self.brokers[broker_name] = BrokerGroup(cluster, broker_name, {})
        # One address has one id: a slave promoted to master leaves its old id behind.
        for other_id, addr in list(data.broker_addrs.items()):
            if addr == broker_addr and other_id != broker_id:
                del data.broker_addrs[other_id]
        old_addr = data.broker_addrs.get(broker_id)
        data.broker_addrs[broker_id] = broker_addr
        first = first or old_addr is None

        # only a master's topics make queues, and only when they may have changed
        if (
            topic_configs is not None
            and broker_id == MASTER_ID
            and (first or self.is_topic_config_changed(broker_addr, data_version))
        ):
            for config in topic_configs.values():
                self._update_queue_data(broker_name, config)

        self.live[broker_addr] = BrokerLiveInfo(self.clock(), data_version, channel, ha_server_addr)
        if filter_servers is not None:
            if filter_servers:
                self.filter_servers[broker_addr] = list(filter_servers)
            else:
                self.filter_servers.pop(broker_addr, None)

        if broker_id != MASTER_ID:
            master_addr = data.broker_addrs.get(MASTER_ID)
            if master_addr is not None:
                master = self.live.get(master_addr)
                if master is not None:
                    return RegisterResult(master_addr=master_addr, ha_server_addr=master.ha_server_addr)
        return RegisterResult()

    def _newer_holder(self, broker_name: str, broker_id: int, broker_addr: str, version: DataVersion) -> str | None:
        """Why `broker_addr` may not take `broker_id` of `broker_name` now, or None if it may."""
        data = self.brokers.get(broker_name)
        holder = None if data is None else data.broker_addrs.get(broker_id)
        if holder is None or holder == broker_addr:
            return None
        live = self.live.get(holder)
        if live is None or live.data_version.state <= version.state:
            return None
        return (
            f"brokerId {broker_id} of {broker_name} is held by {holder} at stateVersion "
            f"{live.data_version.state}, newer than this registration's {version.state}"
        )

    def _update_queue_data(self, broker_name: str, config: TopicConfig) -> None:
        queues = self.topics.setdefault(config.topic_name, {})
        queues[broker_name] = QueueData(
            broker_name,
            config.read_queue_nums,
            config.write_queue_nums,
            config.perm,
            config.topic_sys_flag,
        )

    def unregister_broker(self, cluster: str, broker_addr: str, broker_name: str, broker_id: int) -> None:
        """Remove one broker (UNREGISTER_BROKER); an emptied group takes its queues with it.

        The id goes only if `broker_addr` holds it: a deposed master that stops before it
        learnt of its successor must not take the successor's id 0 with it."""
        self.live.pop(broker_addr, None)
        self.filter_servers.pop(broker_addr, None)
        data = self.brokers.get(broker_name)
        if data is None:
            return
        if data.broker_addrs.get(broker_id) == broker_addr:
            del data.broker_addrs[broker_id]
        if data.broker_addrs:
            return
        del self.brokers[broker_name]
        names = self.clusters.get(cluster)
        if names is not None:
            names.discard(broker_name)
            if not names:
                del self.clusters[cluster]
        self._remove_queues_of(broker_name)

    def remove_broker_addr(self, broker_addr: str) -> None:
        """Forget everything about one broker address (connection closed or expired)."""
        self.live.pop(broker_addr, None)
        self.filter_servers.pop(broker_addr, None)
        for name, data in list(self.brokers.items()):
            for broker_id, addr in list(data.broker_addrs.items()):
                if addr == broker_addr:
                    del data.broker_addrs[broker_id]
            if data.broker_addrs:
                continue
            del self.brokers[name]
            names = self.clusters.get(data.cluster)
            if names is not None:
                names.discard(name)
                if not names:
                    del self.clusters[data.cluster]
            self._remove_queues_of(name)

    def _remove_queues_of(self, broker_name: str) -> None:
        for topic, queues in list(self.topics.items()):
            if queues.pop(broker_name, None) is not None and not queues:
                del self.topics[topic]

    def on_channel_closed(self, channel: Hashable) -> list[str]:
        """Drop every broker that registered over `channel`; returns their addresses."""
        gone = [addr for addr, info in self.live.items() if info.channel == channel]
        for addr in gone:
            self.remove_broker_addr(addr)
        return gone

    def scan_not_active(self, expiry: float) -> list[tuple[str, Hashable | None]]:
        """Drop brokers not refreshed for more than `expiry` seconds; returns (address, channel)."""
        now = self.clock()
        expired = [(addr, info.channel) for addr, info in self.live.items() if info.last_update + expiry < now]
        for addr, _ in expired:
            self.remove_broker_addr(addr)
        return expired

    # -- data versions (QUERY_DATA_VERSION) -------------------------------------------

    def is_topic_config_changed(self, broker_addr: str, data_version: DataVersion) -> bool:
        info = self.live.get(broker_addr)
        return info is None or info.data_version != data_version

    def data_version_of(self, broker_addr: str) -> DataVersion | None:
        info = self.live.get(broker_addr)
        return None if info is None else info.data_version

    def touch(self, broker_addr: str) -> None:
        """Count a successful QUERY_DATA_VERSION as a heartbeat."""
        info = self.live.get(broker_addr)
        if info is not None:
            info.last_update = self.clock()

    # -- queries ----------------------------------------------------------------------

    def topic_route(self, topic: str, order_topic_conf: str | None = None) -> TopicRouteData | None:
        """`topic`'s route, or None without queues or without any live group."""
        queues = self.topics.get(topic)
        if not queues:
            return None
        broker_datas = []
        filter_table: dict[str, list[str]] = {}
        for name in sorted(queues):
            group = self.brokers.get(name)
            if group is None:
                continue
            broker_datas.append(group.data())
            for addr in group.broker_addrs.values():
                servers = self.filter_servers.get(addr)
                if servers is not None:
                    filter_table[addr] = list(servers)
        if not broker_datas:
            return None
        queue_datas = tuple(queues[name] for name in sorted(queues))
        return TopicRouteData(queue_datas, tuple(broker_datas), order_topic_conf, dict(sorted(filter_table.items())))

    def pickup_topic_route(self, topic: str) -> dict[str, Any] | None:
        """The JSON of `topic_route(topic)`."""
        route = self.topic_route(topic)
        return None if route is None else route.to_json()

    def cluster_info(self) -> dict[str, Any]:
        """ClusterInfo's JSON: every broker group and every cluster's group names."""
        brokers = {name: self.brokers[name].data() for name in sorted(self.brokers)}
        clusters = {name: sorted(names) for name, names in sorted(self.clusters.items())}
        return ClusterInfo(brokers, clusters).to_json()

    def all_topics(self) -> list[str]:
        return sorted(self.topics)

    def topics_by_sys_flag(self, flag: int, *, without: int = 0) -> list[str]:
        """Topics whose first queue's topicSysFlag has every bit of `flag` and none of
        `without` (the unit topic lists; RocketMQ also looks at the first queue only)."""
        out = []
        for topic, queues in self.topics.items():
            first = next(iter(queues.values()), None)
            if first is not None and first.topic_sys_flag & flag == flag and not first.topic_sys_flag & without:
                out.append(topic)
        return sorted(out)

    def topics_by_cluster(self, cluster: str) -> list[str]:
        names = self.clusters.get(cluster, set())
        return sorted(topic for topic, queues in self.topics.items() if names.intersection(queues))

    def system_topics(self) -> tuple[list[str], str | None]:
        """Cluster and broker names (each is a system topic), and one broker address."""
        topics: list[str] = []
        for cluster, names in sorted(self.clusters.items()):
            topics.append(cluster)
            topics.extend(sorted(names))
        broker_addr = None
        for name in sorted(self.brokers):
            addrs = self.brokers[name].broker_addrs
            if addrs:
                broker_addr = addrs[min(addrs)]
                break
        return list(dict.fromkeys(topics)), broker_addr

    def delete_topic(self, topic: str, cluster: str | None = None) -> None:
        """Forget a topic's queues; with `cluster`, only those on that cluster's groups."""
        if not cluster:
            self.topics.pop(topic, None)
            return
        queues = self.topics.get(topic)
        names = self.clusters.get(cluster)
        if queues is None or not names:
            return
        for name in names:
            queues.pop(name, None)
        if not queues:
            del self.topics[topic]

    def wipe_write_perm(self, broker_name: str) -> int:
        """Clear PERM_WRITE on every queue of a group; returns the number of topics touched."""
        return self._change_write_perm(broker_name, wipe=True)

    def add_write_perm(self, broker_name: str) -> int:
        """Set PERM_WRITE on every queue of a group; returns the number of topics touched."""
        return self._change_write_perm(broker_name, wipe=False)

    def _change_write_perm(self, broker_name: str, *, wipe: bool) -> int:
        count = 0
        for queues in self.topics.values():
            queue = queues.get(broker_name)
            if queue is not None:
                perm = queue.perm & ~PERM_WRITE if wipe else queue.perm | PERM_WRITE
                queues[broker_name] = dataclasses.replace(queue, perm=perm)
                count += 1
        return count
