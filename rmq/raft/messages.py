"""DLedger's peer messages as plain data, with their JSON shape (openmessaging/dledger protocol/*).

Every message names its ``group``, its sender (``localId``), its receiver (``remoteId``), the
sender's ``term`` and ``leaderId``, and a ``code`` (DLedgerResponseCode). Peers carry them as
RemotingCommand bodies with DLedger's request codes (VOTE 51001, HEART_BEAT 51002, PUSH 51004,
LEADERSHIP_TRANSFER 51005). Entries travel as DLedgerEntry JSON with a Base64 body.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field
from typing import Any

# SIMD Base64: a push's bodies are most of its bytes, and binascii decodes them at about
# 200 MB/s here (124 µs for a 24 KiB entry), pybase64 at several GB/s (3 µs)
from pybase64 import b64decode, b64encode

# DLedgerRequestCode
METADATA = 50000
APPEND = 50001
GET = 50002
VOTE = 51001
HEART_BEAT = 51002
PULL = 51003
PUSH = 51004
LEADERSHIP_TRANSFER = 51005

LONG_MAX = (1 << 63) - 1  # terms and indexes are Java longs, and int64 on disk


class MalformedMessage(ValueError):
    """A peer message body that is not one of ours: not JSON, an unknown kind, a missing or
    ill-typed field, a term or index outside a Java long."""


def _long(value: Any, what: str, low: int = -1) -> int:
    """A term or index field: an integer (or its decimal string) from ``low`` to LONG_MAX.
    A term past int64 would be taken in memory and then fail to persist, leaving the member
    unable to append anything."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise MalformedMessage(f"{what} is not an integer: {value!r}")
    number = int(value)
    if not low <= number <= LONG_MAX:
        raise MalformedMessage(f"{what} {number} is outside {low}..{LONG_MAX}")
    return number


def _optional_str(value: Any, what: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise MalformedMessage(f"{what} is not a string: {value!r}")
    return value


class Code(enum.IntEnum):
    """DLedgerResponseCode (the ones the core uses)."""

    SUCCESS = 200
    EXPIRED_TERM = 403
    INCONSISTENT_STATE = 406
    INCONSISTENT_LEADER = 409
    TERM_NOT_READY = 416
    TAKE_LEADERSHIP_FAILED = 418


class VoteResult(enum.Enum):
    ACCEPT = "ACCEPT"
    REJECT_ALREADY_VOTED = "REJECT_ALREADY_VOTED"
    REJECT_EXPIRED_VOTE_TERM = "REJECT_EXPIRED_VOTE_TERM"
    REJECT_EXPIRED_LEDGER_TERM = "REJECT_EXPIRED_LEDGER_TERM"
    REJECT_SMALL_LEDGER_END_INDEX = "REJECT_SMALL_LEDGER_END_INDEX"
    REJECT_ALREADY_HAS_LEADER = "REJECT_ALREADY_HAS_LEADER"


class PushType(enum.Enum):
    APPEND = "APPEND"
    COMMIT = "COMMIT"
    COMPARE = "COMPARE"
    TRUNCATE = "TRUNCATE"


@dataclass(frozen=True, slots=True)
class Entry:
    """One log entry. ``index`` counts from 0; an empty body is a leader's no-op."""

    index: int
    term: int
    body: bytes = b""
    pos: int = -1  # where the entry starts in the leader's data files (sent with a rebuild)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "index": self.index,
            "term": self.term,
            "body": b64encode(self.body).decode("ascii"),
        }
        if self.pos >= 0:
            out["pos"] = self.pos
        return out

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Entry:
        if not isinstance(obj, dict):
            raise MalformedMessage(f"an entry is not an object: {obj!r:.80}")
        # validated: a body that is not Base64 is refused (binascii.Error, a ValueError)
        # rather than decoded by skipping what does not belong
        body = b64decode(obj.get("body") or "", validate=True)
        index, term, pos = obj["index"], obj["term"], obj.get("pos", -1)
        # a push carries many entries: plain ints in range pass without a call each
        if not (
            type(index) is int
            and type(term) is int
            and type(pos) is int
            and -1 <= index <= LONG_MAX
            and -1 <= term <= LONG_MAX
            and -1 <= pos <= LONG_MAX
        ):
            index, term, pos = _long(index, "entry index"), _long(term, "entry term"), _long(pos, "entry pos")
        return cls(index, term, body, pos)


@dataclass(frozen=True, slots=True)
class Message:
    group: str
    local_id: str  # the sender
    remote_id: str  # the receiver
    term: int
    leader_id: str | None = None
    code: int = Code.SUCCESS

    def _base_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "group": self.group,
            "localId": self.local_id,
            "remoteId": self.remote_id,
            "term": self.term,
            "code": int(self.code),
        }
        if self.leader_id is not None:
            out["leaderId"] = self.leader_id
        return out

    def to_json(self) -> dict[str, Any]:
        return self._base_json()


def _base(obj: dict[str, Any]) -> dict[str, Any]:
    return {
        "group": str(obj.get("group", "")),
        "local_id": str(obj["localId"]),
        "remote_id": str(obj.get("remoteId", "")),
        "term": _long(obj["term"], "term", 0),
        "leader_id": _optional_str(obj.get("leaderId"), "leaderId"),
        "code": _long(obj.get("code", Code.SUCCESS), "code", 0),
    }


@dataclass(frozen=True, slots=True)
class VoteRequest(Message):
    ledger_end_index: int = -1
    ledger_end_term: int = -1
    # Our addition (Raft thesis 9.6): a pre-vote asks "would you vote for me in `term`?"
    # without anyone changing term or vote, so a member that was cut off cannot depose a
    # leader the others still hear from.
    pre_vote: bool = False

    def to_json(self) -> dict[str, Any]:
        out = {**self._base_json(), "ledgerEndIndex": self.ledger_end_index, "ledgerEndTerm": self.ledger_end_term}
        if self.pre_vote:
            out["preVote"] = True
        return out

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> VoteRequest:
        return cls(
            **_base(obj),
            ledger_end_index=_long(obj["ledgerEndIndex"], "ledgerEndIndex"),
            ledger_end_term=_long(obj["ledgerEndTerm"], "ledgerEndTerm"),
            pre_vote=bool(obj.get("preVote", False)),
        )


@dataclass(frozen=True, slots=True)
class VoteResponse(Message):
    vote_result: VoteResult = VoteResult.ACCEPT
    pre_vote: bool = False

    def to_json(self) -> dict[str, Any]:
        out = {**self._base_json(), "voteResult": self.vote_result.value}
        if self.pre_vote:
            out["preVote"] = True
        return out

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> VoteResponse:
        return cls(**_base(obj), vote_result=VoteResult(obj["voteResult"]), pre_vote=bool(obj.get("preVote", False)))


@dataclass(frozen=True, slots=True)
class HeartBeatRequest(Message):
    commit_index: int = -1  # our addition: lets an idle follower learn the commit index sooner

    def to_json(self) -> dict[str, Any]:
        return {**self._base_json(), "commitIndex": self.commit_index}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> HeartBeatRequest:
        return cls(**_base(obj), commit_index=_long(obj.get("commitIndex", -1), "commitIndex"))


@dataclass(frozen=True, slots=True)
class HeartBeatResponse(Message):
    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> HeartBeatResponse:
        return cls(**_base(obj))


@dataclass(frozen=True, slots=True)
class PushEntryRequest(Message):
    type: PushType = PushType.APPEND
    commit_index: int = -1
    entries: tuple[Entry, ...] = field(default_factory=tuple)  # APPEND: the batch; COMPARE/TRUNCATE: one
    # Our addition, a TRUNCATE's: the leader no longer holds what the follower lacks before
    # the entry (retention deleted it); a follower without that entry starts its log over
    # with it, at its position, as DLedger's store does (rebuildWithPos).
    rebuild: bool = False

    def _head_json(self) -> dict[str, Any]:
        out = {**self._base_json(), "type": self.type.value, "commitIndex": self.commit_index}
        if self.rebuild:
            out["rebuild"] = True
        return out

    def to_json(self) -> dict[str, Any]:
        out = self._head_json()
        if len(self.entries) == 1:
            out["entry"] = self.entries[0].to_json()
        elif self.entries:
            out["batchEntry"] = [e.to_json() for e in self.entries]
        return out

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> PushEntryRequest:
        raw = obj.get("batchEntry") or ([obj["entry"]] if obj.get("entry") else [])
        if not isinstance(raw, list):
            raise MalformedMessage(f"batchEntry is not a list: {raw!r:.80}")
        return cls(
            **_base(obj),
            type=PushType(obj.get("type", "APPEND")),
            commit_index=_long(obj.get("commitIndex", -1), "commitIndex"),
            entries=tuple(Entry.from_json(e) for e in raw),
            rebuild=bool(obj.get("rebuild", False)),
        )


@dataclass(frozen=True, slots=True)
class PushEntryResponse(Message):
    type: PushType = PushType.APPEND
    index: int = -1  # the index the request was about (its last entry for APPEND)
    end_index: int = -1  # the follower's log end
    end_term: int = -1

    def to_json(self) -> dict[str, Any]:
        return {
            **self._base_json(),
            "type": self.type.value,
            "index": self.index,
            "endIndex": self.end_index,
            "endTerm": self.end_term,
        }

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> PushEntryResponse:
        return cls(
            **_base(obj),
            type=PushType(obj.get("type", "APPEND")),
            index=_long(obj.get("index", -1), "index"),
            end_index=_long(obj.get("endIndex", -1), "endIndex"),
            end_term=_long(obj.get("endTerm", -1), "endTerm"),
        )


@dataclass(frozen=True, slots=True)
class LeadershipTransferRequest(Message):
    """Sent by a leader to the member it hands over to: start an election now."""

    transfer_id: str = ""
    transferee_id: str = ""
    take_leadership_ledger_index: int = -1

    def to_json(self) -> dict[str, Any]:
        return {
            **self._base_json(),
            "transferId": self.transfer_id,
            "transfereeId": self.transferee_id,
            "takeLeadershipLedgerIndex": self.take_leadership_ledger_index,
        }

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> LeadershipTransferRequest:
        return cls(
            **_base(obj),
            transfer_id=str(obj.get("transferId", "")),
            transferee_id=str(obj.get("transfereeId", "")),
            take_leadership_ledger_index=_long(obj.get("takeLeadershipLedgerIndex", -1), "takeLeadershipLedgerIndex"),
        )


# JSON of recently pushed entries, by identity: a leader pushes the same Entry objects to
# every follower, so each is encoded once (the Base64 body is most of a push's cost).
_ENTRY_JSON: dict[int, tuple[Entry, bytes]] = {}
_ENTRY_JSON_MAX = 256


def _entry_json(e: Entry) -> bytes:
    hit = _ENTRY_JSON.get(id(e))
    if hit is not None and hit[0] is e:
        return hit[1]
    # Built by hand: Base64 needs no JSON escaping, and json.dumps would scan the whole body
    # for characters to escape (about 25 times slower than joining the parts).
    pos = b', "pos": %d' % e.pos if e.pos >= 0 else b""
    text = b'{"index": %d, "term": %d, "body": "%s"%s}' % (e.index, e.term, b64encode(e.body), pos)
    _ENTRY_JSON[id(e)] = (e, text)  # holding ``e`` keeps its id from being reused
    if len(_ENTRY_JSON) > _ENTRY_JSON_MAX:
        del _ENTRY_JSON[next(iter(_ENTRY_JSON))]
    return text


def encode_message(msg: Message) -> bytes:
    """A peer message as the JSON body peers exchange, its class named by ``kind``."""
    if isinstance(msg, PushEntryRequest) and msg.entries:
        head = {"kind": "PushEntryRequest", **msg._head_json()}
        text = json.dumps(head)[:-1].encode()
        if len(msg.entries) == 1:
            return b'%s, "entry": %s}' % (text, _entry_json(msg.entries[0]))
        return b'%s, "batchEntry": [%s]}' % (text, b", ".join(_entry_json(e) for e in msg.entries))
    return json.dumps({"kind": type(msg).__name__, **msg.to_json()}).encode()


KINDS: dict[str, type[Message]] = {
    cls.__name__: cls
    for cls in (
        VoteRequest,
        VoteResponse,
        HeartBeatRequest,
        HeartBeatResponse,
        PushEntryRequest,
        PushEntryResponse,
        LeadershipTransferRequest,
    )
}


def decode_message(body: bytes | None) -> Message:
    """A peer message from its JSON body (``encode_message``'s output).

    Raises:
        MalformedMessage: anything else, whatever is wrong with it.
    """
    try:
        obj = json.loads(body or b"")
        if not isinstance(obj, dict):
            raise MalformedMessage(f"the body is not a JSON object: {obj!r:.80}")
        kind = obj.pop("kind", None)
        cls = KINDS.get(kind) if isinstance(kind, str) else None
        if cls is None:
            raise MalformedMessage(f"unknown kind {kind!r:.80}")
        return cls.from_json(obj)  # type: ignore[attr-defined, no-any-return]
    except MalformedMessage:
        raise
    except (ValueError, KeyError, TypeError, AttributeError, OverflowError, RecursionError) as exc:
        # (ValueError covers bad JSON, UTF-8, Base64 and enum values; RecursionError, nesting)
        raise MalformedMessage(f"{type(exc).__name__}: {exc}") from None
