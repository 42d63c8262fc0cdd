"""An ACL 1.0 signature does not cover the request code: a captured signed request replayed
under another code passes (RocketMQ 4.x does the same). aclRequireSignedRequestCode=true
closes that for clients that sign the code, as ours do; without it, clients that do not
(Java, Go, C++) keep working."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rmq.broker.acl import service
from rmq.client import Message, Producer
from rmq.client.admin import MQAdmin, TopicConfig
from rmq.protocol import RemotingCommand, RequestCode, ResponseCode
from rmq.protocol import acl as signing

from ..cluster import Cluster
from .conftest import ADMIN, USER


@pytest.fixture
def require_code() -> bool:
    return False


@pytest.fixture
def broker_props(acl_home: Path, monkeypatch: pytest.MonkeyPatch, require_code: bool) -> dict[str, str]:
    monkeypatch.setattr(service, "WATCH_INTERVAL", 0.05)
    props = {"aclEnable": "true", "rocketmqHome": str(acl_home)}
    if require_code:
        props["aclRequireSignedRequestCode"] = "true"
    return props


def signed(code: int, ext: dict[str, Any], *, with_code: bool, credentials: tuple[str, str] = ADMIN) -> RemotingCommand:
    """A request signed as a RocketMQ client signs it, or (`with_code`) as ours does."""
    request = RemotingCommand.request(code, ext)
    signing.sign(request.ext_fields, request.body, *credentials, code=code if with_code else None)
    return request


def replayed_as(code: int, captured: RemotingCommand) -> RemotingCommand:
    """The captured request's fields, signature included, under another code."""
    return RemotingCommand.request(code, dict(captured.ext_fields), captured.body)


async def send(cluster: Cluster, request: RemotingCommand) -> RemotingCommand:
    return await cluster.client.invoke(cluster.broker.address, request, 5.0)


async def create_victim(cluster: Cluster, *, with_code: bool) -> None:
    ext = {"topic": "Victim", "readQueueNums": 2, "writeQueueNums": 2, "perm": 6}
    answer = await send(cluster, signed(RequestCode.UPDATE_AND_CREATE_TOPIC, ext, with_code=with_code))
    assert answer.code == ResponseCode.SUCCESS, answer.remark


async def test_without_the_key_a_read_replayed_as_a_delete_deletes(cluster: Cluster) -> None:
    """The gap, as in RocketMQ 4.x: GET_TOPIC_STATS_INFO and DELETE_TOPIC_IN_BROKER carry the
    same fields, so the admin's signed read is also a signed delete."""
    await create_victim(cluster, with_code=False)
    stats = signed(RequestCode.GET_TOPIC_STATS_INFO, {"topic": "Victim"}, with_code=False)
    assert (await send(cluster, stats)).code == ResponseCode.SUCCESS
    answer = await send(cluster, replayed_as(RequestCode.DELETE_TOPIC_IN_BROKER, stats))
    assert answer.code == ResponseCode.SUCCESS
    assert cluster.broker.topics.get("Victim") is None


async def test_without_the_key_both_kinds_of_signature_pass(cluster: Cluster) -> None:
    await create_victim(cluster, with_code=True)
    for with_code in (False, True):
        answer = await send(cluster, signed(RequestCode.GET_TOPIC_STATS_INFO, {"topic": "Victim"}, with_code=with_code))
        assert answer.code == ResponseCode.SUCCESS, answer.remark


@pytest.mark.parametrize("require_code", [True])
async def test_with_the_key_a_replay_under_another_code_is_refused(cluster: Cluster) -> None:
    await create_victim(cluster, with_code=True)
    stats = signed(RequestCode.GET_TOPIC_STATS_INFO, {"topic": "Victim"}, with_code=True)
    assert (await send(cluster, stats)).code == ResponseCode.SUCCESS
    answer = await send(cluster, replayed_as(RequestCode.DELETE_TOPIC_IN_BROKER, stats))
    assert answer.code == ResponseCode.SYSTEM_ERROR
    assert answer.remark == (
        "AclException: the signed request code 202 is not the request's code 215 "
        "(aclRequireSignedRequestCode=true), accessKey=RocketMQAdmin"
    )
    assert cluster.broker.topics.get("Victim") is not None
    # the field cannot be changed to match: the signature covers it
    forged = replayed_as(RequestCode.DELETE_TOPIC_IN_BROKER, stats)
    forged.ext_fields[signing.REQUEST_CODE] = str(int(RequestCode.DELETE_TOPIC_IN_BROKER))
    answer = await send(cluster, forged)
    assert answer.code == ResponseCode.SYSTEM_ERROR and "Check signature failed" in (answer.remark or "")
    assert cluster.broker.topics.get("Victim") is not None


@pytest.mark.parametrize("require_code", [True])
async def test_with_the_key_a_request_without_a_signed_code_is_refused(cluster: Cluster) -> None:
    answer = await send(cluster, signed(RequestCode.GET_BROKER_RUNTIME_INFO, {}, with_code=False))
    assert answer.code == ResponseCode.SYSTEM_ERROR
    assert "AclException: the request code is not signed: no RequestCode field" in (answer.remark or "")


@pytest.mark.parametrize("require_code", [True])
async def test_with_the_key_our_clients_work(cluster: Cluster) -> None:
    ns = cluster.namesrv.address
    async with MQAdmin(ns, access_key=ADMIN[0], secret_key=ADMIN[1]) as admin:
        await admin.create_topic(cluster.broker.address, TopicConfig("TopicPub", read_queue_nums=2, write_queue_nums=2))
    async with Producer("PG_acl", ns, access_key=USER[0], secret_key=USER[1]) as producer:
        result = await producer.send(Message("TopicPub", b"signed with its code"))
    assert result.status.value == "SEND_OK"
