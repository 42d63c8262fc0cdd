"""A controller-mode master's SyncStateSet, with no I/O (RocketMQ's AutoSwitchHAService part).

The SyncStateSet is the group's brokers that hold everything the master confirmed; the
controller elects a new master only from it. The master keeps it honest:

* shrink: a slave that has not caught up for haMaxTimeSlaveNotCatchup leaves the set (one
  not connected never catches up). The time counts from the master's election at the
  earliest, so slaves reconnecting to a new or restarted master keep their place meanwhile;
  RocketMQ drops a slave not connected at the next check, which leaves a master that just
  took office alone in its set, and its group with nobody to elect should it die then;
* expand: a slave whose acks reach the confirm offset and the current epoch joins it.

Either change is proposed to the controller (ALTER_SYNC_STATE_SET) and takes effect when it
answers. Until then the master counts the union of the old and the proposed sets, so a send
is never confirmed by fewer replicas than either set names.

The confirm offset is what a send waits for (SYNC_MASTER's ack) and what consumers may see:
with allAckInSyncStateSet every slave of the set must hold it, and a slave of the set that is
not connected holds it back; otherwise the inSyncReplicas-1 highest acks of the set count.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class InSync:
    """The SyncStateSet as this master counts it.

    Attributes:
      local_id: this broker's id in the group (its controller-assigned brokerId).
      members: the set the controller last confirmed (this broker included).
      epoch: that set's SyncStateSet epoch.
      proposed: a set sent to the controller and not answered yet.
    """

    local_id: int
    all_ack: bool = False
    in_sync_replicas: int = 1
    min_in_sync_replicas: int = 1
    max_not_caught_up_ms: int = 15_000
    members: frozenset[int] = frozenset()
    epoch: int = 0
    proposed: frozenset[int] | None = None
    caught_up_ms: dict[int, int] = field(default_factory=dict)
    since_ms: int = 0  # when this broker became master: the members' grace starts there

    def effective(self) -> frozenset[int]:
        """Whose acks count now: the confirmed set, with the proposed one while in flight."""
        return self.members | self.proposed if self.proposed is not None else self.members

    def adopt(self, members: frozenset[int], epoch: int) -> bool:
        """The controller's set (an answer, an election, a sync). False if older than ours."""
        if epoch < self.epoch:
            return False
        self.members, self.epoch, self.proposed = frozenset(members) | {self.local_id}, epoch, None
        return True

    def not_enough(self) -> str | None:
        """Why a send cannot be taken now (minInSyncReplicas), or None."""
        have = len(self.effective() | {self.local_id})
        if have < self.min_in_sync_replicas:
            return f"in-sync replicas not enough: {have} < minInSyncReplicas={self.min_in_sync_replicas}"
        return None

    def needs_no_slave(self) -> bool:
        """Whether this master confirms its appends alone (checked on every append)."""
        others = len(self.effective()) - (self.local_id in self.effective())
        return others == 0 or (not self.all_ack and self.in_sync_replicas <= 1)

    def confirm_offset(self, acks: dict[int, int], end: int) -> int | None:
        """The offset every replica that must hold a send holds, given the connected slaves'
        acks (broker id -> offset) and this log's end; None when it cannot move now."""
        others = self.effective() - {self.local_id}
        if self.all_ack:
            if any(b not in acks for b in others):
                return None  # a member of the set is not connected: nothing is confirmed
            return min([end, *(acks[b] for b in others)])
        need = min(self.in_sync_replicas - 1, len(others))
        if need <= 0:
            return end
        held = sorted((acks[b] for b in others if b in acks), reverse=True)
        if len(held) < need:
            return None
        return min(end, held[need - 1])

    def caught_up(self, broker_id: int, at_ms: int) -> None:
        if at_ms > self.caught_up_ms.get(broker_id, 0):
            self.caught_up_ms[broker_id] = at_ms

    def shrink(self, now_ms: int) -> frozenset[int] | None:
        """The set without the slaves that have not caught up for max_not_caught_up_ms;
        None when nobody fell behind."""
        if self.proposed is not None:
            return None
        keep = {
            b
            for b in self.members
            if b == self.local_id
            or now_ms - max(self.caught_up_ms.get(b, 0), self.since_ms) <= self.max_not_caught_up_ms
        }
        return frozenset(keep) if keep != self.members else None

    def expand(
        self, broker_id: int, ack: int, confirm: int, epoch_start: int, now_ms: int = 0
    ) -> frozenset[int] | None:
        """The set with ``broker_id`` once its ack reaches the confirm offset and this
        master's epoch; None when it is in already or not there yet."""
        if self.proposed is not None or broker_id in self.members:
            return None
        if ack >= confirm and ack >= epoch_start:
            self.caught_up(broker_id, now_ms)  # it has everything confirmed: caught up now
            return self.members | {broker_id}
        return None
