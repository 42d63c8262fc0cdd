"""A broker with aclEnable=true against our clients and raw requests: signatures, permissions,
admin-only codes, white lists, reloading plain_acl.yml, and what a refusal looks like."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import pytest
import trio
import yaml

from rmq.broker.acl import AclConfigError
from rmq.broker.config import ConfigError
from rmq.broker.controller import BrokerController
from rmq.client import (
    ConsumeFromWhere,
    Message,
    MessageExt,
    MQBrokerError,
    Producer,
    PullConsumer,
    PushConsumer,
)
from rmq.client.admin import AdminResponseError, MQAdmin
from rmq.protocol import RequestCode, ResponseCode
from rmq.protocol import body as json_body

from ..cluster import Cluster, broker_config
from .conftest import ADMIN, SUB_ONLY, USER, signed_call

LIMIT = 30.0  # seconds: every wait here ends by then
FAST = {"poll_name_server_interval": 1.0, "rebalance_interval": 1.0, "persist_consumer_offset_interval": 0.5}


async def wait_until(condition: Callable[[], bool], timeout: float = LIMIT) -> None:
    with trio.fail_after(timeout):
        while not condition():
            await trio.sleep(0.05)


def send_ext(topic: str, group: str = "PG_acl") -> dict[str, object]:
    return {
        "producerGroup": group,
        "topic": topic,
        "defaultTopic": "TBW102",
        "defaultTopicQueueNums": 4,
        "queueId": 0,
        "sysFlag": 0,
        "bornTimestamp": 0,
        "flag": 0,
        "properties": "",
    }


async def stored(cluster: Cluster, topic: str) -> int:
    """Messages of `topic` in queue 0 (asked with the admin account)."""
    response = await signed_call(cluster, RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": 0})
    assert response.code == ResponseCode.SUCCESS, response.remark
    return int(response.ext_fields["offset"])


async def create_topic(cluster: Cluster, topic: str, queues: int = 4) -> None:
    ext = {"topic": topic, "readQueueNums": queues, "writeQueueNums": queues, "perm": 6}
    response = await signed_call(cluster, RequestCode.UPDATE_AND_CREATE_TOPIC, ext)
    assert response.code == ResponseCode.SUCCESS, response.remark


# -- our clients -------------------------------------------------------------------------------


async def test_producer_and_push_consumer_with_credentials(cluster: Cluster) -> None:
    ns = cluster.namesrv.address
    await create_topic(cluster, "TopicPub")
    got: list[MessageExt] = []

    async def handler(msg: MessageExt) -> None:
        got.append(msg)

    consumer = PushConsumer(
        "GroupAcl",
        ns,
        handler=handler,
        consume_from_where=ConsumeFromWhere.FIRST_OFFSET,
        access_key=USER[0],
        secret_key=USER[1],
        **FAST,
    )
    consumer.subscribe("TopicPub", "*")
    async with Producer("PG_acl", ns, access_key=USER[0], secret_key=USER[1]) as producer:
        for i in range(5):
            await producer.send(Message("TopicPub", f"acl {i}"))
        async with consumer:
            await wait_until(lambda: len(got) >= 5)
    assert sorted(m.body.decode() for m in got) == [f"acl {i}" for i in range(5)]


async def test_pull_consumer_with_credentials(cluster: Cluster, caplog: pytest.LogCaptureFixture) -> None:
    ns = cluster.namesrv.address
    await create_topic(cluster, "TopicSub", queues=1)
    await signed_call(cluster, RequestCode.SEND_MESSAGE, send_ext("TopicSub"), b"pulled", ADMIN)
    async with PullConsumer("GroupPull", ns, access_key=USER[0], secret_key=USER[1], **FAST) as consumer:
        consumer.assign(await consumer.fetch_message_queues("TopicSub"))
        with trio.fail_after(LIMIT):
            msgs: list[MessageExt] = []
            while not msgs:
                msgs = await consumer.poll(1.0)
        await consumer.commit()
    assert [m.body for m in msgs] == [b"pulled"]
    # a consumer of a DENY group gets nothing; the broker says why
    async with PullConsumer("GroupDeny", ns, access_key=USER[0], secret_key=USER[1], **FAST) as denied:
        denied.assign(await denied.fetch_message_queues("TopicSub"))
        assert await denied.poll(0.5) == []
    assert "No SUB permission for group:GroupDeny, accessKey=RocketMQUser" in caplog.text


async def test_pulls_sent_ahead_are_signed(cluster: Cluster, caplog: pytest.LogCaptureFixture) -> None:
    """Through a backlog the pull consumer sends its next pull before decoding an answer;
    that pull is signed like any other: no pull fails, all arrives in order."""
    caplog.set_level(logging.INFO, logger="rmq.client")
    ns = cluster.namesrv.address
    await create_topic(cluster, "TopicAhead", queues=1)
    async with Producer("PG_acl_ahead", ns, access_key=ADMIN[0], secret_key=ADMIN[1]) as producer:
        await producer.send_batch([Message("TopicAhead", f"ahead {i:02d}") for i in range(40)])
    got: list[str] = []
    async with PullConsumer(
        "GroupPull", ns, access_key=SUB_ONLY[0], secret_key=SUB_ONLY[1], pull_batch_size=4, **FAST
    ) as consumer:
        consumer.assign(await consumer.fetch_message_queues("TopicAhead"))
        with trio.fail_after(LIMIT):
            while len(got) < 40:
                got.extend(m.body.decode() for m in await consumer.poll(1.0))
    assert got == [f"ahead {i:02d}" for i in range(40)]
    assert "failed" not in caplog.text


async def test_producer_without_credentials_is_refused(cluster: Cluster) -> None:
    await create_topic(cluster, "TopicPub")
    async with Producer("PG_acl", cluster.namesrv.address, retry_times=0) as producer:
        with pytest.raises(MQBrokerError) as info:
            await producer.send(Message("TopicPub", "nope"))
    assert info.value.response_code == ResponseCode.SYSTEM_ERROR
    assert "AclException: No accessKey is configured" in str(info.value)
    assert await stored(cluster, "TopicPub") == 0


async def test_sub_only_account_cannot_send(cluster: Cluster) -> None:
    await create_topic(cluster, "TopicPub")
    async with Producer(
        "PG_acl", cluster.namesrv.address, retry_times=0, access_key=SUB_ONLY[0], secret_key=SUB_ONLY[1]
    ) as producer:
        with pytest.raises(MQBrokerError, match=r"No PUB permission for topic:TopicPub, accessKey=RocketMQSubOnly"):
            await producer.send(Message("TopicPub", "nope"))
    assert await stored(cluster, "TopicPub") == 0


async def test_non_admin_cannot_delete_topics_or_reset_offsets(cluster: Cluster) -> None:
    await create_topic(cluster, "TopicPub")
    addr = cluster.broker.address
    async with MQAdmin(cluster.namesrv.address, access_key=USER[0], secret_key=USER[1]) as user:
        with pytest.raises(AdminResponseError, match="Need admin permission for request DELETE_TOPIC_IN_BROKER"):
            await user.delete_topic_in_broker(addr, "TopicPub")
        with pytest.raises(AdminResponseError, match="Need admin permission for request INVOKE_BROKER_TO_RESET"):
            await user.reset_offset_on(addr, "TopicPub", "GroupAcl", 0)
        with pytest.raises(AdminResponseError, match="Need admin permission for request UPDATE_AND_CREATE_ACL"):
            await user.update_acl_config(addr, _account("Intruder1", "secret-key-1", admin=True))
    assert "TopicPub" in cluster.broker.topics  # still there
    async with MQAdmin(cluster.namesrv.address, access_key=ADMIN[0], secret_key=ADMIN[1]) as admin:
        await admin.delete_topic_in_broker(addr, "TopicPub")
    assert "TopicPub" not in cluster.broker.topics


# -- raw requests ---------------------------------------------------------------------------------


async def test_every_refusal_names_the_check_and_the_resource(cluster: Cluster) -> None:
    await create_topic(cluster, "TopicPub")
    cases = [
        (
            None,
            send_ext("TopicPub"),
            "No accessKey is configured: the request is not signed and 127.0.0.1 is not white-listed",
        ),
        (("NoSuchUser", "whatever-secret"), send_ext("TopicPub"), "No acl config for NoSuchUser"),
        ((USER[0], "wrong-secret"), send_ext("TopicPub"), "Check signature failed for accessKey=RocketMQUser"),
        (USER, send_ext("TopicDeny"), "No PUB permission for topic:TopicDeny, accessKey=RocketMQUser"),
        (USER, send_ext("TopicOther"), "No PUB permission for topic:TopicOther, accessKey=RocketMQUser"),
        (SUB_ONLY, send_ext("TopicPub"), "No PUB permission for topic:TopicPub, accessKey=RocketMQSubOnly"),
    ]
    for credentials, ext, reason in cases:
        response = await signed_call(cluster, RequestCode.SEND_MESSAGE, ext, b"body", credentials)
        assert response.code == ResponseCode.SYSTEM_ERROR
        assert response.remark == f"AclException: {reason}"
    assert await stored(cluster, "TopicPub") == 0
    ok = await signed_call(cluster, RequestCode.SEND_MESSAGE, send_ext("TopicPub"), b"body", USER)
    assert ok.code == ResponseCode.SUCCESS, ok.remark
    assert await stored(cluster, "TopicPub") == 1


async def test_pull_and_offsets_need_sub_on_topic_and_group(cluster: Cluster) -> None:
    await create_topic(cluster, "TopicSub")
    pull = {
        "consumerGroup": "GroupDeny",
        "topic": "TopicSub",
        "queueId": 0,
        "queueOffset": 0,
        "maxMsgNums": 1,
        "sysFlag": 0,
        "commitOffset": 0,
        "suspendTimeoutMillis": 0,
        "subscription": "*",
        "subVersion": 0,
    }
    refused = await signed_call(cluster, RequestCode.PULL_MESSAGE, pull, credentials=USER)
    assert refused.remark == "AclException: No SUB permission for group:GroupDeny, accessKey=RocketMQUser"
    fine = await signed_call(cluster, RequestCode.PULL_MESSAGE, {**pull, "consumerGroup": "GroupOk"}, credentials=USER)
    assert fine.code != ResponseCode.SYSTEM_ERROR, fine.remark
    commit = {"consumerGroup": "GroupOk", "topic": "TopicDeny", "queueId": 0, "commitOffset": 0}
    refused = await signed_call(cluster, RequestCode.UPDATE_CONSUMER_OFFSET, commit, credentials=USER)
    assert refused.remark == "AclException: No SUB permission for topic:TopicDeny, accessKey=RocketMQUser"
    # a retry topic is its group: pulling %RETRY%GroupDeny is refused on the group
    retry = {**pull, "consumerGroup": "GroupOk", "topic": "%RETRY%GroupDeny"}
    refused = await signed_call(cluster, RequestCode.PULL_MESSAGE, retry, credentials=USER)
    assert refused.remark == "AclException: No SUB permission for group:GroupDeny, accessKey=RocketMQUser"


async def test_heartbeat_checks_its_groups_and_subscriptions(cluster: Cluster) -> None:
    def heartbeat(group: str, topic: str) -> bytes:
        return json_body.dumps(
            {
                "clientID": "127.0.0.1@acl",
                "consumerDataSet": [
                    {
                        "groupName": group,
                        "consumeType": "CONSUME_PASSIVELY",
                        "messageModel": "CLUSTERING",
                        "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                        "subscriptionDataSet": [{"topic": topic, "subString": "*", "subVersion": 1}],
                    }
                ],
                "producerDataSet": [],
            }
        )

    ok = await signed_call(cluster, RequestCode.HEART_BEAT, None, heartbeat("GroupOk", "TopicSub"), USER)
    assert ok.code == ResponseCode.SUCCESS, ok.remark
    bad = await signed_call(cluster, RequestCode.HEART_BEAT, None, heartbeat("GroupOk", "TopicDeny"), USER)
    assert bad.remark == "AclException: No SUB permission for topic:TopicDeny, accessKey=RocketMQUser"
    bad = await signed_call(cluster, RequestCode.HEART_BEAT, None, heartbeat("GroupDeny", "TopicSub"), USER)
    assert bad.remark == "AclException: No SUB permission for group:GroupDeny, accessKey=RocketMQUser"
    broken = await signed_call(cluster, RequestCode.HEART_BEAT, None, b"{not json", USER)
    assert broken.code == ResponseCode.SYSTEM_ERROR and "cannot read the heartbeat body" in (broken.remark or "")


async def test_refusals_are_logged_once_per_address_and_reason(
    cluster: Cluster, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="rmq.broker.acl")
    for _ in range(5):
        await signed_call(cluster, RequestCode.SEND_MESSAGE, send_ext("TopicPub"), b"x", None)
    await signed_call(cluster, RequestCode.SEND_MESSAGE, send_ext("TopicPub"), b"x", (USER[0], "wrong-secret"))
    warnings = [r.getMessage() for r in caplog.records if r.name == "rmq.broker.acl" and r.levelno == logging.WARNING]
    assert len([w for w in warnings if "No accessKey is configured" in w]) == 1
    assert len([w for w in warnings if "Check signature failed for accessKey=RocketMQUser" in w]) == 1
    assert all("127.0.0.1" in w for w in warnings)


# -- white lists ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "plain_acl",
    [
        "globalWhiteRemoteAddresses: ['127.0.0.{1,2}']\n"
        "accounts:\n  - {accessKey: RocketMQUser, secretKey: 12345678user, defaultTopicPerm: DENY}\n",
    ],
    ids=["loopback-listed"],
)
async def test_global_white_list_passes_unsigned_requests(cluster: Cluster) -> None:
    response = await signed_call(cluster, RequestCode.SEND_MESSAGE, send_ext("AnyTopic"), b"x", None)
    assert response.code == ResponseCode.SUCCESS, response.remark


@pytest.mark.parametrize(
    "plain_acl",
    [
        "accounts:\n"
        "  - {accessKey: RocketMQUser, secretKey: 12345678user, whiteRemoteAddress: 127.0.0.*}\n"
        "  - {accessKey: RocketMQOther, secretKey: 12345678other, whiteRemoteAddress: 10.0.0.1}\n",
    ],
    ids=["loopback-range"],
)
async def test_account_white_address_passes_without_signature(cluster: Cluster) -> None:
    wrong = await signed_call(cluster, RequestCode.SEND_MESSAGE, send_ext("AnyTopic"), b"x", (USER[0], "wrong-secret"))
    assert wrong.code == ResponseCode.SUCCESS, wrong.remark
    other = ("RocketMQOther", "wrong-secret")
    refused = await signed_call(cluster, RequestCode.SEND_MESSAGE, send_ext("AnyTopic"), b"x", other)
    assert refused.remark == "AclException: Check signature failed for accessKey=RocketMQOther"


# -- the file --------------------------------------------------------------------------------------


async def test_a_changed_file_takes_effect_without_restart(cluster: Cluster, acl_file: Path) -> None:
    newcomer = ("RocketMQNewcomer", "12345678new")
    refused = await signed_call(cluster, RequestCode.SEND_MESSAGE, send_ext("TopicPub"), b"x", newcomer)
    assert refused.remark == "AclException: No acl config for RocketMQNewcomer"
    data = yaml.safe_load(acl_file.read_text())
    data["accounts"].append({"accessKey": newcomer[0], "secretKey": newcomer[1], "defaultTopicPerm": "PUB"})
    acl_file.write_text(yaml.safe_dump(data))
    with trio.fail_after(LIMIT):
        while (await signed_call(cluster, RequestCode.SEND_MESSAGE, send_ext("TopicPub"), b"x", newcomer)).code:
            await trio.sleep(0.05)
    # and taken away again
    data["accounts"] = [a for a in data["accounts"] if a["accessKey"] != newcomer[0]]
    acl_file.write_text(yaml.safe_dump(data))
    with trio.fail_after(LIMIT):
        while not (await signed_call(cluster, RequestCode.SEND_MESSAGE, send_ext("TopicPub"), b"x", newcomer)).code:
            await trio.sleep(0.05)


async def test_a_broken_file_is_logged_and_the_last_good_one_stays(
    cluster: Cluster, acl_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    acl = cluster.broker.acl
    assert acl is not None
    before = acl.model
    for broken in ("accounts: [unclosed\n", "accounts:\n  - {accessKey: short, secretKey: 12345678}\n"):
        caplog.clear()
        acl_file.write_text(broken)
        with trio.fail_after(LIMIT):
            while not any(r.levelno == logging.ERROR for r in caplog.records):
                await trio.sleep(0.05)
        await trio.sleep(0.3)  # several more polls: still one message for this version of the file
        errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
        assert len(errors) == 1 and "previous one stays in force" in errors[0], errors
        assert acl.model is before
        ok = await signed_call(cluster, RequestCode.SEND_MESSAGE, send_ext("TopicPub"), b"x", USER)
        assert ok.code == ResponseCode.SUCCESS, ok.remark
    assert "accessKey must be longer than 6 characters" in errors[0]


async def test_a_broken_file_stops_the_start(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "plain_acl.yml").write_text("accounts:\n  - {accessKey: RocketMQUser, defaultTopicPerm: PUBB}\n")
    config = broker_config(tmp_path / "store", None, aclEnable="true", rocketmqHome=str(home))
    with pytest.raises(AclConfigError, match="secretKey must be longer than 6"), trio.fail_after(LIMIT):
        await BrokerController(config).serve()


def test_acl_file_location(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="aclEnable"):
        broker_config(tmp_path, None, aclEnable="true")
    assert broker_config(tmp_path, None, rocketmqHome="/opt/rmq").acl_file == Path("/opt/rmq/conf/plain_acl.yml")
    assert broker_config(tmp_path, None, rocketmqHome="/opt/rmq", aclPlainFile="conf/x.yml").acl_file == Path(
        "/opt/rmq/conf/x.yml"
    )
    assert broker_config(tmp_path, None, aclPlainFile="/etc/acl.yml").acl_file == Path("/etc/acl.yml")
    from rmq.broker.config import BrokerConfig

    config = BrokerConfig.from_properties({"aclEnable": "true"}, environ={"ROCKETMQ_HOME": "/opt/home"})
    assert config.acl_enable and config.acl_file == Path("/opt/home/conf/plain_acl.yml")


# -- the ACL admin requests --------------------------------------------------------------------------


def _account(ak: str, sk: str, **fields: object) -> object:
    from rmq.protocol.acl import PlainAccessConfig

    return PlainAccessConfig(access_key=ak, secret_key=sk, **fields)  # type: ignore[arg-type]


async def test_admin_requests_change_the_file_and_apply_at_once(cluster: Cluster, acl_file: Path) -> None:
    addr = cluster.broker.address
    newcomer = ("RocketMQNewcomer", "12345678new")
    async with MQAdmin(cluster.namesrv.address, access_key=ADMIN[0], secret_key=ADMIN[1]) as admin:
        before = await admin.acl_version_info(addr)
        await admin.update_acl_config(
            addr,
            _account(*newcomer, topic_perms=["TopicPub=PUB"], default_group_perm="SUB"),  # type: ignore[arg-type]
        )
        ok = await signed_call(cluster, RequestCode.SEND_MESSAGE, send_ext("TopicPub"), b"x", newcomer)
        assert ok.code == ResponseCode.SUCCESS, ok.remark
        data = yaml.safe_load(acl_file.read_text())
        (written,) = [a for a in data["accounts"] if a["accessKey"] == newcomer[0]]
        assert written["topicPerms"] == ["TopicPub=PUB"] and written["admin"] is False
        after = await admin.acl_version_info(addr)
        assert after.version[0] == before.version[0] + 1
        assert after.files == {str(acl_file): after.version}
        assert (after.broker_name, after.cluster_name, after.broker_addr) == ("broker-a", "TestCluster", addr)

        # an update changes only what it names (admin is always set)
        await admin.update_acl_config(addr, _account(*newcomer, white_remote_address="10.0.0.1"))  # type: ignore[arg-type]
        (written,) = [a for a in yaml.safe_load(acl_file.read_text())["accounts"] if a["accessKey"] == newcomer[0]]
        assert written["topicPerms"] == ["TopicPub=PUB"] and written["whiteRemoteAddress"] == "10.0.0.1"

        config = await admin.acl_config(addr)
        assert {a.access_key for a in config.plain_access_configs} >= {ADMIN[0], USER[0], newcomer[0]}
        assert config.global_white_addrs == ["10.10.103.*"]

        with pytest.raises(AdminResponseError) as info:
            await admin.update_acl_config(addr, _account("shortak", "1234", admin=False))  # type: ignore[arg-type]
        assert info.value.response_code == ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED
        with pytest.raises(AdminResponseError) as info:
            await admin.update_acl_config(addr, _account(*newcomer, topic_perms=["TopicPub=ALL"]))  # type: ignore[arg-type]
        assert "not DENY, PUB, SUB or PUB|SUB" in str(info.value)

        await admin.delete_acl_config(addr, newcomer[0])
        gone = await signed_call(cluster, RequestCode.SEND_MESSAGE, send_ext("TopicPub"), b"x", newcomer)
        assert gone.remark == "AclException: No acl config for RocketMQNewcomer"
        with pytest.raises(AdminResponseError) as info:
            await admin.delete_acl_config(addr, newcomer[0])
        assert info.value.response_code == ResponseCode.DELETE_ACL_CONFIG_FAILED

        await admin.update_global_white_addrs(addr, ["127.0.0.1", "192.168.0.*"])
        assert yaml.safe_load(acl_file.read_text())["globalWhiteRemoteAddresses"] == ["127.0.0.1", "192.168.0.*"]
        unsigned = await signed_call(cluster, RequestCode.SEND_MESSAGE, send_ext("AnyTopic"), b"x", None)
        assert unsigned.code == ResponseCode.SUCCESS, unsigned.remark
        with pytest.raises(AdminResponseError) as info:
            await admin.update_global_white_addrs(addr, ["300.1.1.1"])
        assert info.value.response_code == ResponseCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG_FAILED


async def test_acl_requests_on_a_broker_without_acl(tmp_path: Path) -> None:
    from rmq.namesrv.config import NamesrvConfig
    from rmq.namesrv.server import NamesrvServer
    from rmq.remoting import RemotingClient

    config = NamesrvConfig(listen_host="127.0.0.1", listen_port=0, kv_config_path=None)
    async with NamesrvServer(config) as ns, RemotingClient() as client, trio.open_nursery() as nursery:
        cluster = Cluster(nursery, ns, client, tmp_path / "store", {})
        await cluster.start()
        try:
            # a C++ client always sends AccessKey, OnsChannel and Signature: ignored here
            ok = await signed_call(cluster, RequestCode.SEND_MESSAGE, send_ext("AnyTopic"), b"x", ("ak", "sk"))
            assert ok.code == ResponseCode.SUCCESS, ok.remark
            response = await signed_call(cluster, RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, {"accessKey": "x"})
            assert response.code == ResponseCode.UPDATE_AND_CREATE_ACL_CONFIG_FAILED
            assert "aclEnable=false" in (response.remark or "")
        finally:
            await cluster.stop()
            nursery.cancel_scope.cancel()
