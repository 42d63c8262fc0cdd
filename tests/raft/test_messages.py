"""Peer message bodies from bytes alone: what decode_message takes, and what it refuses."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rmq.raft import messages as M
from rmq.raft.messages import LONG_MAX, Entry, MalformedMessage, PushType, decode_message, encode_message

SAMPLES = [
    M.VoteRequest("g", "n0", "n1", 3, ledger_end_index=7, ledger_end_term=2, pre_vote=True),
    M.VoteResponse("g", "n1", "n0", 3, vote_result=M.VoteResult.ACCEPT),
    M.HeartBeatRequest("g", "n0", "n1", LONG_MAX, leader_id="n0", commit_index=LONG_MAX),
    M.HeartBeatResponse("g", "n1", "n0", 0),
    M.PushEntryRequest("g", "n0", "n1", 3, leader_id="n0", entries=(Entry(5, 3, b"\x00"), Entry(6, 3, b""))),
    M.PushEntryRequest("g", "n0", "n1", 3, type=PushType.COMPARE, entries=(Entry(-1, -1),)),
    M.PushEntryResponse("g", "n1", "n0", 3, type=PushType.APPEND, index=6, end_index=6, end_term=3),
    M.LeadershipTransferRequest("g", "n0", "n2", 3, transfer_id="n0", transferee_id="n2"),
]


@pytest.mark.parametrize("msg", SAMPLES, ids=lambda m: type(m).__name__)
def test_every_kind_comes_back_as_it_was_sent(msg: M.Message) -> None:
    assert decode_message(encode_message(msg)) == msg


def _push(**fields: object) -> bytes:
    base = {"kind": "PushEntryRequest", "group": "g", "localId": "n0", "remoteId": "n1", "term": 1}
    return json.dumps({**base, **fields}).encode()


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (b"", "Expecting value"),
        (b"\xff\xfe garbage", "DecodeError"),
        (b'{"kind": "\xff"}', "UnicodeDecodeError"),
        (b"[1, 2]", "not a JSON object"),
        (b"[" * 100_000, "RecursionError"),
        (b'"push"', "not a JSON object"),
        (b'{"kind": "Nope"}', "unknown kind"),
        (b'{"kind": ["PushEntryRequest"]}', "unknown kind"),
        (b'{"kind": "HeartBeatRequest", "term": 1}', "KeyError"),
        (_push(term=1 << 63), "outside"),  # past a Java long: it could not be persisted
        (_push(term=-1), "outside"),
        (b'{"kind": "HeartBeatRequest", "localId": "n0", "term": 1e400}', "not an integer"),
        (_push(term="one"), "ValueError"),
        (_push(term=True), "not an integer"),
        (_push(leaderId=["n0"]), "leaderId is not a string"),
        (_push(commitIndex=1 << 64), "outside"),
        (_push(batchEntry="AAAA"), "not a list"),
        (_push(batchEntry=[3]), "not an object"),
        (_push(batchEntry=[{"index": 1, "term": 1 << 70, "body": ""}]), "outside"),
        (_push(entry={"index": 1, "term": 1, "body": "not base64!"}), "Error"),
        (_push(type="SIDEWAYS"), "ValueError"),
        (
            json.dumps({"kind": "VoteResponse", "localId": "n1", "term": 1, "voteResult": "MAYBE"}).encode(),
            "ValueError",
        ),
    ],
)
def test_a_malformed_body_is_refused_with_why(body: bytes, why: str) -> None:
    with pytest.raises(MalformedMessage, match=why):
        decode_message(body)


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=6),
    max_leaves=20,
)
_fields = st.sampled_from(
    ["group", "localId", "remoteId", "term", "leaderId", "code", "type", "commitIndex", "entry", "batchEntry",
     "index", "endIndex", "endTerm", "ledgerEndIndex", "ledgerEndTerm", "voteResult", "preVote", "body", "pos"]
)  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(kind=st.sampled_from([*M.KINDS, "Other"]), fields=st.dictionaries(_fields, _json, max_size=10))
def test_any_json_object_decodes_or_is_refused_never_anything_else(kind: str, fields: dict[str, object]) -> None:
    try:
        msg = decode_message(json.dumps({"kind": kind, **fields}).encode())
    except MalformedMessage:
        return
    assert 0 <= msg.term <= LONG_MAX and type(msg).__name__ == kind


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=64))
def test_any_bytes_decode_or_are_refused_never_anything_else(body: bytes) -> None:
    try:
        decode_message(body)
    except MalformedMessage:
        pass
