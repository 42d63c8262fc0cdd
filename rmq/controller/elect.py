"""DefaultElectPolicy: which broker of a group becomes master (sans-IO).

Tried on the SyncStateSet first and then, with enableElectUncleanMaster, on every broker
of the group: of the alive ones, the old master if it is alive (unless another broker is
designated); the designated broker if it is alive (else none); otherwise the best by
(epoch, max offset) highest, then election priority lowest (then the lowest id, where
RocketMQ's TreeSet keeps whichever came first).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from .heartbeat import BrokerLiveInfo

Alive = Callable[[str, str, int], bool]  # (clusterName, brokerName, brokerId) -> active now
LiveInfo = Callable[[str, str, int], BrokerLiveInfo | None]


class DefaultElectPolicy:
    def __init__(self, alive: Alive | None = None, live_info: LiveInfo | None = None) -> None:
        self.alive = alive
        self.live_info = live_info

    def elect(
        self,
        cluster: str,
        broker_name: str,
        sync_state_brokers: Iterable[int] | None,
        all_replica_brokers: Iterable[int] | None,
        old_master: int | None,
        prefer: int | None,
    ) -> int | None:
        for candidates in (sync_state_brokers, all_replica_brokers):
            if candidates is not None:
                chosen = self._try(cluster, broker_name, set(candidates), old_master, prefer)
                if chosen is not None:
                    return chosen
        return None

    def _try(
        self, cluster: str, name: str, brokers: set[int], old_master: int | None, prefer: int | None
    ) -> int | None:
        alive = self.alive
        if alive is not None:
            brokers = {b for b in brokers if alive(cluster, name, b)}
        if not brokers:
            return None
        if old_master in brokers and (prefer is None or prefer == old_master):
            return old_master
        if prefer is not None:
            return prefer if prefer in brokers else None
        get = self.live_info
        if get is not None:
            infos = [(i, get(cluster, name, i)) for i in brokers]
            known = [(i, info) for i, info in infos if info is not None]
            if known:
                best = min(known, key=lambda p: (-p[1].epoch, -p[1].max_offset, p[1].election_priority, p[0]))
                return best[0]
        return min(brokers)
