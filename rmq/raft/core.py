"""RaftNode: one member of a DLedger group as a sans-IO state machine.

Events in (``tick``, ``receive``, ``propose``, ``appended``, ``persisted``,
``transfer_leadership``), actions
out (``Send``, ``PersistEntries``, ``PersistTerm``, ``Commit``, ``Become*``). No clock, socket,
file or randomness of its own: time comes with every event and randomness from the ``rng``
given at construction, so a simulator replays a run exactly from its seed.

Protocol: DLedger's. Elections as in Raft (a vote per term, only for a log at least as up to
date as ours). A new leader appends a no-op entry and finds each follower's match point with
COMPARE pushes, cuts the follower's divergent tail with TRUNCATE (never below its commit index)
and then streams APPEND pushes (batches of entries, one push in flight per follower, resent
after ``push_timeout_ms``). An entry is committed when a majority holds it durably and it is of
the leader's term (Raft's commit rule). A leader that hears from no majority for an election
timeout steps down.

Retention deletes the head of a member's log (committed entries only), and there are no
snapshots, as in DLedger: a follower that needs entries its leader no longer holds gets a
TRUNCATE with ``rebuild`` carrying the leader's first entry, and one without that entry
starts its log over there (``PersistEntries(rebuild=True)``); what it drops was committed.

The driver must execute the actions of one call in order. ``PersistTerm`` must be durable
before any later action is carried out (a vote or a term must survive a crash before anyone
hears of it). ``PersistEntries`` may complete later, in order: the driver calls
``persisted(upto)`` when everything up to ``upto`` that the log holds is durable. The log
(``LogView``) must show appended entries at once, durable or not, and the driver calls
``appended`` once it has put a PersistEntries' entries there (a leader pushes them then).
"""

from __future__ import annotations

import enum
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, TypedDict

from .messages import (
    Code,
    Entry,
    HeartBeatRequest,
    HeartBeatResponse,
    LeadershipTransferRequest,
    Message,
    PushEntryRequest,
    PushEntryResponse,
    PushType,
    VoteRequest,
    VoteResponse,
    VoteResult,
)


class Role(enum.Enum):
    FOLLOWER = "FOLLOWER"
    CANDIDATE = "CANDIDATE"
    LEADER = "LEADER"


class NotLeader(Exception):
    """A proposal reached a member that is not the leader (``leader_id``: who may be)."""

    def __init__(self, leader_id: str | None) -> None:
        super().__init__(f"not the leader (leader: {leader_id or 'unknown'})")
        self.leader_id = leader_id


class LogView(Protocol):
    """The member's log as the driver keeps it (appended entries visible at once)."""

    @property
    def end_index(self) -> int: ...  # -1 when empty

    @property
    def begin_index(self) -> int: ...  # first index held; entries before it are deleted

    def term_at(self, index: int) -> int | None: ...  # None outside the log

    def entry_at(self, index: int) -> Entry | None: ...


@dataclass(frozen=True, slots=True)
class RaftConfig:
    election_timeout_ms: int = 3000  # randomized within [t, 2t) per election
    heartbeat_interval_ms: int = 1000
    push_timeout_ms: int = 1000  # an unanswered push is sent again after this
    max_batch: int = 1024  # entries per APPEND push (a far-behind follower catches up in big steps)
    max_batch_bytes: int = 1024 * 1024
    # Followers beyond the quorum's need get new entries at most this often (0: at once, like
    # the others). The leader pushes each new entry at once to the majority - 1 followers
    # furthest along, which is all a commit waits for; the rest get what piled up in one
    # push per interval, which costs them and the leader far less per entry.
    lazy_push_ms: int = 0
    # An eager follower whose push goes unanswered this long, or whose match stays below the
    # commit index this long, gives its place to the lazy one furthest along (commits go on
    # meanwhile through the lazy ones, at their interval). Apart from lazy_push_ms, so that a
    # long lazy interval does not make a dead follower stall commits longer.
    eager_stall_ms: int = 100


@dataclass(frozen=True, slots=True)
class PersistentState:
    term: int = 0
    voted_for: str | None = None
    commit_index: int = -1


# -- actions ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Send:
    to: str
    message: Message


@dataclass(frozen=True, slots=True)
class PersistEntries:
    """Cut the log after ``truncate_after`` (when not None), then append ``entries``. With
    ``rebuild``: drop the whole log and start it over with ``entries`` (the first one at
    its ``pos`` in the data files)."""

    entries: tuple[Entry, ...]
    truncate_after: int | None = None
    rebuild: bool = False


@dataclass(frozen=True, slots=True)
class PersistTerm:
    term: int
    voted_for: str | None


@dataclass(frozen=True, slots=True)
class Commit:
    index: int


@dataclass(frozen=True, slots=True)
class BecomeLeader:
    term: int


@dataclass(frozen=True, slots=True)
class BecomeFollower:
    term: int
    leader_id: str | None


@dataclass(frozen=True, slots=True)
class BecomeCandidate:
    term: int


Action = Send | PersistEntries | PersistTerm | Commit | BecomeLeader | BecomeFollower | BecomeCandidate


class _Base(TypedDict):
    group: str
    local_id: str
    remote_id: str
    term: int
    leader_id: str | None


class _Mode(enum.Enum):
    COMPARE = "COMPARE"
    TRUNCATE = "TRUNCATE"
    APPEND = "APPEND"


@dataclass(slots=True)
class _Progress:
    """The leader's view of one follower."""

    mode: _Mode = _Mode.COMPARE
    compare_index: int = -1
    match: int = -1  # highest index known durable on the follower and equal to ours
    next: int = 0  # next index to APPEND
    inflight: bool = False
    deadline: int = 0
    sent_last: int = -1  # last index of the push in flight
    rebuild: bool = False  # TRUNCATE mode: the follower needs entries we no longer hold
    last_ack: int = 0  # when it last answered in this term
    lazy_due: int = 0  # a lazy follower's next APPEND push is not before this (lazy_push_ms)
    more: bool = False  # the last APPEND push was cut short by the batch limits (catching up)
    behind_since: int = -1  # an eager follower: since when its match is below the commit index


@dataclass(slots=True)
class _PendingAck:
    index: int
    to: str
    term: int


class RaftNode:
    """One member; see the module docstring."""

    def __init__(
        self,
        self_id: str,
        peers: Sequence[str],
        log: LogView,
        *,
        group: str = "default",
        config: RaftConfig | None = None,
        state: PersistentState | None = None,
        rng: random.Random | None = None,
        now_ms: int = 0,
    ) -> None:
        if self_id not in peers:
            raise ValueError(f"{self_id} is not one of the peers {list(peers)}")
        self.id = self_id
        self.peers = tuple(peers)
        self.others = tuple(p for p in self.peers if p != self_id)
        self.group = group
        self.log = log
        self.config = config or RaftConfig()
        self.rng = rng or random.Random()
        st = state or PersistentState()
        self.term = st.term
        self.voted_for = st.voted_for
        # Entries before the log's first were deleted by retention, which keeps uncommitted ones.
        self.commit_index = max(min(st.commit_index, log.end_index), log.begin_index - 1)
        self.durable = log.end_index  # what recovery found is on disk
        self.role = Role.FOLLOWER
        self.leader_id: str | None = None
        self.majority = len(self.peers) // 2 + 1
        self._votes: set[str] = set()
        self._pre_votes: set[str] | None = None  # a pre-vote in progress: who said yes
        self._leader_contact = -(1 << 62)  # when a leader of ours was last heard from
        self._progress: dict[str, _Progress] = {}
        self._eager_peers: list[str] = []  # leader with lazy_push_ms: who gets new entries at once
        self._pending_acks: list[_PendingAck] = []
        self._matched_end = -1  # follower: our log up to here equals the leader's in `_matched_term`
        self._matched_term = -1
        self._leader_since = 0
        self._transfer_to: str | None = None
        self._transfer_deadline = 0
        self._heartbeat_due = 0
        self._election_due = now_ms + self._election_timeout()

    # -- read-only state -----------------------------------------------------------------------

    @property
    def end_index(self) -> int:
        return self.log.end_index

    @property
    def is_leader(self) -> bool:
        return self.role is Role.LEADER

    def _end_term(self) -> int:
        end = self.log.end_index
        return -1 if end < 0 else (self.log.term_at(end) or -1)

    def _election_timeout(self) -> int:
        t = self.config.election_timeout_ms
        return t + self.rng.randrange(t)

    def _msg_base(self, to: str) -> _Base:
        return _Base(group=self.group, local_id=self.id, remote_id=to, term=self.term, leader_id=self.leader_id)

    # -- term changes ------------------------------------------------------------------------

    def _step_down(
        self, term: int, leader: str | None, now: int, out: list[Action], *, reset_timer: bool = True
    ) -> None:
        """Follow `leader` (None: unknown) in `term` (>= ours). The election timer restarts
        only for a leader: a candidate's higher term alone must not keep us from standing
        (the member with the longest log may be the only one able to win)."""
        if term > self.term:
            self.term = term
            self.voted_for = None
            out.append(PersistTerm(term, None))
            self._matched_term = -1
        changed = self.role is not Role.FOLLOWER or leader != self.leader_id
        self.role = Role.FOLLOWER
        self.leader_id = leader
        self._votes.clear()
        self._pre_votes = None
        self._progress.clear()
        self._transfer_to = None
        if reset_timer:
            self._election_due = now + self._election_timeout()
        if changed:
            out.append(BecomeFollower(self.term, leader))

    # -- events ----------------------------------------------------------------------------------

    def tick(self, now: int) -> list[Action]:
        out: list[Action] = []
        if self.role is Role.LEADER:
            if now >= self._heartbeat_due:
                self._heartbeat_due = now + self.config.heartbeat_interval_ms
                for peer in self.others:
                    out.append(Send(peer, HeartBeatRequest(**self._msg_base(peer), commit_index=self.commit_index)))
            lost = [p for p in self._progress.values() if now - p.last_ack >= self.config.election_timeout_ms]
            if (
                len(self.others) - len(lost) + 1 < self.majority
                and now - self._leader_since >= self.config.election_timeout_ms
            ):
                self._step_down(self.term, None, now, out)  # no majority hears us: let them elect
                return out
            for peer, p in self._progress.items():
                if p.inflight and now >= p.deadline:
                    p.inflight = False
                self._push(peer, p, now, out)
            if self._transfer_to is not None and now >= self._transfer_deadline:
                self._transfer_to = None
        elif now >= self._election_due:
            self._start_pre_vote(now, out)
        return out

    def next_tick_ms(self) -> int | None:
        """When ``tick`` next has anything to do, unless a message or a proposal comes first:
        a follower's or a candidate's election timer; a leader's next heartbeat or check that
        a majority still answers, when nothing is in flight or waiting to be pushed. None: a
        leader at work (pushes out, entries due, a transfer), to be ticked steadily."""
        if self.role is not Role.LEADER:
            return self._election_due
        if self._transfer_to is not None:
            return None
        end = self.log.end_index
        due = self._heartbeat_due
        for p in self._progress.values():
            if p.inflight or p.mode is not _Mode.APPEND or p.next <= end:
                return None
            # (tick may find a majority lost once a follower stays silent this long)
            due = min(due, max(p.last_ack, self._leader_since) + self.config.election_timeout_ms)
        return due

    def _start_pre_vote(self, now: int, out: list[Action]) -> None:
        """Ask whether a majority would vote for us in the next term before standing: no term
        or vote changes anywhere until they would."""
        self._election_due = now + self._election_timeout()
        self._pre_votes = {self.id}
        if len(self._pre_votes) >= self.majority:
            self._start_election(now, out)
            return
        end, end_term = self.log.end_index, self._end_term()
        for peer in self.others:
            base = self._msg_base(peer)
            base["term"] = self.term + 1
            out.append(Send(peer, VoteRequest(**base, ledger_end_index=end, ledger_end_term=end_term, pre_vote=True)))

    def _start_election(self, now: int, out: list[Action]) -> None:
        self._pre_votes = None
        self.term += 1
        self.role = Role.CANDIDATE
        self.voted_for = self.id
        self.leader_id = None
        self._votes = {self.id}
        self._matched_term = -1
        self._election_due = now + self._election_timeout()
        out.append(PersistTerm(self.term, self.id))
        out.append(BecomeCandidate(self.term))
        if len(self._votes) >= self.majority:
            self._become_leader(now, out)
            return
        end, end_term = self.log.end_index, self._end_term()
        for peer in self.others:
            out.append(Send(peer, VoteRequest(**self._msg_base(peer), ledger_end_index=end, ledger_end_term=end_term)))

    def _become_leader(self, now: int, out: list[Action]) -> None:
        self.role = Role.LEADER
        self.leader_id = self.id
        self._pre_votes = None
        self._leader_since = now
        end = self.log.end_index
        self._progress = {
            peer: _Progress(mode=_Mode.COMPARE, compare_index=end, next=end + 1, last_ack=now) for peer in self.others
        }
        self._eager_peers.clear()  # chosen afresh once they have matched (_eager)
        out.append(BecomeLeader(self.term))
        # A no-op of our term lets entries of earlier terms commit (Raft 5.4.2).
        noop = Entry(end + 1, self.term, b"")
        out.append(PersistEntries((noop,)))
        self._heartbeat_due = now
        out.extend(self.tick(now))
        self._advance_commit(out)

    def receive(self, msg: Message, now: int) -> list[Action]:
        out: list[Action] = []
        if msg.group != self.group or msg.remote_id != self.id or msg.local_id not in self.others:
            return out
        pre_vote_request = isinstance(msg, VoteRequest) and msg.pre_vote  # its term is only hoped for
        if msg.term > self.term and not pre_vote_request:
            from_leader = isinstance(msg, (HeartBeatRequest, PushEntryRequest))
            self._step_down(msg.term, msg.local_id if from_leader else None, now, out, reset_timer=from_leader)
        if isinstance(msg, VoteRequest):
            if msg.pre_vote:
                self._on_pre_vote_request(msg, now, out)
            else:
                self._on_vote_request(msg, now, out)
        elif isinstance(msg, VoteResponse) and msg.pre_vote:
            votes = self._pre_votes
            if votes is not None and msg.term <= self.term and msg.vote_result is VoteResult.ACCEPT:
                votes.add(msg.local_id)
                if len(votes) >= self.majority and self.role is not Role.LEADER:
                    self._start_election(now, out)
        elif isinstance(msg, VoteResponse):
            if self.role is Role.CANDIDATE and msg.term == self.term and msg.vote_result is VoteResult.ACCEPT:
                self._votes.add(msg.local_id)
                if len(self._votes) >= self.majority:
                    self._become_leader(now, out)
        elif isinstance(msg, HeartBeatRequest):
            if self._accept_leader(msg, now, out):
                self._follow_commit(msg.commit_index, out)
                out.append(Send(msg.local_id, HeartBeatResponse(**self._msg_base(msg.local_id))))
        elif isinstance(msg, HeartBeatResponse):
            p = self._progress.get(msg.local_id)
            if self.role is Role.LEADER and msg.term == self.term and p is not None and msg.code == Code.SUCCESS:
                p.last_ack = now
        elif isinstance(msg, PushEntryRequest):
            if self._accept_leader(msg, now, out):
                self._on_push(msg, out)
        elif isinstance(msg, PushEntryResponse):
            self._on_push_response(msg, now, out)
        elif isinstance(msg, LeadershipTransferRequest):
            if msg.term == self.term and msg.local_id == self.leader_id and self.role is Role.FOLLOWER:
                self._start_election(now, out)
        return out

    def _accept_leader(self, msg: HeartBeatRequest | PushEntryRequest, now: int, out: list[Action]) -> bool:
        """A request from a leader: answer EXPIRED_TERM if its term is old, else follow it."""
        if msg.term < self.term:
            response: Message
            if isinstance(msg, HeartBeatRequest):
                response = HeartBeatResponse(**self._msg_base(msg.local_id), code=Code.EXPIRED_TERM)
            else:
                response = PushEntryResponse(
                    **self._msg_base(msg.local_id), code=Code.EXPIRED_TERM, type=msg.type, end_index=self.log.end_index
                )
            out.append(Send(msg.local_id, response))
            return False
        if self.role is Role.LEADER:  # two leaders of one term cannot happen; never follow one
            return False
        if self.role is Role.CANDIDATE or self.leader_id != msg.local_id:
            self._step_down(msg.term, msg.local_id, now, out)
        self._election_due = now + self._election_timeout()
        self._leader_contact = now
        self._pre_votes = None
        return True

    def _on_pre_vote_request(self, msg: VoteRequest, now: int, out: list[Action]) -> None:
        """Would we vote for ``msg``'s sender in ``msg.term``? Not while a leader is alive to
        us (we lead, or heard from ours within the election timeout); nothing changes here."""
        end, end_term = self.log.end_index, self._end_term()
        if msg.term <= self.term:
            result = VoteResult.REJECT_EXPIRED_VOTE_TERM
        elif self.role is Role.LEADER or now - self._leader_contact < self.config.election_timeout_ms:
            result = VoteResult.REJECT_ALREADY_HAS_LEADER
        elif msg.ledger_end_term < end_term:
            result = VoteResult.REJECT_EXPIRED_LEDGER_TERM
        elif msg.ledger_end_term == end_term and msg.ledger_end_index < end:
            result = VoteResult.REJECT_SMALL_LEDGER_END_INDEX
        else:
            result = VoteResult.ACCEPT
        response = VoteResponse(**self._msg_base(msg.local_id), vote_result=result, pre_vote=True)
        out.append(Send(msg.local_id, response))
        self._stand_for_a_shorter_log(result, now, out)

    def _stand_for_a_shorter_log(self, refused: VoteResult, now: int, out: list[Action]) -> None:
        """A member whose log is too short to win asked for our vote and no leader is alive to
        us: stand now rather than at our own timeout, since only a log like ours can win (a
        lazy follower, lazy_push_ms, is the one whose timer often fires first)."""
        if (
            refused in (VoteResult.REJECT_EXPIRED_LEDGER_TERM, VoteResult.REJECT_SMALL_LEDGER_END_INDEX)
            and self.role is Role.FOLLOWER
            and self._pre_votes is None
            and now - self._leader_contact >= self.config.election_timeout_ms
        ):
            self._start_pre_vote(now, out)

    def _on_vote_request(self, msg: VoteRequest, now: int, out: list[Action]) -> None:
        result = VoteResult.ACCEPT
        end, end_term = self.log.end_index, self._end_term()
        if msg.term < self.term:
            result = VoteResult.REJECT_EXPIRED_VOTE_TERM
        elif self.voted_for not in (None, msg.local_id):
            result = VoteResult.REJECT_ALREADY_VOTED
        elif msg.ledger_end_term < end_term:
            result = VoteResult.REJECT_EXPIRED_LEDGER_TERM
        elif msg.ledger_end_term == end_term and msg.ledger_end_index < end:
            result = VoteResult.REJECT_SMALL_LEDGER_END_INDEX
        if result is VoteResult.ACCEPT and self.voted_for is None:
            self.voted_for = msg.local_id
            out.append(PersistTerm(self.term, msg.local_id))  # durable before the answer leaves
            self._election_due = now + self._election_timeout()
        out.append(Send(msg.local_id, VoteResponse(**self._msg_base(msg.local_id), vote_result=result)))
        self._stand_for_a_shorter_log(result, now, out)

    # -- follower: pushes ----------------------------------------------------------------------

    def _respond(self, msg: PushEntryRequest, code: int, index: int, out: list[Action]) -> None:
        out.append(
            Send(
                msg.local_id,
                PushEntryResponse(
                    **self._msg_base(msg.local_id), code=code, type=msg.type, index=index,
                    end_index=self.log.end_index, end_term=self._end_term(),
                ),
            )
        )  # fmt: skip

    def _on_push(self, msg: PushEntryRequest, out: list[Action]) -> None:
        log = self.log
        if msg.type is PushType.APPEND:
            entries = msg.entries
            if not entries:
                return
            last = entries[-1]
            first = entries[0].index
            if self._matched_term != self.term or first > self._matched_end + 1:
                self._respond(msg, Code.INCONSISTENT_STATE, last.index, out)
                return
            # Raft's rule: skip what we hold already, cut at the first entry whose term differs
            # (never a committed one: those equal the leader's), append the rest. A repeated or
            # reordered push therefore never cuts anything.
            cut: int | None = None
            fresh = entries
            for k, e in enumerate(entries):
                if e.index > log.end_index:
                    fresh = entries[k:]
                    break
                if not self._holds(e):  # a committed entry our retention deleted counts as held
                    if e.index <= self.commit_index:
                        self._respond(msg, Code.INCONSISTENT_STATE, last.index, out)
                        return
                    cut = e.index - 1
                    fresh = entries[k:]
                    break
            else:
                fresh = ()
            if cut is not None:
                self._cut_after(cut)
            if fresh or cut is not None:
                out.append(PersistEntries(tuple(fresh), truncate_after=cut))
            self._matched_end = max(self._matched_end, last.index)
            self._ack_when_durable(last.index, msg, out)
            self._follow_commit(msg.commit_index, out)
        elif msg.type is PushType.COMPARE:
            e = msg.entries[0] if msg.entries else Entry(-1, -1)
            self._respond(msg, Code.SUCCESS if self._holds(e) else Code.INCONSISTENT_STATE, e.index, out)
        elif msg.type is PushType.TRUNCATE:
            e = msg.entries[0] if msg.entries else Entry(-1, -1)
            if not self._holds(e):
                if msg.rebuild and e.index > self.commit_index:
                    self._rebuild(msg, e, out)
                else:
                    self._respond(msg, Code.INCONSISTENT_STATE, e.index, out)
                return
            # Entries up to our commit index, and those verified in this term, equal the leader's:
            # a TRUNCATE below them (stale, or from a leader that walked its compare too far)
            # cuts nothing, and the APPENDs that follow skip what we hold.
            agreed = max(self.commit_index, self._matched_end if self._matched_term == self.term else -1)
            if e.index >= agreed and log.end_index > e.index:
                self._cut_after(e.index)
                out.append(PersistEntries((), truncate_after=e.index))
            self._matched_end = max(e.index, agreed)
            self._matched_term = self.term
            self._respond(msg, Code.SUCCESS, e.index, out)
            self._follow_commit(msg.commit_index, out)
        elif msg.type is PushType.COMMIT:
            self._follow_commit(msg.commit_index, out)

    def _holds(self, e: Entry) -> bool:
        """Whether our log agrees with the leader's ``e``. An index before our first entry
        (deleted by retention) agrees when committed: committed entries are the leader's."""
        if e.index < 0:
            return True
        term = self.log.term_at(e.index)
        if term is None:
            return e.index < self.log.begin_index and e.index <= self.commit_index
        return term == e.term

    def _rebuild(self, msg: PushEntryRequest, e: Entry, out: list[Action]) -> None:
        """Start our log over with the leader's first entry ``e``: we lack it (or hold another
        one there, never committed), and everything the leader had before it is committed.
        Nothing we drop was acked as ours alone: an entry at or after ``e.index`` that we
        acked would equal the leader's, and so would ``e``."""
        self._cut_after(e.index - 1)
        out.append(PersistEntries((e,), rebuild=True))
        self._matched_end = e.index
        self._matched_term = self.term
        if self.commit_index < e.index - 1:
            self.commit_index = e.index - 1
            out.append(Commit(self.commit_index))
        self._respond(msg, Code.SUCCESS, e.index, out)
        self._follow_commit(msg.commit_index, out)

    def _cut_after(self, index: int) -> None:
        self.durable = min(self.durable, index)
        self._pending_acks = [a for a in self._pending_acks if a.index <= index]

    def _ack_when_durable(self, index: int, msg: PushEntryRequest, out: list[Action]) -> None:
        if index <= self.durable:
            self._respond(msg, Code.SUCCESS, index, out)
        else:
            self._pending_acks.append(_PendingAck(index, msg.local_id, msg.term))

    def _follow_commit(self, leader_commit: int, out: list[Action]) -> None:
        if self._matched_term != self.term:
            return
        target = min(leader_commit, self._matched_end)
        if target > self.commit_index:
            self.commit_index = target
            out.append(Commit(target))

    # -- durability ----------------------------------------------------------------------------

    def persisted(self, upto: int, now: int) -> list[Action]:
        """Everything up to `upto` that the log holds is durable now."""
        out: list[Action] = []
        self.durable = min(upto, self.log.end_index)
        if self.role is Role.LEADER:
            self._advance_commit(out)
            return out
        ready = [a for a in self._pending_acks if a.index <= self.durable]
        self._pending_acks = [a for a in self._pending_acks if a.index > self.durable]
        for a in ready:
            if a.term == self.term and a.to == self.leader_id:
                out.append(
                    Send(
                        a.to,
                        PushEntryResponse(
                            **self._msg_base(a.to), type=PushType.APPEND, index=a.index,
                            end_index=self.log.end_index, end_term=self._end_term(),
                        ),
                    )
                )  # fmt: skip
        return out

    # -- leader: replication -----------------------------------------------------------------

    def propose(self, body: bytes, now: int) -> tuple[int, list[Action]]:
        """Append `body` as a new entry; returns its index and the actions.

        Raises:
            NotLeader: this member is not the leader (or hands leadership over).
        """
        if self.role is not Role.LEADER or self._transfer_to is not None:
            raise NotLeader(self.leader_id if self.role is not Role.LEADER else None)
        entry = Entry(self.log.end_index + 1, self.term, body)
        out: list[Action] = [PersistEntries((entry,))]
        for peer, p in self._progress.items():
            self._push(peer, p, now, out)
        return entry.index, out

    def appended(self, now: int) -> list[Action]:
        """The driver has applied a PersistEntries to the log (not necessarily durably): a
        leader pushes the new entries now rather than at its next tick or ack. ``propose``
        cannot, since the log does not hold the entry until the driver appends it."""
        out: list[Action] = []
        if self.role is Role.LEADER:
            for peer, p in self._progress.items():
                self._push(peer, p, now, out)
        return out

    def _push(self, peer: str, p: _Progress, now: int, out: list[Action]) -> None:
        """Send `peer` the next push if none is in flight."""
        if p.inflight:
            return
        base = self._msg_base(peer)
        log = self.log
        begin = log.begin_index
        if begin > 0 and (
            (p.mode is _Mode.COMPARE and min(p.compare_index, log.end_index) < begin)
            or (p.mode is _Mode.APPEND and p.next < begin)
        ):
            p.mode, p.rebuild = _Mode.TRUNCATE, True  # it needs entries we no longer hold
        if p.mode is _Mode.TRUNCATE and p.rebuild:
            first = log.entry_at(begin)
            if first is None:
                return
            msg = PushEntryRequest(
                **base, type=PushType.TRUNCATE, commit_index=self.commit_index, entries=(first,), rebuild=True
            )
            p.sent_last = begin
        elif p.mode is _Mode.COMPARE:
            i = min(p.compare_index, log.end_index)
            term = log.term_at(i) if i >= 0 else -1
            entry = Entry(i, term if term is not None else -1)
            msg = PushEntryRequest(**base, type=PushType.COMPARE, commit_index=self.commit_index, entries=(entry,))
            p.sent_last = i
        elif p.mode is _Mode.TRUNCATE:
            # Never below what the follower acked (COMPARE checked it still holds that): a late
            # INCONSISTENT answer must not make a follower that restarted since, and forgot
            # its matched point, cut entries it acked as durable.
            i = max(p.compare_index, p.match)
            term = log.term_at(i) if i >= 0 else -1
            entry = Entry(i, term if term is not None else -1)
            msg = PushEntryRequest(**base, type=PushType.TRUNCATE, commit_index=self.commit_index, entries=(entry,))
            p.sent_last = i
        else:
            if p.next > log.end_index:
                return  # nothing new: heartbeats carry the commit index meanwhile
            lazy = self.config.lazy_push_ms
            if lazy > 0 and p.match >= 0 and not self._eager(peer, now):
                if now < p.lazy_due and not p.more:
                    return  # its next push gathers what comes meanwhile (one catching up goes on)
                p.lazy_due = now + lazy
            batch: list[Entry] = []
            size = 0
            i = p.next
            while i <= log.end_index and len(batch) < self.config.max_batch and size < self.config.max_batch_bytes:
                e = log.entry_at(i)
                if e is None:
                    break
                batch.append(e)
                size += len(e.body)
                i += 1
            if not batch:
                return
            msg = PushEntryRequest(**base, type=PushType.APPEND, commit_index=self.commit_index, entries=tuple(batch))
            p.sent_last = batch[-1].index
            p.more = i <= log.end_index
        p.inflight = True
        p.deadline = now + self.config.push_timeout_ms
        out.append(Send(peer, msg))

    def _eager(self, peer: str, now: int) -> bool:
        """Whether ``peer`` gets every new entry at once: one of the majority - 1 followers a
        commit waits for, chosen furthest along (match, then last heard from) when this
        leader takes over, and kept while they keep up, so that the lazy ones stay lazy. An
        eager follower whose push has gone unanswered, or whose match has stayed below the
        commit index (commits go on without it: it restarted, it catches up), for
        ``eager_stall_ms`` gives its place to the lazy one furthest along."""
        progress = self._progress
        eager = self._eager_peers
        if len(eager) != self.majority - 1 or not all(e in progress for e in eager):
            eager[:] = sorted(progress, key=self._rank, reverse=True)[: self.majority - 1]
        for i, e in enumerate(eager):
            q = progress[e]
            if q.match >= self.commit_index:
                q.behind_since = -1
            elif q.behind_since < 0:
                q.behind_since = now
            if self._stalled(q, now) or (q.behind_since >= 0 and now - q.behind_since > self.config.eager_stall_ms):
                lazy = [x for x in progress if x not in eager and not self._stalled(progress[x], now)]
                if lazy:
                    eager[i] = max(lazy, key=self._rank)
                    progress[eager[i]].behind_since = -1
        return peer in eager

    def _rank(self, peer: str) -> tuple[int, int, str]:
        p = self._progress[peer]
        return (p.match, p.last_ack, peer)

    def _stalled(self, p: _Progress, now: int) -> bool:
        """Its push has gone unanswered for longer than eager_stall_ms."""
        c = self.config
        return p.inflight and now - (p.deadline - c.push_timeout_ms) > c.eager_stall_ms

    def _on_push_response(self, msg: PushEntryResponse, now: int, out: list[Action]) -> None:
        p = self._progress.get(msg.local_id)
        if self.role is not Role.LEADER or msg.term != self.term or p is None or msg.code == Code.EXPIRED_TERM:
            return
        p.last_ack = now
        current = msg.type.value == p.mode.value and msg.index == p.sent_last
        if msg.type is PushType.APPEND and msg.code == Code.SUCCESS:
            if msg.index > p.match:
                p.match = msg.index
                self._advance_commit(out)
            if current:
                p.inflight = False
                p.next = max(p.next, msg.index + 1)
        elif not current:
            return  # a late answer to an earlier push
        else:
            p.inflight = False
            if msg.type is PushType.APPEND:  # INCONSISTENT: find where we agree
                # From the follower's end down: the first match is the highest, so a TRUNCATE
                # only ever cuts entries that differ from ours (and were never acked to us).
                p.mode = _Mode.COMPARE
                p.compare_index = min(msg.end_index, self.log.end_index)
            elif msg.type is PushType.COMPARE:
                if msg.code == Code.SUCCESS and p.compare_index < p.match:
                    # It agrees below what it acked. A late answer may have sent us down here:
                    # check that it still holds what it acked before truncating anything.
                    p.compare_index = p.match
                elif msg.code == Code.SUCCESS:
                    p.mode = _Mode.TRUNCATE
                else:
                    if p.compare_index <= p.match:  # it lost what it acked (a replaced disk)
                        p.match = -1
                    below = p.compare_index - 1
                    p.compare_index = max(-1, min(msg.end_index, below))
            elif msg.type is PushType.TRUNCATE:
                p.rebuild = False
                if msg.code == Code.SUCCESS:
                    # The follower's prefix equals ours now, but may not be durable there yet:
                    # it counts once an APPEND ack (sent after its fsync) covers it. With nothing
                    # after the prefix the last entry goes again (the follower holds it and acks
                    # it once durable), or the prefix would wait for the next proposal to count.
                    p.mode = _Mode.APPEND
                    p.next = msg.index + 1
                    if p.next > self.log.end_index and p.match < msg.index:
                        p.next = msg.index
                else:
                    p.mode = _Mode.COMPARE
                    p.compare_index = max(-1, min(msg.end_index, p.compare_index - 1))
        self._push(msg.local_id, p, now, out)
        if self._transfer_to == msg.local_id and p.match >= self.log.end_index:
            out.append(Send(msg.local_id, LeadershipTransferRequest(**self._msg_base(msg.local_id))))

    def _advance_commit(self, out: list[Action]) -> None:
        if self.role is not Role.LEADER:
            return
        matches = sorted([self.durable, *(p.match for p in self._progress.values())], reverse=True)
        n = matches[self.majority - 1]
        if n > self.commit_index and self.log.term_at(n) == self.term:
            self.commit_index = n
            out.append(Commit(n))

    def caught_up(self, peer: str) -> bool:
        """Whether ``peer`` holds this leader's whole log (a transfer to it can start now)."""
        p = self._progress.get(peer)
        return self.role is Role.LEADER and p is not None and p.match >= self.log.end_index

    def transfer_leadership(self, to: str, now: int) -> list[Action]:
        """Hand leadership to `to` once it holds our whole log (proposals stop meanwhile, for
        at most an election timeout)."""
        out: list[Action] = []
        if self.role is not Role.LEADER or to not in self._progress:
            return out
        self._transfer_to = to
        self._transfer_deadline = now + self.config.election_timeout_ms
        if self._progress[to].match >= self.log.end_index:
            out.append(Send(to, LeadershipTransferRequest(**self._msg_base(to))))
        return out


__all__ = [
    "Action",
    "BecomeCandidate",
    "BecomeFollower",
    "BecomeLeader",
    "Commit",
    "LogView",
    "NotLeader",
    "PersistEntries",
    "PersistTerm",
    "PersistentState",
    "RaftConfig",
    "RaftNode",
    "Role",
    "Send",
]
