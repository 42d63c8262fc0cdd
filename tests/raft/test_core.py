"""RaftNode's rules, event by event (no network, no clock: the test is the driver)."""

from __future__ import annotations

import dataclasses
import json
import random

import pytest

from rmq.raft.core import (
    BecomeLeader,
    Commit,
    NotLeader,
    PersistEntries,
    PersistentState,
    PersistTerm,
    RaftConfig,
    RaftNode,
    Role,
    Send,
)
from rmq.raft.messages import (
    Code,
    Entry,
    HeartBeatRequest,
    LeadershipTransferRequest,
    PushEntryRequest,
    PushEntryResponse,
    PushType,
    VoteRequest,
    VoteResponse,
    VoteResult,
    encode_message,
)

from .sim import MemLog

PEERS = ("n0", "n1", "n2")
CFG = RaftConfig(election_timeout_ms=300, heartbeat_interval_ms=100, push_timeout_ms=100)


def node(
    self_id: str = "n0", entries: list[Entry] | None = None, term: int = 0, **kw: object
) -> tuple[RaftNode, MemLog]:
    log = MemLog(entries)
    config = kw.pop("config", CFG)
    n = RaftNode(self_id, PEERS, log, group="g", config=config, state=PersistentState(term, None, -1),
                 rng=random.Random(1), **kw)  # type: ignore[arg-type]  # fmt: skip
    return n, log


def run(log: MemLog, actions: list[object]) -> list[object]:
    """Apply PersistEntries to the log as a driver would; return the actions."""
    for a in actions:
        if isinstance(a, PersistEntries):
            log.apply(a)
    return actions


def sends(actions: list[object], kind: type) -> list[Send]:
    return [a for a in actions if isinstance(a, Send) and isinstance(a.message, kind)]


def elect(n: RaftNode, log: MemLog, now: int = 1000) -> list[object]:
    pre = run(log, n.tick(now))  # first a pre-vote: nobody's term moves yet
    assert n.role is Role.FOLLOWER and not [a for a in pre if isinstance(a, PersistTerm)]
    ask = sends(pre, VoteRequest)[0].message
    assert ask.pre_vote and ask.term == n.term + 1
    yes = VoteResponse("g", ask.remote_id, n.id, n.term, vote_result=VoteResult.ACCEPT, pre_vote=True)
    actions = run(log, n.receive(yes, now))
    assert n.role is Role.CANDIDATE
    assert PersistTerm(n.term, n.id) in actions  # the vote for itself is durable before asking
    vote = sends(actions, VoteRequest)[0].message
    out = run(log, n.receive(VoteResponse("g", vote.remote_id, n.id, n.term, vote_result=VoteResult.ACCEPT), now))
    assert n.role is Role.LEADER
    return out


def test_election_restriction_refuses_a_shorter_or_older_log() -> None:
    voter, _ = node("n1", [Entry(0, 1), Entry(1, 2)], term=2)
    older = VoteRequest("g", "n0", "n1", 3, ledger_end_index=5, ledger_end_term=1)
    out = voter.receive(older, 10)
    assert sends(out, VoteResponse)[0].message.vote_result is VoteResult.REJECT_EXPIRED_LEDGER_TERM
    shorter = VoteRequest("g", "n2", "n1", 3, ledger_end_index=0, ledger_end_term=2)
    out = voter.receive(shorter, 10)
    assert sends(out, VoteResponse)[0].message.vote_result is VoteResult.REJECT_SMALL_LEDGER_END_INDEX
    ok = VoteRequest("g", "n2", "n1", 3, ledger_end_index=1, ledger_end_term=2)
    out = voter.receive(ok, 10)
    assert PersistTerm(3, "n2") in out and out.index(PersistTerm(3, "n2")) < out.index(sends(out, VoteResponse)[0])
    again = VoteRequest("g", "n0", "n1", 3, ledger_end_index=9, ledger_end_term=9)
    assert sends(voter.receive(again, 11), VoteResponse)[0].message.vote_result is VoteResult.REJECT_ALREADY_VOTED


def test_commit_needs_a_durable_majority_and_an_entry_of_the_leaders_term() -> None:
    # Raft's Figure 8: an entry of an older term is not committed by counting replicas.
    leader, log = node("n0", [Entry(0, 1), Entry(1, 2)], term=3)
    out = elect(leader, log)
    noop_index = log.end_index
    assert log.term_at(noop_index) == leader.term == 4
    compare = sends(out, PushEntryRequest)
    assert {c.message.type for c in compare} == {PushType.COMPARE}
    # n1 holds index 1 (term 2) durably: index 1 still must not commit on its own
    r = PushEntryResponse("g", "n1", "n0", 4, type=PushType.APPEND, index=1, end_index=1, end_term=2)
    assert not [a for a in leader.receive(r, 1001) if isinstance(a, Commit)]
    assert leader.commit_index == -1
    # the no-op of term 4, durable on the leader and on n1: now both commit
    leader.persisted(noop_index, 1002)
    r = PushEntryResponse("g", "n1", "n0", 4, type=PushType.APPEND, index=noop_index, end_index=noop_index)
    assert Commit(noop_index) in leader.receive(r, 1003)


def test_a_follower_never_truncates_below_its_commit_or_what_it_acked() -> None:
    follower, log = node("n1", [Entry(i, 1, b"x") for i in range(5)], term=2)
    hb = HeartBeatRequest("g", "n0", "n1", 2, leader_id="n0")
    follower.receive(hb, 10)
    trunc = PushEntryRequest("g", "n0", "n1", 2, leader_id="n0", type=PushType.TRUNCATE, entries=(Entry(2, 1),))
    assert sends(run(log, follower.receive(trunc, 11)), PushEntryResponse)[0].message.code == Code.SUCCESS
    assert log.end_index == 2
    append = PushEntryRequest(
        "g", "n0", "n1", 2, leader_id="n0", type=PushType.APPEND, commit_index=3,
        entries=(Entry(3, 2, b"a"), Entry(4, 2, b"b")),
    )  # fmt: skip
    out = run(log, follower.receive(append, 12))
    assert Commit(3) in out and follower.commit_index == 3
    assert not sends(out, PushEntryResponse)  # acked only once durable
    acks = sends(follower.persisted(4, 13), PushEntryResponse)
    assert acks and acks[0].message.index == 4
    late = PushEntryRequest("g", "n0", "n1", 2, leader_id="n0", type=PushType.TRUNCATE, entries=(Entry(2, 1),))
    out = run(log, follower.receive(late, 14))  # a stale TRUNCATE, reordered behind the appends
    assert not [a for a in out if isinstance(a, PersistEntries)]  # cuts nothing it acked
    assert log.end_index == 4
    again = PushEntryRequest(
        "g", "n0", "n1", 2, leader_id="n0", type=PushType.APPEND, commit_index=3,
        entries=(Entry(3, 2, b"a"), Entry(4, 2, b"b"), Entry(5, 2, b"c")),
    )  # fmt: skip
    out = run(log, follower.receive(again, 15))  # overlaps what it holds: only the new entry lands
    assert [a.entries for a in out if isinstance(a, PersistEntries)] == [(Entry(5, 2, b"c"),)]
    assert log.end_index == 5


def test_a_truncate_below_the_verified_prefix_still_lets_the_leader_through() -> None:
    """A leader whose compare walked below what the follower verified this term (found by a
    simulation sweep: it used to be refused forever, and the leader walked down to -1)."""
    follower, log = node("n1", [Entry(i, 1, b"x") for i in range(3)], term=2)
    follower.receive(HeartBeatRequest("g", "n0", "n1", 2, leader_id="n0"), 10)
    trunc = PushEntryRequest("g", "n0", "n1", 2, leader_id="n0", type=PushType.TRUNCATE, entries=(Entry(2, 1),))
    run(log, follower.receive(trunc, 11))
    batch = tuple(Entry(i, 2, b"y") for i in range(3, 14))
    run(log, follower.receive(PushEntryRequest("g", "n0", "n1", 2, leader_id="n0", type=PushType.APPEND,
                                               commit_index=12, entries=batch), 12))  # fmt: skip
    follower.persisted(13, 13)
    assert follower.commit_index == 12
    trunc9 = PushEntryRequest("g", "n0", "n1", 2, leader_id="n0", type=PushType.TRUNCATE, entries=(Entry(9, 2),))
    out = run(log, follower.receive(trunc9, 14))
    assert sends(out, PushEntryResponse)[0].message.code == Code.SUCCESS
    assert log.end_index == 13  # nothing cut
    tail = PushEntryRequest("g", "n0", "n1", 2, leader_id="n0", type=PushType.APPEND, commit_index=14,
                            entries=(*batch[7:], Entry(14, 2, b"z")))  # fmt: skip
    out = run(log, follower.receive(tail, 15))
    assert log.end_index == 14
    assert [a.message.code for a in sends(follower.persisted(14, 16), PushEntryResponse)] == [Code.SUCCESS]


def test_a_leader_that_hears_no_majority_steps_down() -> None:
    leader, log = node()
    elect(leader, log, now=1000)
    t = 1000
    while leader.is_leader and t < 5000:
        t += 50
        run(log, leader.tick(t))
    assert leader.role is Role.FOLLOWER and leader.leader_id is None
    assert t - 1000 <= CFG.election_timeout_ms + 100
    with pytest.raises(NotLeader):
        leader.propose(b"late", t)


def test_an_old_leader_obeys_a_higher_term() -> None:
    leader, log = node()
    elect(leader, log)
    push = PushEntryRequest("g", "n2", "n0", leader.term + 1, leader_id="n2", type=PushType.COMMIT)
    run(log, leader.receive(push, 1100))
    assert leader.role is Role.FOLLOWER and leader.leader_id == "n2"


def caught_up_leader(cfg: RaftConfig) -> tuple[RaftNode, MemLog]:
    """n0 leads; n1 and n2 hold its log (APPEND mode, matched at its end)."""
    leader, log = node(config=cfg)
    elect(leader, log)
    end = log.end_index
    leader.persisted(end, 1001)
    for peer in ("n1", "n2"):
        leader.receive(PushEntryResponse("g", peer, "n0", leader.term, type=PushType.COMPARE, index=-1), 1002)
        leader.receive(PushEntryResponse("g", peer, "n0", leader.term, type=PushType.TRUNCATE, index=-1), 1003)
        leader.receive(PushEntryResponse("g", peer, "n0", leader.term, type=PushType.APPEND, index=end), 1004)
    return leader, log


def test_leadership_transfer() -> None:
    leader, log = caught_up_leader(CFG)
    out = leader.transfer_leadership("n2", 1005)
    transfer = sends(out, LeadershipTransferRequest)
    assert transfer and transfer[0].to == "n2"
    with pytest.raises(NotLeader):
        leader.propose(b"x", 1006)
    # the transferee stands at once, with the next term
    transferee, tlog = node("n2", list(log.entries), term=leader.term)
    transferee.receive(HeartBeatRequest("g", "n0", "n2", leader.term, leader_id="n0"), 1007)
    out = transferee.receive(transfer[0].message, 1008)
    assert transferee.role is Role.CANDIDATE and transferee.term == leader.term + 1
    assert not [a for a in out if isinstance(a, BecomeLeader)]


def test_messages_round_trip_through_json() -> None:
    from rmq.raft import messages as M

    samples = [
        M.VoteRequest("g", "n0", "n1", 3, leader_id="n0", ledger_end_index=7, ledger_end_term=2),
        M.VoteResponse("g", "n1", "n0", 3, vote_result=VoteResult.REJECT_ALREADY_VOTED),
        M.HeartBeatRequest("g", "n0", "n1", 3, leader_id="n0", commit_index=5),
        M.PushEntryRequest(
            "g",
            "n0",
            "n1",
            3,
            type=PushType.APPEND,
            commit_index=4,
            entries=(Entry(5, 3, b"\x00body"), Entry(6, 3, b"")),
        ),  # fmt: skip
        M.PushEntryRequest("g", "n0", "n1", 3, type=PushType.COMPARE, entries=(Entry(5, 3),)),
        M.PushEntryResponse(
            "g", "n1", "n0", 3, code=Code.INCONSISTENT_STATE, type=PushType.COMPARE, index=5, end_index=9
        ),
        M.LeadershipTransferRequest("g", "n0", "n2", 3, transfer_id="n0", transferee_id="n2"),
    ]
    for msg in samples:
        assert type(msg).from_json(msg.to_json()) == msg  # type: ignore[attr-defined]
        # the wire form: the same JSON, entries encoded once and reused for every follower
        for _ in range(2):
            wire = json.loads(M.encode_message(msg))
            assert wire.pop("kind") == type(msg).__name__
            assert wire == msg.to_json()  # type: ignore[attr-defined]
    assert samples[0].to_json()["ledgerEndIndex"] == 7 and samples[0].to_json()["localId"] == "n0"
    # a body that is not Base64 is refused, not decoded by skipping what does not belong
    bad = samples[3].to_json()  # type: ignore[attr-defined]
    bad["batchEntry"][0]["body"] = "AAEC\nAw=="
    with pytest.raises(ValueError):
        M.PushEntryRequest.from_json(bad)


def test_a_pre_vote_changes_no_term_and_is_refused_while_a_leader_is_heard() -> None:
    voter, _ = node("n1", [Entry(0, 1)], term=1)
    voter.receive(HeartBeatRequest("g", "n0", "n1", 1, leader_id="n0"), 10)
    ask = VoteRequest("g", "n2", "n1", 2, ledger_end_index=5, ledger_end_term=1, pre_vote=True)
    answer = sends(voter.receive(ask, 20), VoteResponse)[0].message
    assert answer.pre_vote and answer.vote_result is VoteResult.REJECT_ALREADY_HAS_LEADER
    assert (voter.term, voter.voted_for, voter.leader_id) == (1, None, "n0")
    # once the leader has been silent for an election timeout, the same question gets a yes,
    # and still nothing changes here
    answer = sends(voter.receive(ask, 10 + CFG.election_timeout_ms), VoteResponse)[0].message
    assert answer.vote_result is VoteResult.ACCEPT
    assert (voter.term, voter.voted_for) == (1, None)


def test_a_member_cut_off_from_the_group_cannot_depose_its_leader() -> None:
    # n2 was paused: its election timer ran out many times, but it only ever pre-voted, so its
    # term stayed; when it comes back, the leader's heartbeat wins it over, and no one stood.
    lonely, _ = node("n2", [Entry(0, 1)], term=1)
    for t in range(1000, 10_000, 400):
        out = lonely.tick(t)
        assert all(s.message.pre_vote for s in sends(out, VoteRequest))
    assert lonely.term == 1 and lonely.role is Role.FOLLOWER
    lonely.receive(HeartBeatRequest("g", "n0", "n2", 1, leader_id="n0"), 10_000)
    assert lonely.leader_id == "n0"
    leader, log = node("n0", [Entry(0, 1)], term=0)
    elect(leader, log)
    ask = VoteRequest("g", "n2", "n0", leader.term + 1, ledger_end_index=9, ledger_end_term=9, pre_vote=True)
    answer = sends(leader.receive(ask, 1001), VoteResponse)[0].message
    assert answer.vote_result is VoteResult.REJECT_ALREADY_HAS_LEADER and leader.is_leader


def test_a_leader_never_truncates_a_follower_below_what_it_acked() -> None:
    """A late INCONSISTENT answer (from before the follower caught up) sends the leader back
    to COMPARE; the TRUNCATE that follows must not cut entries the follower acked as durable,
    which a restarted follower would otherwise do."""
    leader, log = node("n0", [Entry(0, 1)], term=1)
    out = elect(leader, log)
    for body in (b"a", b"b", b"c"):
        run(log, leader.propose(body, 1001)[1])
    end = log.end_index

    def push_to_n1(actions: list[object]) -> PushEntryRequest:
        (s,) = [a.message for a in sends(actions, PushEntryRequest) if a.to == "n1"]
        return s

    def answer(msg: PushEntryRequest, index: int, code: int = Code.SUCCESS, end_index: int = -1) -> list[object]:
        r = PushEntryResponse("g", "n1", "n0", leader.term, code=code, type=msg.type, index=index, end_index=end_index)
        return run(log, leader.receive(r, 1002))

    compare = push_to_n1(out)
    assert compare.type is PushType.COMPARE
    truncate = push_to_n1(answer(compare, compare.entries[0].index))
    assert truncate.type is PushType.TRUNCATE
    append = push_to_n1(answer(truncate, truncate.entries[0].index))
    assert append.type is PushType.APPEND and append.entries[-1].index == end
    answer(append, end)  # n1 holds everything, durably
    run(log, leader.propose(b"d", 1003)[1])
    nxt = push_to_n1(run(log, leader.appended(1003)))
    assert nxt.type is PushType.APPEND and nxt.entries[-1].index == end + 1
    # a late answer to that push (a copy n1 got before it had caught up), and its compare
    again = push_to_n1(answer(nxt, end + 1, Code.INCONSISTENT_STATE, end_index=0))
    assert again.type is PushType.COMPARE
    check = push_to_n1(answer(again, again.entries[0].index))
    assert check.type is PushType.COMPARE and check.entries[0].index == end  # still holds it?
    cut = push_to_n1(answer(check, end))
    assert cut.type is PushType.TRUNCATE and cut.entries[0].index == end
    # n1's disk is replaced (empty): the leader must not insist on what it acked, or n1 could
    # never catch up; n1 answers as an empty log does until it is truncated to nothing
    push = cut
    for _ in range(10):
        i = push.entries[0].index
        if push.type is PushType.TRUNCATE and i == -1:
            break
        code = Code.SUCCESS if i == -1 else Code.INCONSISTENT_STATE
        push = push_to_n1(answer(push, i, code, end_index=-1))
    assert push.type is PushType.TRUNCATE and push.entries[0].index == -1


def shuttle(leader: RaftNode, llog: MemLog, follower: RaftNode, flog: MemLog, first: list[object]) -> list[object]:
    """Deliver leader <-> follower messages (the follower's writes durable at once) until
    quiet; returns every push the follower got."""
    pushes: list[object] = []
    queue = [a for a in first if isinstance(a, Send) and a.to == follower.id]
    for _ in range(100):
        if not queue:
            break
        send = queue.pop(0)
        assert isinstance(send, Send)
        if send.to == follower.id:
            pushes.append(send.message)
            out = run(flog, follower.receive(send.message, 1100))
            if any(isinstance(a, PersistEntries) for a in out):
                out += follower.persisted(flog.end_index, 1100)
            queue += [a for a in out if isinstance(a, Send)]
        else:
            queue += [a for a in run(llog, leader.receive(send.message, 1100)) if isinstance(a, Send)]
    return pushes


def test_a_follower_that_needs_deleted_entries_is_rebuilt_from_the_leaders_first() -> None:
    # The leader's retention deleted entries 0..4 (all committed); an empty member joins.
    held = [Entry(i, 1, b"m%d" % i, pos=100 * i) for i in range(5, 9)]
    leader, llog = node("n0", term=1)
    llog.entries, llog.begin_index = list(held), 5
    leader.commit_index = 8
    out = elect(leader, llog)
    out += run(llog, leader.persisted(llog.end_index, 1000))
    assert leader.commit_index == 8
    follower, flog = node("n1")
    pushes = shuttle(leader, llog, follower, flog, out)
    rebuild = [p for p in pushes if isinstance(p, PushEntryRequest) and p.rebuild]
    assert len(rebuild) == 1 and rebuild[0].type is PushType.TRUNCATE
    assert rebuild[0].entries == (held[0],) and rebuild[0].entries[0].pos == 500  # with its position
    assert flog.begin_index == 5 and flog.entries == llog.entries  # the no-op of term 2 too
    assert leader.commit_index == llog.end_index and follower.commit_index >= 8  # 9 with the next push


def test_a_follower_ahead_of_the_leaders_first_entry_is_not_rebuilt() -> None:
    # The follower holds 3..6 (its own retention deleted 0..2); the leader holds 5..8.
    leader, llog = node("n0", term=1)
    llog.entries, llog.begin_index = [Entry(i, 1, b"m%d" % i) for i in range(5, 9)], 5
    leader.commit_index = 6
    follower, flog = node("n1", term=1)
    flog.entries, flog.begin_index = [Entry(i, 1, b"m%d" % i) for i in range(3, 7)], 3
    follower.commit_index = 6
    pushes = shuttle(leader, llog, follower, flog, elect(leader, llog))
    assert not [p for p in pushes if isinstance(p, PushEntryRequest) and p.rebuild]
    assert flog.begin_index == 3 and flog.entries[2:] == llog.entries


def test_a_rebuild_never_drops_a_committed_entry_that_differs() -> None:
    # A follower whose committed entry at the leader's first index differs (cannot happen
    # with a correct leader) refuses to be rebuilt rather than lose it.
    follower, flog = node("n1", [Entry(0, 1), Entry(1, 1)], term=2)
    follower.commit_index = 1
    push = PushEntryRequest("g", "n0", "n1", 2, leader_id="n0", type=PushType.TRUNCATE, commit_index=5,
                            entries=(Entry(1, 2, b"x", pos=48),), rebuild=True)  # fmt: skip
    out = follower.receive(push, 10)
    assert not [a for a in out if isinstance(a, PersistEntries)]
    assert sends(out, PushEntryResponse)[0].message.code == Code.INCONSISTENT_STATE


def test_rebuild_and_pos_round_trip_through_json() -> None:
    push = PushEntryRequest("g", "n0", "n1", 2, type=PushType.TRUNCATE, entries=(Entry(5, 1, b"x", pos=240),),
                            rebuild=True)  # fmt: skip
    obj = json.loads(encode_message(push))
    assert obj["rebuild"] is True and obj["entry"]["pos"] == 240
    obj.pop("kind")
    assert PushEntryRequest.from_json(obj) == push
    plain = json.loads(encode_message(PushEntryRequest("g", "n0", "n1", 2, entries=(Entry(5, 1, b"x"),))))
    assert "rebuild" not in plain and "pos" not in plain["entry"]


def test_an_append_over_entries_our_retention_deleted_skips_them() -> None:
    follower, flog = node("n1", term=2)
    flog.entries, flog.begin_index = [Entry(i, 1, b"m%d" % i) for i in range(3, 7)], 3
    follower.commit_index = 6

    def push(kind: PushType, entries: tuple[Entry, ...]) -> list[object]:
        msg = PushEntryRequest("g", "n0", "n1", 2, leader_id="n0", type=kind, commit_index=6, entries=entries)
        out = run(flog, follower.receive(msg, 10))
        return out + run(flog, follower.persisted(flog.end_index, 10))

    push(PushType.TRUNCATE, (Entry(2, 1),))  # at a committed index we no longer hold: agreed
    out = push(PushType.APPEND, tuple(Entry(i, 1 if i < 7 else 2, b"m%d" % i) for i in range(2, 8)))
    acks = sends(out, PushEntryResponse)
    assert acks and all(a.message.code == Code.SUCCESS for a in acks) and acks[-1].message.index == 7
    assert (flog.begin_index, flog.end_index) == (3, 7)


def pushes_to(actions: list[object]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for a in sends(actions, PushEntryRequest):
        out.setdefault(a.to, []).extend(e.index for e in a.message.entries)
    return out


def propose(leader: RaftNode, log: MemLog, now: int) -> dict[str, list[int]]:
    """One new entry, durable on the leader; the pushes it sends at once."""
    _, actions = leader.propose(b"x", now)
    run(log, actions)
    leader.persisted(log.end_index, now)
    return pushes_to(leader.appended(now))


def ack(leader: RaftNode, peer: str, index: int, now: int) -> list[object]:
    return leader.receive(PushEntryResponse("g", peer, "n0", leader.term, type=PushType.APPEND, index=index), now)


def test_lazy_pushes_give_the_follower_a_commit_needs_every_entry_and_the_other_a_batch() -> None:
    leader, log = caught_up_leader(dataclasses.replace(CFG, lazy_push_ms=20))
    first = log.end_index + 1
    got: dict[str, list[int]] = {"n1": [], "n2": []}
    now = 1010
    for _ in range(6):  # an entry every 3 ms, each push acked 1 ms later
        out = propose(leader, log, now)
        for peer, indexes in pushes_to(leader.tick(now)).items():
            out.setdefault(peer, []).extend(indexes)
        for peer, indexes in out.items():
            got[peer] += indexes
            ack(leader, peer, indexes[-1], now + 1)
        now += 3
    eager = max(got, key=lambda p: len(got[p]))
    lazy = "n2" if eager == "n1" else "n1"
    assert got[eager] == list(range(first, first + 6))  # each entry at once
    assert leader.commit_index == first + 5
    assert 0 < len(got[lazy]) < 6  # the first at once, then nothing within 20 ms
    # what piled up reaches the lazy one in one push once its interval has passed
    assert pushes_to(leader.tick(now + 20))[lazy] == list(range(got[lazy][-1] + 1, first + 6))


def test_a_lazy_follower_takes_over_from_an_eager_one_that_stopped_answering() -> None:
    leader, log = caught_up_leader(dataclasses.replace(CFG, lazy_push_ms=20))
    out = propose(leader, log, 1010)
    assert set(out) == {"n1", "n2"}  # the lazy one's first push is due at once
    eager = "n1" if leader._eager("n1", 1010) else "n2"
    lazy = "n2" if eager == "n1" else "n1"
    ack(leader, lazy, log.end_index, 1011)  # the eager one never answers
    # meanwhile commits go on at the lazy one's pace
    assert lazy not in propose(leader, log, 1015)
    assert pushes_to(leader.tick(1031)) == {lazy: [log.end_index]}
    assert Commit(log.end_index) in ack(leader, lazy, log.end_index, 1032)
    # eager_stall_ms (100) after the eager one's unanswered push, the other takes its place
    assert lazy in propose(leader, log, 1010 + 100 + 1)


def test_a_long_lazy_interval_does_not_lengthen_the_stall_before_a_swap() -> None:
    leader, log = caught_up_leader(dataclasses.replace(CFG, lazy_push_ms=400, eager_stall_ms=50))
    propose(leader, log, 1010)
    eager = "n1" if leader._eager("n1", 1010) else "n2"
    lazy = "n2" if eager == "n1" else "n1"
    ack(leader, lazy, log.end_index, 1011)  # the eager one never answers
    assert lazy not in propose(leader, log, 1050)  # not yet: within eager_stall_ms
    # a stall, long before a lazy interval has passed: what the lazy one lacks goes at once
    assert pushes_to(leader.tick(1061)) == {lazy: [log.end_index]}
    assert leader._eager(lazy, 1061)


def test_a_member_with_a_longer_log_stands_when_a_shorter_one_asks_for_its_vote() -> None:
    # A lazy follower's timer may fire first; the member only it can elect stands at once.
    voter, _ = node("n1", [Entry(0, 1), Entry(1, 1), Entry(2, 1)], term=1)
    ask = VoteRequest("g", "n2", "n1", 2, ledger_end_index=1, ledger_end_term=1, pre_vote=True)
    out = voter.receive(ask, 10_000)  # no leader heard from for longer than the timeout
    assert sends(out, VoteResponse)[0].message.vote_result is VoteResult.REJECT_SMALL_LEDGER_END_INDEX
    mine = [a.message for a in sends(out, VoteRequest)]
    assert mine and all(m.pre_vote and m.ledger_end_index == 2 for m in mine)
    # while a leader is alive to it, it neither grants nor stands
    follower, _ = node("n1", [Entry(0, 1), Entry(1, 1), Entry(2, 1)], term=1)
    follower.receive(HeartBeatRequest("g", "n0", "n1", 1, leader_id="n0"), 10_000)
    out = follower.receive(ask, 10_100)
    assert not sends(out, VoteRequest)


def test_a_lazy_follower_that_catches_up_is_not_held_back() -> None:
    leader, log = caught_up_leader(dataclasses.replace(CFG, lazy_push_ms=20, max_batch=2))
    eager = "n1" if leader._eager("n1", 1010) else "n2"
    lazy = "n2" if eager == "n1" else "n1"
    for i in range(6):
        for peer, indexes in propose(leader, log, 1010 + i).items():
            ack(leader, peer, indexes[-1], 1010 + i)  # (the lazy one's first push is due at once)
    # the lazy one's pushes are cut at two entries; each ack brings the next at once
    got = pushes_to(leader.tick(1030)).get(lazy, [])
    while got and got[-1] < log.end_index:
        out = ack(leader, lazy, got[-1], 1031)
        nxt = pushes_to(out).get(lazy, [])
        assert nxt and nxt[0] == got[-1] + 1
        got = nxt
    assert got and got[-1] == log.end_index


def test_next_tick_is_the_election_timer_for_a_follower_and_none_for_a_leader_at_work() -> None:
    follower, _ = node("n1", term=1)
    follower.receive(HeartBeatRequest("g", "n0", "n1", 1, leader_id="n0"), 5000)
    due = follower.next_tick_ms()
    assert due is not None and 5000 + CFG.election_timeout_ms <= due < 5000 + 2 * CFG.election_timeout_ms
    assert follower.tick(due - 1) == []  # nothing to do before it
    assert sends(follower.tick(due), VoteRequest)  # a pre-vote at it

    leader, log = caught_up_leader(CFG)
    idle = leader.next_tick_ms()  # nothing in flight: its next heartbeat, or a check for silence
    assert idle is not None and idle <= 1004 + CFG.heartbeat_interval_ms
    _, actions = leader.propose(b"x", 1010)
    run(log, actions)
    leader.appended(1010)
    assert leader.next_tick_ms() is None  # pushes out: ticked steadily
    for peer in ("n1", "n2"):
        ack(leader, peer, log.end_index, 1011)
    assert leader.next_tick_ms() is not None


def test_a_follower_matched_at_the_leaders_last_entry_is_still_asked_to_ack_it() -> None:
    """A follower found by COMPARE and TRUNCATE to hold the leader's whole log (the no-op
    included) must still ack it as durable with an APPEND: with nothing proposed after it (a
    controller's leader proposes only once its no-op is applied), the no-op would otherwise
    never commit. Found by the controller simulation (tests/controller/sim.py, seed 3327)."""
    leader, log = node("n0", [Entry(0, 1)], term=1)
    elect(leader, log)
    noop = log.end_index
    run(log, leader.persisted(noop, 1000))

    def answer(kind: PushType, index: int, code: Code = Code.SUCCESS) -> list[object]:
        r = PushEntryResponse("g", "n1", "n0", leader.term, code=code, type=kind, index=index, end_index=noop)
        return run(log, leader.receive(r, 1001))

    # n1 first matches at index 0 and is sent the no-op; its answer is lost, and a resent push is
    # refused (say n1 restarted meanwhile): the leader looks for the match point again, from n1's end
    answer(PushType.COMPARE, 0)
    answer(PushType.TRUNCATE, 0)
    assert leader._progress["n1"].sent_last == noop
    answer(PushType.APPEND, noop, Code.INCONSISTENT_STATE)
    answer(PushType.COMPARE, noop)
    out = answer(PushType.TRUNCATE, noop)
    pushed = sends(out, PushEntryRequest)
    assert [(p.message.type, [e.index for e in p.message.entries]) for p in pushed] == [(PushType.APPEND, [noop])]
    assert Commit(noop) in answer(PushType.APPEND, noop)
