"""SQL92 property filters: the parser and evaluator as tables, then the broker's use of them."""

from __future__ import annotations

import json
from typing import Any

import pytest

from rmq.broker.filter import SqlFilterError, compile_sql92
from rmq.protocol import RequestCode, ResponseCode
from rmq.protocol.message import iter_records

from .cluster import Cluster
from .test_send_pull import pull_ext, send_ext

PROPS = {"a": "7", "b": "x", "c": "3.5", "neg": "-2", "flag": "true", "word": "seven", "TAGS": "TagA", "q": "it's"}

MATCHES = [
    # comparisons, numbers read from text
    ("a > 5", True),
    ("a > 7", False),
    ("a >= 7", True),
    ("a < 10", True),
    ("a <= 6", False),
    ("a = 7", True),
    ("a = 7.0", True),
    ("a <> 7", False),
    ("a != 8", True),
    ("c > 3", True),
    ("c < 3.6", True),
    ("neg < 0", True),
    ("neg = -2", True),
    ("a > -1", True),
    ("a = +7", True),
    ("a = 0x7", True),
    ("a = 7L", True),
    ("a > 1e0", True),
    # strings
    ("b = 'x'", True),
    ("b = 'y'", False),
    ("b <> 'y'", True),
    ("q = 'it''s'", True),
    ("TAGS = 'TagA'", True),
    # booleans
    ("flag = TRUE", True),
    ("flag = FALSE", False),
    ("TRUE", True),
    ("FALSE", False),
    # AND, OR, NOT, parentheses, precedence
    ("a > 5 AND b = 'x'", True),
    ("a > 5 AND b = 'y'", False),
    ("a > 50 OR b = 'x'", True),
    ("NOT a = 7", False),
    ("NOT (a = 8)", True),
    ("a = 1 OR a = 2 OR a = 7", True),
    ("a = 7 OR b = 'q' AND c > 100", True),
    ("(a = 7 OR b = 'q') AND c > 100", False),
    ("not a > 5 and b = 'x'", False),
    ("NOT NOT a = 7", True),
    # IS NULL, BETWEEN, IN
    ("zz IS NULL", True),
    ("a IS NULL", False),
    ("a IS NOT NULL", True),
    ("zz IS NOT NULL", False),
    ("a BETWEEN 7 AND 9", True),
    ("a BETWEEN 8 AND 9", False),
    ("a NOT BETWEEN 8 AND 9", True),
    ("a NOT BETWEEN 1 AND 9", False),
    ("c BETWEEN 3 AND 4", True),
    ("b IN ('x', 'y')", True),
    ("b IN ('y')", False),
    ("b NOT IN ('y', 'z')", True),
    ("b NOT IN ('x')", False),
    # missing properties never match, however the test is written
    ("zz = 1", False),
    ("zz <> 1", False),
    ("NOT zz = 1", False),
    ("zz > 1", False),
    ("zz < 1", False),
    ("zz BETWEEN 1 AND 2", False),
    ("zz NOT BETWEEN 1 AND 2", False),
    ("zz IN ('x')", False),
    ("zz NOT IN ('x')", False),
    ("zz = 'x' OR a = 7", True),
    ("zz = 'x' AND a = 7", False),
    ("NOT (zz = 'x' AND a = 7)", True),  # AND turns unknown into false, as RocketMQ's evaluator does
    # text that is not a number compares as unknown
    ("word > 5", False),
    ("word = 7", False),
    ("word <> 7", False),
    ("b = 7", False),
    # keywords in any case
    ("a between 6 and 8 and b in ('x')", True),
    ("zz is null", True),
]


@pytest.mark.parametrize(("expression", "expected"), MATCHES)
def test_evaluation(expression: str, expected: bool) -> None:
    assert compile_sql92(expression).matches(PROPS) is expected


ERRORS = [
    ("", 0, "empty expression"),
    ("a >", 3, "expected an operand"),
    ("a > 'x'", 4, "only numbers"),
    ("'x' < 3", 0, "only numbers"),
    ("a BETWEEN 'x' AND 3", 10, "only numbers"),
    ("(a = 1", 6, "expected ')'"),
    ("a = 1)", 5, "unexpected text"),
    ("a = 1 b = 2", 6, "unexpected text"),
    ("a IN (1, 2)", 6, "IN takes string literals"),
    ("a IN ('x' 'y')", 10, "',' or ')'"),
    ("b = 'open", 4, "unterminated string"),
    ("a = 1 AND", 9, "expected an operand"),
    ("a IS 5", 5, "NULL after IS"),
    ("a NOT 5", 6, "BETWEEN or IN after NOT"),
    ("a", 1, "expected a comparison"),
    ("a LIKE 'x%'", 2, "LIKE is not supported"),
    ("a = #", 4, "unexpected character"),
    ("a BETWEEN 1 OR 2", 12, "AND in BETWEEN"),
    ("- a", 2, "number after the sign"),
]


@pytest.mark.parametrize(("expression", "position", "message"), ERRORS)
def test_errors_name_the_position(expression: str, position: int, message: str) -> None:
    with pytest.raises(SqlFilterError) as info:
        compile_sql92(expression)
    assert info.value.position == position
    assert message in str(info.value) and f"at position {position}" in str(info.value)


# -- at the broker -----------------------------------------------------------------------------


@pytest.fixture
def broker_props() -> dict[str, str]:
    return {"enablePropertyFilter": "true"}


def heartbeat(expression: str, expression_type: str = "SQL92", group: str = "SQLG") -> bytes:
    return json.dumps(
        {
            "clientID": "sql-client",
            "consumerDataSet": [
                {
                    "groupName": group,
                    "consumeType": "CONSUME_PASSIVELY",
                    "messageModel": "CLUSTERING",
                    "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET",
                    "subscriptionDataSet": [
                        {"topic": "Props", "subString": expression, "expressionType": expression_type, "subVersion": 1}
                    ],
                }
            ],
        }
    ).encode()


async def fill(cluster: Cluster) -> None:
    for i in range(10):
        props = {"i": str(i), "color": "red" if i % 2 else "blue", "UNIQ_KEY": f"U{i}"}
        r = await cluster.call(RequestCode.SEND_MESSAGE, send_ext(topic="Props", props=props), f"m{i}".encode())
        assert r.code == 0
    await cluster.broker.store.wait_dispatched()


async def pull_sql(cluster: Cluster, **kw: Any) -> Any:
    ext = pull_ext("Props", 0, 0, **kw)
    ext["consumerGroup"] = "SQLG"
    return await cluster.call(RequestCode.PULL_MESSAGE, ext)


async def test_pull_filters_by_the_heartbeat_subscription(cluster: Cluster) -> None:
    await fill(cluster)
    r = await cluster.call(RequestCode.HEART_BEAT, body=heartbeat("i >= 4 AND color = 'red'"))
    assert r.code == 0, r.remark
    pulled = await pull_sql(cluster, sys_flag=0)
    assert pulled.code == ResponseCode.SUCCESS, pulled.remark
    assert [m.body for m in iter_records(pulled.body)] == [b"m5", b"m7", b"m9"]
    assert pulled.ext_fields["nextBeginOffset"] == "10"


async def test_pull_with_its_own_expression(cluster: Cluster) -> None:
    await fill(cluster)
    pulled = await pull_sql(cluster, subscription="i BETWEEN 2 AND 3", expressionType="SQL92")
    assert [m.body for m in iter_records(pulled.body)] == [b"m2", b"m3"]
    none = await pull_sql(cluster, subscription="i > 100", expressionType="SQL92")
    assert none.code == ResponseCode.PULL_RETRY_IMMEDIATELY and none.ext_fields["nextBeginOffset"] == "10"
    bad = await pull_sql(cluster, subscription="i >", expressionType="SQL92")
    assert bad.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
    assert "at position 3" in (bad.remark or "")


async def test_a_bad_expression_is_refused_at_heartbeat(cluster: Cluster) -> None:
    r = await cluster.call(RequestCode.HEART_BEAT, body=heartbeat("color = 'red' AND"))
    assert r.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
    assert "topic Props" in (r.remark or "") and "at position 17" in (r.remark or "")
    assert cluster.broker.clients.consumer_group("SQLG") is None


async def test_check_client_config(cluster: Cluster) -> None:
    def body(expression: str, kind: str = "SQL92") -> bytes:
        return json.dumps(
            {
                "clientId": "c",
                "group": "SQLG",
                "subscriptionData": {"topic": "Props", "subString": expression, "expressionType": kind},
            }
        ).encode()

    assert (await cluster.call(RequestCode.CHECK_CLIENT_CONFIG, body=body("a > 1"))).code == 0
    assert (await cluster.call(RequestCode.CHECK_CLIENT_CONFIG, body=body("TagA", "TAG"))).code == 0
    bad = await cluster.call(RequestCode.CHECK_CLIENT_CONFIG, body=body("a >> 1"))
    assert bad.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED and "position 3" in (bad.remark or "")


@pytest.mark.parametrize("broker_props", [{"enablePropertyFilter": "false"}])
async def test_disabled_property_filter(cluster: Cluster, broker_props: dict[str, str]) -> None:
    await fill(cluster)
    pulled = await pull_sql(cluster, subscription="i > 1", expressionType="SQL92")
    assert pulled.code == ResponseCode.SYSTEM_ERROR and "SQL92" in (pulled.remark or "")
    body = json.dumps(
        {
            "clientId": "c",
            "group": "G",
            "subscriptionData": {"topic": "Props", "subString": "i > 1", "expressionType": "SQL92"},
        }
    ).encode()
    assert (await cluster.call(RequestCode.CHECK_CLIENT_CONFIG, body=body)).code == ResponseCode.SYSTEM_ERROR


async def test_tag_filters_still_use_the_hash(cluster: Cluster) -> None:
    for tag in ("TagA", "TagB", "TagC"):
        await cluster.call(RequestCode.SEND_MESSAGE, send_ext(topic="Tags", props={"TAGS": tag}), tag.encode())
    await cluster.broker.store.wait_dispatched()
    pulled = await cluster.call(RequestCode.PULL_MESSAGE, pull_ext("Tags", 0, 0, subscription="TagA || TagC"))
    assert [m.body for m in iter_records(pulled.body)] == [b"TagA", b"TagC"]
