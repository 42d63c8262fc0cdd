"""plain_acl.yml as data: white-list patterns, accounts and permissions, and the decision for
one request (no broker, no file)."""

from __future__ import annotations

import pytest

from rmq.broker.acl import AclConfigError, AclDenied, check, parse_acl
from rmq.broker.acl.addresses import AddressPatternError, client_ip, expand_ip, parse_pattern
from rmq.broker.acl.model import DENY, PUB, SUB, check_permission, load_yaml, parse_perm
from rmq.broker.acl.validator import needed_resources
from rmq.protocol import RemotingCommand, RequestCode
from rmq.protocol import acl as signing
from rmq.protocol import body as json_body

from .conftest import PLAIN_ACL, USER


@pytest.mark.parametrize(
    ("pattern", "ip", "matches"),
    [
        ("", "127.0.0.1", False),
        ("*", "127.0.0.1", True),
        ("*.*.*.*", "10.1.2.3", True),
        ("*:*:*:*:*:*:*:*", "::1", True),
        ("127.0.0.1", "127.0.0.1", True),
        ("127.0.0.1", "127.0.0.2", False),
        ("192.168.0.*", "192.168.0.255", True),
        ("192.168.0.*", "192.168.1.1", False),
        ("192.168.*.*", "192.168.77.1", True),
        ("192.168.*", "192.168.77.1", None),  # refused: four parts needed
        ("192.168.1.1-10", "192.168.1.10", True),
        ("192.168.1.1-10", "192.168.1.11", False),
        ("192.168.1-3.*", "192.168.3.99", True),
        ("192.168.1-3.*", "192.168.4.1", False),
        ("192.168.0.{1,2,3}", "192.168.0.3", True),
        ("192.168.0.{1,2,3}", "192.168.0.4", False),
        ("10.0.0.1,10.0.0.2", "10.0.0.2", True),
        ("10.0.0.1,10.0.0.2", "10.0.0.3", False),
        ("::1", "0:0:0:0:0:0:0:1", True),
        ("1050:0000:0000:0000:0005:0600:300c:326b", "1050::5:600:300c:326b", True),
        ("1050::0005:0600:300c:{1,2}", "1050::5:600:300c:2", True),
        ("1050:0:0:0:5:600:300c:*", "1050::5:600:300c:ffff", True),
        ("1050:0:0:0:5:600:300c:*", "1050::5:600:300d:1", False),
        ("1050:0:0:0:5:600:300c:1-ff", "1050::5:600:300c:ff", True),
        ("1050:0:0:0:5:600:300c:1-ff", "1050::5:600:300c:100", False),
        ("1050:0:0:0:5:600:300c:1-ff", "10.0.0.1", False),
        ("10.0.0.*", "1050::5:600:300c:1", False),
        ("256.0.0.1", "", None),
        ("192.168.0.1-", "", None),
        ("192.168.0.-1", "", None),
        ("192.168.0.9-1", "", None),
        ("*.168.0.1", "", None),
        ("1050:*:0:0:5:600:300c:1", "", None),
        ("10.0.0.{1,x}", "", None),
        ("hostname", "", None),
    ],
)
def test_white_list_patterns(pattern: str, ip: str, matches: bool | None) -> None:
    if matches is None:
        with pytest.raises(AddressPatternError):
            parse_pattern(pattern)
    else:
        assert parse_pattern(pattern).match(ip) is matches


def test_addresses() -> None:
    assert expand_ip("::1", 8) == "0000:0000:0000:0000:0000:0000:0000:0001"
    assert expand_ip("10.0.0.1", 8) == "10.0.0.1"
    assert client_ip("127.0.0.1:45678") == "127.0.0.1"
    assert client_ip("[::1]:45678") == "::1"
    assert client_ip("::ffff:10.1.2.3:9") == "10.1.2.3"


def test_permissions() -> None:
    assert [parse_perm(t, "x") for t in (None, "DENY", "PUB", "SUB", "PUB|SUB", "SUB|PUB", " pub | sub ")] == [
        DENY,
        DENY,
        PUB,
        SUB,
        PUB | SUB,
        PUB | SUB,
        PUB | SUB,
    ]
    with pytest.raises(AclConfigError, match="not DENY, PUB, SUB or PUB|SUB"):
        parse_perm("ALL", "topicPerms entry")
    assert check_permission(PUB, PUB | SUB) and check_permission(SUB, SUB)
    assert not check_permission(PUB, SUB) and not check_permission(SUB, DENY) and not check_permission(PUB, DENY | PUB)


def test_the_example_file() -> None:
    model = parse_acl(load_yaml(PLAIN_ACL))
    assert model.global_white_addrs == ("10.10.103.*",)
    assert model.white_listed("10.10.103.7") and not model.white_listed("127.0.0.1")
    user = model.accounts["RocketMQUser"]
    assert not user.admin
    assert user.owned("TopicPub") == PUB | SUB
    assert user.owned("TopicElse") == DENY  # defaultTopicPerm
    assert user.owned("%RETRY%GroupDeny") == DENY
    assert user.owned("%RETRY%GroupElse") == SUB  # defaultGroupPerm
    assert model.accounts["RocketMQAdmin"].owned("Anything") == DENY  # no default given: DENY
    assert parse_acl(load_yaml("")).accounts == {}


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("accounts: [unclosed", "not valid YAML"),
        ("- a list", "top level must be a mapping"),
        ("accounts: {accessKey: RocketMQ}", "accounts must be a list"),
        ("globalWhiteRemoteAddresses: 10.0.0.1", "must be a list"),
        ("globalWhiteRemoteAddresses: [10.0.0.300]", "10.0.0.300"),
        ("accounts: [{secretKey: 12345678}]", "account #1: an account has no accessKey"),
        ("accounts: [{accessKey: short, secretKey: 12345678}]", "accessKey must be longer than 6"),
        ("accounts: [{accessKey: RocketMQ}]", "secretKey must be longer than 6"),
        ("accounts: [{accessKey: RocketMQ, secretKey: 1234567, topicPerms: [a]}]", "is not name=PERM"),
        ("accounts: [{accessKey: RocketMQ, secretKey: 1234567, groupPerms: [g=ALL]}]", "groupPerms entry 'g=ALL'"),
        ("accounts: [{accessKey: RocketMQ, secretKey: 1234567, defaultTopicPerm: NONE}]", "defaultTopicPerm"),
        ("accounts: [{accessKey: RocketMQ, secretKey: 1234567, whiteRemoteAddress: x.y}]", "whiteRemoteAddress"),
        (
            "accounts: [{accessKey: RocketMQ, secretKey: 1234567}, {accessKey: RocketMQ, secretKey: 7654321}]",
            "defined twice",
        ),
    ],
)
def test_unusable_files(text: str, error: str) -> None:
    with pytest.raises(AclConfigError, match=error):
        parse_acl(load_yaml(text))


def request(code: int, ext: dict[str, object] | None = None, body: bytes = b"") -> RemotingCommand:
    return RemotingCommand.request(code, ext, body)


def test_resources_by_request_code() -> None:
    def needed(code: int, ext: dict[str, object] | None = None, body: bytes = b"") -> dict[str, int]:
        return needed_resources(request(code, ext, body))

    assert needed(RequestCode.SEND_MESSAGE, {"topic": "T", "producerGroup": "P"}) == {"T": PUB}
    assert needed(RequestCode.SEND_MESSAGE_V2, {"b": "T", "a": "P"}) == {"T": PUB}
    assert needed(RequestCode.SEND_BATCH_MESSAGE, {"b": "T"}) == {"T": PUB}
    assert needed(RequestCode.SEND_MESSAGE_V2, {"b": "%RETRY%G"}) == {"%RETRY%G": SUB}
    assert needed(RequestCode.PULL_MESSAGE, {"topic": "T", "consumerGroup": "G"}) == {"T": SUB, "%RETRY%G": SUB}
    assert needed(RequestCode.CONSUMER_SEND_MSG_BACK, {"group": "G"}) == {"%RETRY%G": SUB}
    assert needed(RequestCode.QUERY_MESSAGE, {"topic": "T"}) == {"T": SUB}
    for code in (RequestCode.UPDATE_CONSUMER_OFFSET, RequestCode.QUERY_CONSUMER_OFFSET):
        assert needed(code, {"topic": "T", "consumerGroup": "G"}) == {"T": SUB, "%RETRY%G": SUB}
    assert needed(RequestCode.UNREGISTER_CLIENT, {"consumerGroup": "", "producerGroup": "P"}) == {}
    assert needed(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "G"}) == {"%RETRY%G": SUB}
    heartbeat = {
        "consumerDataSet": [
            {"groupName": "G", "subscriptionDataSet": [{"topic": "T"}, {"topic": "%RETRY%G"}]},
        ],
        "producerDataSet": [{"groupName": "P"}],
    }
    assert needed(RequestCode.HEART_BEAT, None, json_body.dumps(heartbeat)) == {"%RETRY%G": SUB, "T": SUB}
    lock = {"consumerGroup": "G", "mqSet": [{"topic": "T", "brokerName": "b", "queueId": 0}]}
    assert needed(RequestCode.LOCK_BATCH_MQ, None, json_body.dumps(lock)) == {"%RETRY%G": SUB, "T": SUB}
    assert needed(RequestCode.GET_MAX_OFFSET, {"topic": "T", "queueId": 0}) == {}
    with pytest.raises(AclDenied, match="heartbeat body"):
        needed(RequestCode.HEART_BEAT, None, b"[1, 2]")


ADMINS = """
accounts:
  - {accessKey: PlainAdmin, secretKey: 12345678, admin: true}
  - {accessKey: ScopedAdmin, secretKey: 12345678, admin: true, topicPerms: [Mine=PUB]}
  - {accessKey: TraceUser, secretKey: 12345678}
"""


def signed(code: int, ext: dict[str, object], account: str, secret: str = "12345678") -> RemotingCommand:
    command = request(code, ext, b"body")
    signing.sign(command.ext_fields, command.body, account, secret)
    return command


def test_admins_and_the_trace_topic() -> None:
    model = parse_acl(load_yaml(ADMINS))
    # an admin without topicPerms/groupPerms may touch everything
    check(model, signed(RequestCode.SEND_MESSAGE, {"topic": "Any"}, "PlainAdmin"), "127.0.0.1")
    check(model, signed(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "Any"}, "PlainAdmin"), "127.0.0.1")
    # one with some falls back to the defaults (DENY) for the rest, as RocketMQ does
    check(model, signed(RequestCode.SEND_MESSAGE, {"topic": "Mine"}, "ScopedAdmin"), "127.0.0.1")
    with pytest.raises(AclDenied, match="No PUB permission for topic:Other, accessKey=ScopedAdmin"):
        check(model, signed(RequestCode.SEND_MESSAGE, {"topic": "Other"}, "ScopedAdmin"), "127.0.0.1")
    # message traces go to RMQ_SYS_TRACE_TOPIC without a permission for it
    check(model, signed(RequestCode.SEND_MESSAGE, {"topic": "RMQ_SYS_TRACE_TOPIC"}, "TraceUser"), "127.0.0.1")
    with pytest.raises(AclDenied, match="Need admin permission for request UPDATE_AND_CREATE_TOPIC"):
        check(model, signed(RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": "T"}, "TraceUser"), "127.0.0.1")
    # the signature covers the body
    tampered = signed(RequestCode.SEND_MESSAGE, {"topic": "Any"}, "PlainAdmin")
    tampered.body = b"other"
    with pytest.raises(AclDenied, match="Check signature failed for accessKey=PlainAdmin"):
        check(model, tampered, "127.0.0.1")
    # and requests with no resources need a good signature only
    check(model, signed(RequestCode.GET_MAX_OFFSET, {"topic": "T", "queueId": 0}, "TraceUser"), "127.0.0.1")
    unsigned = request(RequestCode.GET_MAX_OFFSET, {"topic": "T", "queueId": 0})
    with pytest.raises(AclDenied, match="No accessKey is configured"):
        check(model, unsigned, "127.0.0.1")
    assert USER[0] not in model.accounts
