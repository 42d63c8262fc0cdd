"""The controller's bodies (RocketMQ 5.x, RIP-44): SyncStateSet, ElectMasterResponseBody with
its BrokerMemberGroup, BrokerReplicasInfo (CONTROLLER_GET_SYNC_STATE_DATA), and a controller-mode
broker's EpochEntryCache with its EpochEntry list (GET_BROKER_EPOCH_CACHE)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from . import _fields as F


def _ids(value: Any, what: str) -> frozenset[int]:
    return frozenset(F.integer(v, what) for v in F.array(value, what)) if value is not None else frozenset()


def _opt_int(obj: dict[Any, Any], key: str) -> int | None:
    value = obj.get(key)
    return None if value is None else F.integer(value, key)


@dataclass(frozen=True, slots=True)
class SyncStateSet:
    """The broker ids in sync with their master, and the set's epoch."""

    sync_state_set: frozenset[int] = frozenset()
    sync_state_set_epoch: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"syncStateSet": sorted(self.sync_state_set), "syncStateSetEpoch": self.sync_state_set_epoch}

    @classmethod
    def from_json(cls, obj: Any) -> SyncStateSet:
        obj = F.obj(obj, "SyncStateSet")
        epoch = obj.get("syncStateSetEpoch")
        return cls(
            _ids(obj.get("syncStateSet"), "syncStateSet"), 0 if epoch is None else F.integer(epoch, "syncStateSetEpoch")
        )


@dataclass(frozen=True, slots=True)
class BrokerMemberGroup:
    """A broker group's members: broker id -> address."""

    cluster: str
    broker_name: str
    broker_addrs: dict[int, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "brokerAddrs": {str(k): v for k, v in sorted(self.broker_addrs.items())},
            "brokerName": self.broker_name,
            "cluster": self.cluster,
        }

    @classmethod
    def from_json(cls, obj: Any) -> BrokerMemberGroup:
        obj = F.obj(obj, "BrokerMemberGroup")
        addrs = F.table(obj.get("brokerAddrs") or {}, "brokerAddrs")
        return cls(
            F.text(obj.get("cluster", ""), "cluster"),
            F.text(obj.get("brokerName", ""), "brokerName"),
            {F.integer(k, "a broker id"): F.text(v, f"brokerAddrs[{k}]") for k, v in addrs.items()},
        )


@dataclass(frozen=True, slots=True)
class ElectMasterResponseBody:
    sync_state_set: frozenset[int] = frozenset()
    broker_member_group: BrokerMemberGroup | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.broker_member_group is not None:
            out["brokerMemberGroup"] = self.broker_member_group.to_json()
        out["syncStateSet"] = sorted(self.sync_state_set)
        return out

    @classmethod
    def from_json(cls, obj: Any) -> ElectMasterResponseBody:
        obj = F.obj(obj, "ElectMasterResponseBody")
        group = obj.get("brokerMemberGroup")
        return cls(
            _ids(obj.get("syncStateSet"), "syncStateSet"),
            None if group is None else BrokerMemberGroup.from_json(group),
        )


@dataclass(frozen=True, slots=True)
class ReplicaIdentity:
    broker_name: str
    broker_id: int
    broker_address: str | None
    alive: bool = False

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"alive": self.alive}
        if self.broker_address is not None:
            out["brokerAddress"] = self.broker_address
        out["brokerId"] = self.broker_id
        out["brokerName"] = self.broker_name
        return out

    @classmethod
    def from_json(cls, obj: Any) -> ReplicaIdentity:
        obj = F.obj(obj, "ReplicaIdentity")
        addr = obj.get("brokerAddress")
        return cls(
            F.text(obj.get("brokerName", ""), "brokerName"),
            F.integer(obj.get("brokerId"), "brokerId"),
            None if addr is None else F.text(addr, "brokerAddress"),
            F.flag(obj.get("alive", False), "alive"),
        )


@dataclass(frozen=True, slots=True)
class ReplicasInfo:
    """One broker group in BrokerReplicasInfo."""

    master_broker_id: int | None
    master_address: str | None
    master_epoch: int
    sync_state_set_epoch: int
    in_sync_replicas: tuple[ReplicaIdentity, ...] = ()
    not_in_sync_replicas: tuple[ReplicaIdentity, ...] = ()

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"inSyncReplicas": [r.to_json() for r in self.in_sync_replicas]}
        if self.master_address is not None:
            out["masterAddress"] = self.master_address
        if self.master_broker_id is not None:
            out["masterBrokerId"] = self.master_broker_id
        out["masterEpoch"] = self.master_epoch
        out["notInSyncReplicas"] = [r.to_json() for r in self.not_in_sync_replicas]
        out["syncStateSetEpoch"] = self.sync_state_set_epoch
        return out

    @classmethod
    def from_json(cls, obj: Any) -> ReplicasInfo:
        obj = F.obj(obj, "ReplicasInfo")
        addr = obj.get("masterAddress")
        return cls(
            _opt_int(obj, "masterBrokerId"),
            None if addr is None else F.text(addr, "masterAddress"),
            _opt_int(obj, "masterEpoch") or 0,
            _opt_int(obj, "syncStateSetEpoch") or 0,
            tuple(ReplicaIdentity.from_json(r) for r in F.array(obj.get("inSyncReplicas") or [], "inSyncReplicas")),
            tuple(
                ReplicaIdentity.from_json(r) for r in F.array(obj.get("notInSyncReplicas") or [], "notInSyncReplicas")
            ),
        )


@dataclass(frozen=True, slots=True)
class BrokerReplicasInfo:
    """CONTROLLER_GET_SYNC_STATE_DATA's answer: brokerName -> ReplicasInfo."""

    replicas_info_table: dict[str, ReplicasInfo] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"replicasInfoTable": {k: v.to_json() for k, v in sorted(self.replicas_info_table.items())}}

    @classmethod
    def from_json(cls, obj: Any) -> BrokerReplicasInfo:
        table = F.table(F.obj(obj, "BrokerReplicasInfo").get("replicasInfoTable") or {}, "replicasInfoTable")
        return cls({F.text(k, "a broker name"): ReplicasInfo.from_json(v) for k, v in table.items()})


LONG_MAX = 2**63 - 1  # EpochEntry's endOffset while its epoch is the current one (Long.MAX_VALUE)


@dataclass(frozen=True, slots=True)
class EpochEntry:
    """One master epoch of a broker's epoch file: where in the CommitLog it starts and ends."""

    epoch: int
    start_offset: int
    end_offset: int = LONG_MAX

    def to_json(self) -> dict[str, Any]:
        return {"endOffset": self.end_offset, "epoch": self.epoch, "startOffset": self.start_offset}

    @classmethod
    def from_json(cls, obj: Any) -> EpochEntry:
        obj = F.obj(obj, "EpochEntry")
        end = obj.get("endOffset")
        return cls(
            F.integer(obj.get("epoch", 0), "epoch"),
            F.integer(obj.get("startOffset", 0), "startOffset"),
            LONG_MAX if end is None else F.integer(end, "endOffset"),
        )


@dataclass(frozen=True, slots=True)
class EpochEntryCache:
    """GET_BROKER_EPOCH_CACHE's answer: a controller-mode broker's identity, its epoch entries
    (the last one, the current epoch, open-ended) and its CommitLog's max offset."""

    cluster_name: str
    broker_name: str
    broker_id: int
    epoch_list: tuple[EpochEntry, ...] = ()
    max_offset: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "brokerId": self.broker_id,
            "brokerName": self.broker_name,
            "clusterName": self.cluster_name,
            "epochList": [e.to_json() for e in self.epoch_list],
            "maxOffset": self.max_offset,
        }

    @classmethod
    def from_json(cls, obj: Any) -> EpochEntryCache:
        obj = F.obj(obj, "EpochEntryCache")
        return cls(
            F.text(obj.get("clusterName", ""), "clusterName"),
            F.text(obj.get("brokerName", ""), "brokerName"),
            F.integer(obj.get("brokerId", 0), "brokerId"),
            tuple(EpochEntry.from_json(e) for e in F.array(obj.get("epochList"), "epochList")),
            F.integer(obj.get("maxOffset", 0), "maxOffset"),
        )

    def shown(self) -> tuple[EpochEntry, ...]:
        """The entries as mqadmin's getBrokerEpoch prints them: the last one ends at maxOffset."""
        if not self.epoch_list:
            return ()
        *done, last = self.epoch_list
        return (*done, EpochEntry(last.epoch, last.start_offset, self.max_offset))
