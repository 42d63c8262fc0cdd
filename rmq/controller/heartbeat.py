"""Which brokers are alive, as the controller hears their BROKER_HEARTBEATs (sans-IO).

Each member keeps its own table (heartbeats are not replicated, as in RocketMQ's
DefaultBrokerHeartbeatManager): brokers beat every member. Time comes in with every call
(milliseconds). A broker is active while its last beat is at most its timeout old (the
heartbeat's heartbeatTimeoutMills, else 10 s); `scan` drops the ones that are not and
returns them, for the caller to elect a new master where one of them was master.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_TIMEOUT_MS = 10_000  # BrokerHeartbeatManager.DEFAULT_BROKER_CHANNEL_EXPIRED_TIME

BrokerKey = tuple[str, str, int]  # (clusterName, brokerName, brokerId)


@dataclass(slots=True)
class BrokerLiveInfo:
    broker_name: str
    broker_addr: str
    broker_id: int
    last_update_ms: int
    timeout_ms: int
    epoch: int = -1
    max_offset: int = -1
    confirm_offset: int = -1
    election_priority: int = 2**31 - 1
    channel: object = None  # the connection it beats on (closing it makes the broker inactive)


class BrokerHeartbeatManager:
    def __init__(self) -> None:
        self.table: dict[BrokerKey, BrokerLiveInfo] = {}

    def on_heartbeat(
        self,
        cluster: str,
        broker_name: str,
        broker_addr: str,
        broker_id: int,
        now_ms: int,
        *,
        timeout_ms: int | None = None,
        epoch: int | None = None,
        max_offset: int | None = None,
        confirm_offset: int | None = None,
        election_priority: int | None = None,
        channel: object = None,
    ) -> None:
        key = (cluster, broker_name, broker_id)
        epoch_ = -1 if epoch is None else epoch
        offset = -1 if max_offset is None else max_offset
        confirm = -1 if confirm_offset is None else confirm_offset
        timeout = DEFAULT_TIMEOUT_MS if timeout_ms is None else timeout_ms
        priority = 2**31 - 1 if election_priority is None else election_priority
        prev = self.table.get(key)
        if prev is None:
            self.table[key] = BrokerLiveInfo(
                broker_name, broker_addr, broker_id, now_ms, timeout, epoch_, offset, confirm, priority, channel
            )
            return
        prev.last_update_ms = now_ms
        prev.timeout_ms = timeout
        prev.election_priority = priority
        prev.broker_addr = broker_addr
        if channel is not None:
            prev.channel = channel
        # Progress only moves forward: a late beat must not make a broker look further behind.
        if epoch_ > prev.epoch or (epoch_ == prev.epoch and offset > prev.max_offset):
            prev.epoch, prev.max_offset, prev.confirm_offset = epoch_, offset, confirm

    def is_active(self, cluster: str, broker_name: str, broker_id: int, now_ms: int) -> bool:
        info = self.table.get((cluster, broker_name, broker_id))
        return info is not None and info.last_update_ms + info.timeout_ms >= now_ms

    def live_info(self, cluster: str, broker_name: str, broker_id: int) -> BrokerLiveInfo | None:
        return self.table.get((cluster, broker_name, broker_id))

    def scan(self, now_ms: int) -> list[BrokerKey]:
        """Drop the brokers whose heartbeats stopped; returns them."""
        gone = [k for k, v in self.table.items() if now_ms - v.last_update_ms > v.timeout_ms]
        for k in gone:
            del self.table[k]
        return gone

    def on_channel_close(self, channel: object) -> list[BrokerKey]:
        """The brokers that beat on ``channel`` are inactive now; returns them."""
        gone = [k for k, v in self.table.items() if v.channel is channel]
        for k in gone:
            del self.table[k]
        return gone
