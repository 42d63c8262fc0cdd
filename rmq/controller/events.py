"""The controller's events: what its Raft log holds, applied in order on every member.

Encoded as RocketMQ's EventSerializer writes them: the event type as a big-endian short,
then the event as JSON (its field names). An empty entry (a new leader's first, Raft's
no-op) is no event. A body that is not an event raises EventError.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from typing import Any

ALTER_SYNC_STATE_SET = 1
APPLY_BROKER_ID = 2
ELECT_MASTER = 3
READ = 4  # never logged here (isProcessReadEvent is not supported)
CLEAN_BROKER_DATA = 5
UPDATE_BROKER_ADDRESS = 6


class EventError(ValueError):
    """A log entry that is not a controller event."""


@dataclass(frozen=True, slots=True)
class AlterSyncStateSetEvent:
    broker_name: str
    new_sync_state_set: frozenset[int]


@dataclass(frozen=True, slots=True)
class ApplyBrokerIdEvent:
    cluster_name: str
    broker_name: str
    broker_address: str
    new_broker_id: int
    register_check_code: str


@dataclass(frozen=True, slots=True)
class ElectMasterEvent:
    """``new_master_elected`` False: the master is gone and nobody could take over."""

    broker_name: str
    new_master_elected: bool
    new_master_broker_id: int | None = None


@dataclass(frozen=True, slots=True)
class UpdateBrokerAddressEvent:
    cluster_name: str
    broker_name: str
    broker_address: str
    broker_id: int


@dataclass(frozen=True, slots=True)
class CleanBrokerDataEvent:
    """No ids: the whole group."""

    broker_name: str
    broker_id_set_to_clean: frozenset[int] | None = None


Event = AlterSyncStateSetEvent | ApplyBrokerIdEvent | ElectMasterEvent | UpdateBrokerAddressEvent | CleanBrokerDataEvent


def _fields(event: Event) -> tuple[int, dict[str, Any]]:
    if isinstance(event, AlterSyncStateSetEvent):
        return ALTER_SYNC_STATE_SET, {
            "brokerName": event.broker_name,
            "newSyncStateSet": sorted(event.new_sync_state_set),
        }
    if isinstance(event, ApplyBrokerIdEvent):
        return APPLY_BROKER_ID, {
            "brokerAddress": event.broker_address, "brokerName": event.broker_name,
            "clusterName": event.cluster_name, "newBrokerId": event.new_broker_id,
            "registerCheckCode": event.register_check_code,
        }  # fmt: skip
    if isinstance(event, ElectMasterEvent):
        out: dict[str, Any] = {"brokerName": event.broker_name, "newMasterElected": event.new_master_elected}
        if event.new_master_broker_id is not None:
            out["newMasterBrokerId"] = event.new_master_broker_id
        return ELECT_MASTER, out
    if isinstance(event, UpdateBrokerAddressEvent):
        return UPDATE_BROKER_ADDRESS, {
            "brokerAddress": event.broker_address, "brokerId": event.broker_id,
            "brokerName": event.broker_name, "clusterName": event.cluster_name,
        }  # fmt: skip
    out = {"brokerName": event.broker_name}
    if event.broker_id_set_to_clean is not None:
        out["brokerIdSetToClean"] = sorted(event.broker_id_set_to_clean)
    return CLEAN_BROKER_DATA, out


def encode_event(event: Event) -> bytes:
    kind, fields = _fields(event)
    return struct.pack(">h", kind) + json.dumps(fields, separators=(",", ":")).encode()


def _ids(value: Any) -> frozenset[int]:
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise EventError(f"not a list of broker ids: {value!r}")
    return frozenset(value)


def decode_event(body: bytes) -> Event | None:
    """The event in a log entry; None for an empty entry."""
    if not body:
        return None
    if len(body) < 2:
        raise EventError("an entry of one byte")
    (kind,) = struct.unpack_from(">h", body)
    try:
        obj = json.loads(body[2:])
        if not isinstance(obj, dict):
            raise EventError("the event is not a JSON object")
        name = str(obj["brokerName"])
        if kind == ALTER_SYNC_STATE_SET:
            return AlterSyncStateSetEvent(name, _ids(obj["newSyncStateSet"]))
        if kind == APPLY_BROKER_ID:
            return ApplyBrokerIdEvent(
                str(obj["clusterName"]), name, str(obj["brokerAddress"]), int(obj["newBrokerId"]),
                str(obj["registerCheckCode"]),
            )  # fmt: skip
        if kind == ELECT_MASTER:
            master = obj.get("newMasterBrokerId")
            return ElectMasterEvent(name, bool(obj["newMasterElected"]), None if master is None else int(master))
        if kind == UPDATE_BROKER_ADDRESS:
            return UpdateBrokerAddressEvent(
                str(obj["clusterName"]), name, str(obj["brokerAddress"]), int(obj["brokerId"])
            )
        if kind == CLEAN_BROKER_DATA:
            ids = obj.get("brokerIdSetToClean")
            return CleanBrokerDataEvent(name, None if ids is None else _ids(ids))
    except (KeyError, TypeError, ValueError, RecursionError) as exc:
        if isinstance(exc, EventError):
            raise
        raise EventError(f"bad event of type {kind}: {exc!r}") from None
    raise EventError(f"unknown event type {kind}")
