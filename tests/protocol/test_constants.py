"""The wire constants against the Java classes they come from (apache/rocketmq 4.9.8:
PermName, TopicSysFlag, PullSysFlag, MixAll, TopicValidator)."""

from __future__ import annotations

import pytest

from rmq.protocol import constants as C


@pytest.mark.parametrize(
    ("perm", "text"),
    [(0, "---"), (C.PERM_READ, "R--"), (C.PERM_READ | C.PERM_WRITE, "RW-"), (7, "RWX"), (C.PERM_PRIORITY | 2, "-W-")],
)
def test_perm_to_string(perm: int, text: str) -> None:
    assert C.perm_to_string(perm) == text


def test_bits() -> None:
    assert (C.PERM_PRIORITY, C.PERM_READ, C.PERM_WRITE, C.PERM_INHERIT) == (1 << 3, 1 << 2, 1 << 1, 1)
    assert (C.TOPIC_SYS_FLAG_UNIT, C.TOPIC_SYS_FLAG_UNIT_SUB) == (1, 2)
    pull = (C.PULL_COMMIT_OFFSET, C.PULL_SUSPEND, C.PULL_SUBSCRIPTION, C.PULL_CLASS_FILTER, C.PULL_LITE)
    assert pull == (1, 2, 4, 8, 16)
    assert C.MASTER_ID == 0


def test_topic_sets() -> None:
    assert C.NOT_ALLOWED_SEND_TOPICS == {
        "SCHEDULE_TOPIC_XXXX",
        "RMQ_SYS_TRANS_HALF_TOPIC",
        "RMQ_SYS_TRANS_OP_HALF_TOPIC",
        "TRANS_CHECK_MAX_TIME_TOPIC",
        "SELF_TEST_TOPIC",
        "OFFSET_MOVED_EVENT",
    }
    assert C.SYSTEM_TOPICS == C.NOT_ALLOWED_SEND_TOPICS | {
        "TBW102",
        "BenchmarkTest",
        "RMQ_SYS_TRACE_TOPIC",
        "rmq_sys_wheel_timer",
    }
    assert C.retry_topic("g") == "%RETRY%g" and C.dlq_topic("g") == "%DLQ%g"


@pytest.mark.parametrize(
    ("topic", "error"),
    [
        ("TopicTest", None),
        ("%RETRY%g|x-_1", None),
        ("a" * 127, None),
        ("", "The specified topic is blank."),
        ("  ", "The specified topic is blank."),
        ("a b", "The specified topic[a b] contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"),
        ("T\n", "The specified topic[T\n] contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"),
        ("é", "The specified topic[é] contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"),
        ("a" * 128, "The specified topic is longer than topic max length 127."),
    ],
)
def test_topic_error(topic: str, error: str | None) -> None:
    assert C.topic_error(topic) == error
