"""ACL 1.0 on the proxy's gRPC port (enableACL): the official 5.x client's signed calls
checked against plain_acl.yml, the broker's file, and the proxy's own calls to the broker
(which has aclEnable=true too) signed with the account of conf/tools.yml
(enableAclRpcHookForClusterMode), as Java's proxy."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from rmq.broker.acl import AclDenied
from rmq.protocol import RemotingCommand, RequestCode, ResponseCode
from rmq.protocol import acl as signing
from rmq.protocol.headers import CreateTopicRequestHeader
from rmq.proxy import ProxyConfig, ProxyServer
from rmq.proxy.auth import GrpcAcl, needed_resources, parse_authorization, signature
from rmq.proxy.grpc import Call
from rmq.proxy.v2 import definition_pb2 as d
from rmq.proxy.v2 import service_pb2 as s
from rmq.remoting import RemotingClient
from tests.client.conftest import open_cluster

from ..broker.cluster import loopback_namesrv
from ..ports import free_ports
from .conftest import FAST, run_client
from .test_modes import started, wait_for_line

ADMIN = ("ProxyAdmin", "12345678admin")
USER = ("ClientUser", "12345678user")

PLAIN_ACL = """\
globalWhiteRemoteAddresses:
accounts:
  - accessKey: ProxyAdmin
    secretKey: 12345678admin
    admin: true
  - accessKey: ClientUser
    secretKey: 12345678user
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - AclTopic=PUB|SUB
      - SubTopic=SUB
    groupPerms:
      - DeniedGroup=DENY
"""

TOPIC, SUB_TOPIC, GROUP = "AclTopic", "SubTopic", "AclGroup"


def acl_home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "plain_acl.yml").write_text(PLAIN_ACL)
    (home / "conf" / "tools.yml").write_text(f"accessKey: {ADMIN[0]}\nsecretKey: {ADMIN[1]}\n")
    return home


async def create_topic(broker_addr: str, namesrv_addr: str, topic: str) -> None:
    """UPDATE_AND_CREATE_TOPIC signed by the admin, then wait for the name server's route."""
    header = CreateTopicRequestHeader(topic, read_queue_nums=4, write_queue_nums=4, perm=6)
    async with RemotingClient() as client:
        request = RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, header.to_ext())
        signing.sign(request.ext_fields, request.body, *ADMIN)
        response = await client.invoke(broker_addr, request, 3.0)
        assert response.code == ResponseCode.SUCCESS, response
        with trio.fail_after(10):
            while True:
                request = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
                if (await client.invoke(namesrv_addr, request, 3.0)).code == ResponseCode.SUCCESS:
                    return
                await trio.sleep(0.05)


@asynccontextmanager
async def acl_proxy(tmp_path: Path, **settings: Any) -> AsyncIterator[str]:
    """A broker with aclEnable=true and a proxy with enableACL over the same plain_acl.yml;
    yields the proxy's endpoint."""
    home = acl_home(tmp_path)
    async with open_cluster(tmp_path, acl_enable=True, rocketmq_home=str(home)) as cluster:
        for topic in (TOPIC, SUB_TOPIC):
            await create_topic(cluster.broker_addr, cluster.namesrv_addr, topic)
        values = {
            "namesrvAddr": cluster.namesrv_addr,
            "grpcServerPort": 0,
            "enableACL": True,
            "enableAclRpcHookForClusterMode": True,
            "rocketmqHome": str(home),
            **FAST,
            **settings,
        }
        async with ProxyServer(ProxyConfig.from_mapping(values), host="127.0.0.1") as proxy:
            yield f"127.0.0.1:{proxy.port}"


def keys(credentials: tuple[str, str]) -> dict[str, str]:
    return {"CLIENT5_AK": credentials[0], "CLIENT5_SK": credentials[1]}


async def test_signed_client_sends_and_receives(tmp_path: Path) -> None:
    async with acl_proxy(tmp_path) as endpoint:
        sent = await run_client(endpoint, "send", TOPIC, GROUP, "2", env=keys(USER))
        got = await run_client(endpoint, "receive", TOPIC, GROUP, "2", env=keys(USER))
    assert got[-1] == {"received": 2}
    assert sorted(m["id"] for m in got[:-1]) == sorted(line["sent"] for line in sent)


async def test_bad_keys_and_missing_permissions_are_refused(tmp_path: Path) -> None:
    """UNAUTHORIZED (40100) in the Status, with the reason, as Java's proxy answers."""
    async with acl_proxy(tmp_path) as endpoint:
        refused = {
            "wrong secret": ("send_refused", TOPIC, GROUP, keys((USER[0], "not-the-secret"))),
            "unknown key": ("send_refused", TOPIC, GROUP, keys(("NoSuchUser", USER[1]))),
            "unsigned": ("send_refused", TOPIC, GROUP, {}),
            "no PUB": ("send_refused", SUB_TOPIC, GROUP, keys(USER)),
            "no SUB on the topic": ("receive_refused", "OtherTopic", GROUP, keys(USER)),
            "denied group": ("receive_refused", TOPIC, "DeniedGroup", keys(USER)),
        }
        answers = {}
        for case, (scenario, topic, group, env) in refused.items():
            route, answers[case] = await run_client(endpoint, scenario, topic, group, env=env)
            answers[case]["route"] = route
    # refused at the route query, which the client's start reports as a failed route fetch
    why = {
        "wrong secret": "Check signature failed for accessKey=ClientUser",
        "unknown key": "No acl config for NoSuchUser",
        "unsigned": "No accessKey is configured",
        "no SUB on the topic": "No PUB or SUB permission for topic:OtherTopic, accessKey=ClientUser",
    }
    for case, reason in why.items():
        answer = answers[case]
        assert answer["route"]["route"] == 40100 and reason in answer["route"]["message"], answer
        assert answer["error"] == "Exception" and "route" in answer["text"], answer
    # the route is granted (PUB or SUB), the send or the consumer's settings are not
    assert answers["no PUB"]["route"]["route"] == 20000
    assert answers["no PUB"]["text"] == "40100, No PUB permission for topic:SubTopic, accessKey=ClientUser"
    assert answers["denied group"]["text"] == "40100, No SUB permission for group:DeniedGroup, accessKey=ClientUser"
    assert {answers[c]["error"] for c in ("no PUB", "denied group")} == {"UnauthorizedException"}


async def test_proxy_calls_to_the_broker_are_signed(tmp_path: Path) -> None:
    """Without enableAclRpcHookForClusterMode the broker's ACL refuses the proxy's send:
    the client hears the broker's AclException."""
    async with acl_proxy(tmp_path, enableAclRpcHookForClusterMode=False) as endpoint:
        _, answer = await run_client(endpoint, "send_refused", TOPIC, GROUP, env=keys(USER))
    assert answer["error"] == "InternalErrorException" and answer["code"] == 50001, answer
    assert "AclException: No accessKey is configured" in answer["text"]


async def test_local_mode_reads_the_brokers_file(tmp_path: Path) -> None:
    """`mqbroker --enable-proxy` with aclEnable=true: rmq-proxy.json says only enableACL and
    enableAclRpcHookForClusterMode; the proxy takes the broker's home and plain_acl.yml."""
    home = acl_home(tmp_path)
    broker_port = free_ports(3, below=2)
    proxy_port = broker_port + 2
    conf = tmp_path / "broker.conf"
    conf.write_text(
        f"brokerName=broker-a\nlistenPort={broker_port}\nbrokerIP1=127.0.0.1\n"
        f"storePathRootDir={tmp_path / 'store'}\naclEnable=true\nrocketmqHome={home}\n"
    )
    proxy_conf = tmp_path / "rmq-proxy.json"
    proxy_conf.write_text(json.dumps({"enableACL": True, "enableAclRpcHookForClusterMode": True, **FAST}))
    async with loopback_namesrv() as ns:
        args = ["broker", "-c", str(conf), "-n", ns.address, "--enable-proxy", "-pc", str(proxy_conf)]
        args += ["--proxy-port", str(proxy_port), "--log-level", "WARNING"]
        with started(args, tmp_path / "broker.log") as proc:
            await wait_for_line(proc, "The store path", tmp_path / "broker.log")
            await create_topic(f"127.0.0.1:{broker_port}", ns.address, TOPIC)
            endpoint = f"127.0.0.1:{proxy_port}"
            sent = await run_client(endpoint, "send", TOPIC, GROUP, "1", env=keys(USER))
            got = await run_client(endpoint, "receive", TOPIC, GROUP, "1", env=keys(USER))
            route, refused = await run_client(endpoint, "send_refused", TOPIC, GROUP, env=keys((USER[0], "wrong")))
    assert got[0]["id"] == sent[0]["sent"] and got[-1] == {"received": 1}
    assert route["route"] == 40100 and "Check signature failed" in route["message"], (route, refused)


def test_settings_need_their_files(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="rocketmqHome"):
        ProxyServer(ProxyConfig.from_mapping({"enableACL": True, "namesrvAddr": "x:1"}))
    with pytest.raises(ValueError, match="does not exist"):
        ProxyServer(ProxyConfig.from_mapping({"enableACL": True, "rocketmqHome": str(tmp_path), "namesrvAddr": "x:1"}))
    with pytest.raises(ValueError, match="tools.yml"):
        ProxyServer(
            ProxyConfig.from_mapping(
                {"enableAclRpcHookForClusterMode": "true", "rocketmqHome": str(tmp_path), "namesrvAddr": "x:1"}
            )
        )
    home = acl_home(tmp_path)
    config = ProxyConfig.from_mapping({"enableACL": "true", "rocketmqHome": str(home), "aclPlainFile": "other.yml"})
    assert config.acl_file() == home / "other.yml"
    config.enable_acl_rpc_hook_for_cluster_mode = True
    assert config.broker_credentials() == ADMIN


def test_authorization_header() -> None:
    """The 5.x clients' signature: hex HMAC-SHA1 of x-mq-date-time with the secret key."""
    value = "MQv2-HMAC-SHA1 Credential=ak/x, SignedHeaders=x-mq-date-time, Signature=ABCdef"
    assert parse_authorization(value) == ("ak", "ABCdef")
    for bad in ("MQv2-HMAC-SHA1", "MQv2-HMAC-SHA1 Credential"):
        with pytest.raises(AclDenied):
            parse_authorization(bad)
    # RFC 2202's HMAC-SHA1 test case 2 (key "Jefe")
    assert signature("what do ya want for nothing?", "Jefe") == "effcdf6ae5eb2fa2d27416d5f184df9c259a7c79"


def test_needed_resources() -> None:
    topic, group = d.Resource(name="T"), d.Resource(name="G")
    queue = d.MessageQueue(topic=topic)
    pub, sub, any_ = 4, 8, 2
    send = s.SendMessageRequest(messages=[d.Message(topic=topic)])
    assert needed_resources(send) == {"T": pub}
    assert needed_resources(s.ReceiveMessageRequest(group=group, message_queue=queue)) == {"%RETRY%G": sub, "T": sub}
    assert needed_resources(s.AckMessageRequest(group=group, topic=topic)) == {"%RETRY%G": sub, "T": sub}
    assert needed_resources(s.QueryRouteRequest(topic=topic)) == {"T": any_}
    assert needed_resources(s.EndTransactionRequest(topic=topic)) == {"T": pub}
    assert needed_resources(s.HeartbeatRequest(client_type=d.PRODUCER)) == {}
    with pytest.raises(AclDenied, match="group"):
        needed_resources(s.HeartbeatRequest(client_type=d.SIMPLE_CONSUMER))
    settings = d.Settings(publishing=d.Publishing(topics=[topic]))
    assert needed_resources(s.TelemetryCommand(settings=settings)) == {"T": pub}
    subscription = d.Subscription(group=group, subscriptions=[d.SubscriptionEntry(topic=topic)])
    assert needed_resources(s.TelemetryCommand(settings=d.Settings(subscription=subscription))) == {
        "%RETRY%G": sub,
        "T": sub,
    }
    with pytest.raises(AclDenied, match="publishing or subscription"):
        needed_resources(s.TelemetryCommand(settings=d.Settings()))
    assert Call("X", {}, ("127.0.0.1", 1)).metadata("authorization") == ""


def test_white_listed_addresses_pass_unsigned(tmp_path: Path) -> None:
    acl_file = tmp_path / "plain_acl.yml"
    acl_file.write_text(PLAIN_ACL.replace("globalWhiteRemoteAddresses:", "globalWhiteRemoteAddresses:\n  - 10.1.*.*"))
    acl = GrpcAcl(acl_file)
    send = s.SendMessageRequest(messages=[d.Message(topic=d.Resource(name=SUB_TOPIC))])
    acl.check(Call("SendMessage", {}, ("10.1.2.3", 5000)), send)
    acl.check(Call("SendMessage", {}, ("::ffff:10.1.2.3", 5000)), send)
    with pytest.raises(AclDenied, match="No accessKey"):
        acl.check(Call("SendMessage", {}, ("10.2.2.3", 5000)), send)
    date = "20250102T030405Z"
    signed = {
        "x-mq-date-time": date,
        "authorization": f"MQv2-HMAC-SHA1 Credential={USER[0]}, SignedHeaders=x-mq-date-time, "
        f"Signature={signature(date, USER[1]).upper()}",
    }
    with pytest.raises(AclDenied, match="No PUB permission for topic:SubTopic"):
        acl.check(Call("SendMessage", signed, ("10.2.2.3", 5000)), send)
    acl.check(
        Call("SendMessage", signed, ("10.2.2.3", 5000)),
        s.SendMessageRequest(messages=[d.Message(topic=d.Resource(name=TOPIC))]),
    )
