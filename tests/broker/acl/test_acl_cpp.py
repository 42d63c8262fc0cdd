"""The official C++ client (PyPI rocketmq 0.4.4) against a broker with aclEnable=true.

Its requests carry AccessKey, OnsChannel and a Signature over both (tests/vectors/cpp-client,
flow f). A refused send surfaces in the client as "No route info" after its retries; the
broker's remark is in the client's own log, which is what these tests read.
"""

from __future__ import annotations

import pytest

from rmq.protocol import RequestCode, ResponseCode
from tests.interop.cpp_client import (
    Credentials,
    produce,
    push_consume,
    requires_cpp_client,
    run_scenario,
    start_scenario,
)

from ..cluster import Cluster
from .conftest import SUB_ONLY, USER, signed_call
from .test_acl_broker import create_topic, stored

pytestmark = [pytest.mark.interop, requires_cpp_client]

TOPIC = "TopicPub"


async def total_stored(cluster: Cluster, topic: str = TOPIC) -> int:
    total = 0
    for queue in range(4):
        response = await signed_call(cluster, RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": queue})
        assert response.code == ResponseCode.SUCCESS, response.remark
        total += int(response.ext_fields["offset"])
    return total


async def test_cpp_client_with_credentials_sends_and_consumes(cluster: Cluster) -> None:
    ns = cluster.namesrv.address
    await create_topic(cluster, TOPIC)
    credentials = Credentials(*USER)
    consumer = push_consume(ns, TOPIC, 3, group="CG_cpp_acl", credentials=credentials, time_limit=40)
    async with start_scenario(consumer) as run:
        await run.wait_for("started")
        sent = (await run_scenario(produce(ns, TOPIC, 3, credentials=credentials))).check()
        assert [s.ok for s in sent.sends] == [True, True, True]
        consumed = (await run.wait()).check()
    assert sorted(m.body for m in consumed.messages) == [b"msg-0", b"msg-1", b"msg-2"]
    assert await total_stored(cluster) == 3


@pytest.mark.parametrize(
    ("credentials", "remark"),
    [
        (Credentials(USER[0], "wrong-secret"), "AclException: Check signature failed for accessKey=RocketMQUser"),
        (None, "AclException: No accessKey is configured: the request is not signed and 127.0.0.1 is not"),
        (Credentials(*SUB_ONLY), "AclException: No PUB permission for topic:TopicPub, accessKey=RocketMQSubOnly"),
    ],
    ids=["wrong-secret", "no-credentials-not-white-listed", "sub-only-account"],
)
async def test_cpp_client_is_refused(cluster: Cluster, credentials: Credentials | None, remark: str) -> None:
    ns = cluster.namesrv.address
    await create_topic(cluster, TOPIC)
    result = await run_scenario(produce(ns, TOPIC, 2, credentials=credentials, retry_times=0, time_limit=20))
    assert result.sends and not any(s.ok for s in result.sends), result.describe()
    assert f"remark:{remark}" in result.client_log, result.describe()
    assert await total_stored(cluster) == 0
    assert await stored(cluster, TOPIC) == 0


@pytest.mark.parametrize(
    "plain_acl",
    ["globalWhiteRemoteAddresses: [127.0.0.1]\naccounts: []\n"],
    ids=["loopback-white-listed"],
)
async def test_cpp_client_from_a_white_listed_address_needs_no_credentials(cluster: Cluster) -> None:
    ns = cluster.namesrv.address
    await create_topic(cluster, TOPIC)
    result = (await run_scenario(produce(ns, TOPIC, 2))).check()
    assert [s.ok for s in result.sends] == [True, True]
    assert await total_stored(cluster) == 2
