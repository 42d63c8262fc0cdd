"""EpochEntryCache (GET_BROKER_EPOCH_CACHE's answer) against the bytes a RocketMQ 5.3.3 broker's
fastjson writes (AdminBrokerProcessor.getBrokerEpochCache: EpochEntryCache.encode()): getters
in alphabetical order, longs as plain numbers, the current epoch's endOffset Long.MAX_VALUE."""

from __future__ import annotations

import pytest

from rmq.protocol import body
from rmq.protocol.bodies import EpochEntry, EpochEntryCache
from rmq.protocol.errors import BodyError

JAVA = (
    b'{"brokerId":1,"brokerName":"broker-a","clusterName":"DefaultCluster","epochList":['
    b'{"endOffset":1024,"epoch":1,"startOffset":0},'
    b'{"endOffset":9223372036854775807,"epoch":2,"startOffset":1024}],"maxOffset":4096}'
)
CACHE = EpochEntryCache("DefaultCluster", "broker-a", 1, (EpochEntry(1, 0, 1024), EpochEntry(2, 1024)), max_offset=4096)


def test_written_as_java_writes_it() -> None:
    assert body.dumps(CACHE.to_json()) == JAVA


def test_read_from_java_bytes() -> None:
    assert EpochEntryCache.from_json(body.loads(JAVA)) == CACHE


def test_read_from_other_dialects() -> None:
    # numbers as strings, fields left out (Java's defaults)
    loose = b'{"brokerId":"2","brokerName":"b","epochList":[{"epoch":"3","startOffset":"7"}]}'
    cache = EpochEntryCache.from_json(body.loads(loose))
    assert cache == EpochEntryCache("", "b", 2, (EpochEntry(3, 7, 2**63 - 1),), 0)
    assert EpochEntryCache.from_json(body.loads(b'{"epochList":null}')).epoch_list == ()


def test_the_last_entry_ends_at_the_max_offset_when_shown() -> None:
    assert CACHE.shown() == (EpochEntry(1, 0, 1024), EpochEntry(2, 1024, 4096))
    assert EpochEntryCache("c", "b", 0).shown() == ()


@pytest.mark.parametrize(
    "data",
    [
        b"[]",
        b'{"brokerId":"x"}',
        b'{"epochList":{}}',
        b'{"epochList":[1]}',
        b'{"epochList":[{"epoch":true}]}',
        b'{"maxOffset":[]}',
    ],
)
def test_bad_bodies(data: bytes) -> None:
    with pytest.raises(BodyError):
        EpochEntryCache.from_json(body.loads(data))
