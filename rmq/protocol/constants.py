"""RocketMQ's wire constants: permission bits, sys-flags, the master's id, system topic and
group names, and topic-name validation. Every layer takes them from here.

Sources in apache/rocketmq: PermName, TopicSysFlag, PullSysFlag, MixAll, TopicValidator.
"""

from __future__ import annotations

import re

# -- PermName: what a topic, a queue or a broker allows ----------------------------------------

PERM_PRIORITY = 0x8
PERM_READ = 0x4
PERM_WRITE = 0x2
PERM_INHERIT = 0x1  # TBW102's: topics auto-created from it take its other bits


def perm_to_string(perm: int) -> str:
    """PermName.perm2String: "RW-" style (read, write, inherit)."""
    return (
        ("R" if perm & PERM_READ else "-") + ("W" if perm & PERM_WRITE else "-") + ("X" if perm & PERM_INHERIT else "-")
    )


# -- TopicSysFlag -------------------------------------------------------------------------------

TOPIC_SYS_FLAG_UNIT = 0x1
TOPIC_SYS_FLAG_UNIT_SUB = 0x2

# -- PullSysFlag: PULL_MESSAGE's sysFlag ---------------------------------------------------------

PULL_COMMIT_OFFSET = 0x1
PULL_SUSPEND = 0x2
PULL_SUBSCRIPTION = 0x4
PULL_CLASS_FILTER = 0x8
PULL_LITE = 0x10

# -- MixAll -------------------------------------------------------------------------------------

MASTER_ID = 0  # a broker group's master; slaves have other ids

RETRY_PREFIX = "%RETRY%"
DLQ_PREFIX = "%DLQ%"

DEFAULT_PRODUCER_GROUP = "DEFAULT_PRODUCER"
CLIENT_INNER_PRODUCER_GROUP = "CLIENT_INNER_PRODUCER"
TOOLS_CONSUMER_GROUP = "TOOLS_CONSUMER"  # pulls made by tools
FILTERSRV_CONSUMER_GROUP = "FILTERSRV_CONSUMER"
SELF_TEST_CONSUMER_GROUP = "SELF_TEST_C_GROUP"
MONITOR_CONSUMER_GROUP = "__MONITOR_CONSUMER"
TRANS_CHECK_GROUP = "CID_RMQ_SYS_TRANS"  # MixAll.CID_SYS_RMQ_TRANS: the broker's transaction checks

# Groups a broker has from its start (SubscriptionGroupManager.init).
BUILTIN_GROUPS = (
    TOOLS_CONSUMER_GROUP,
    FILTERSRV_CONSUMER_GROUP,
    SELF_TEST_CONSUMER_GROUP,
    "CID_ONS-HTTP-PROXY",
    "CID_ONSAPI_PULL",
    "CID_ONSAPI_PERMISSION",
    "CID_ONSAPI_OWNER",
)


# ExpressionType, and the TAG expression of every tag (SubscriptionData.SUB_ALL)
EXPRESSION_TAG = "TAG"
EXPRESSION_SQL92 = "SQL92"
SUB_ALL = "*"


def retry_topic(group: str) -> str:
    return RETRY_PREFIX + group


def dlq_topic(group: str) -> str:
    return DLQ_PREFIX + group


# Request-reply (MixAll.REPLY_TOPIC_POSTFIX, REPLY_MESSAGE_FLAG): replies go to their cluster's
# reply topic, and MSG_TYPE "reply" makes a client send them with SEND_REPLY_MESSAGE(_V2).
REPLY_TOPIC_POSTFIX = "REPLY_TOPIC"
REPLY_MESSAGE_FLAG = "reply"


def reply_topic(cluster: str) -> str:
    return f"{cluster}_{REPLY_TOPIC_POSTFIX}"


# -- TopicValidator -----------------------------------------------------------------------------

AUTO_CREATE_TOPIC = "TBW102"  # the template of topics created on first send
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"  # delay-level messages until due
BENCHMARK_TOPIC = "BenchmarkTest"
TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
TRANS_OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
TRANS_CHECK_MAX_TIME_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"  # the default message-trace topic
SELF_TEST_TOPIC = "SELF_TEST_TOPIC"
OFFSET_MOVED_EVENT = "OFFSET_MOVED_EVENT"
TIMER_TOPIC = "rmq_sys_wheel_timer"  # timer messages until due (RocketMQ 5's TimerMessageStore)

# Producers may not send to these (TopicValidator.NOT_ALLOWED_SEND_TOPIC_SET).
NOT_ALLOWED_SEND_TOPICS = frozenset(
    {
        SCHEDULE_TOPIC,
        TRANS_HALF_TOPIC,
        TRANS_OP_HALF_TOPIC,
        TRANS_CHECK_MAX_TIME_TOPIC,
        SELF_TEST_TOPIC,
        OFFSET_MOVED_EVENT,
    }
)
# No one may create or update these (TopicValidator.isSystemTopic: its set and the rmq_sys_
# topics); a broker adds its cluster's and its own name.
SYSTEM_TOPICS = NOT_ALLOWED_SEND_TOPICS | {AUTO_CREATE_TOPIC, BENCHMARK_TOPIC, TRACE_TOPIC, TIMER_TOPIC}

TOPIC_MAX_LENGTH = 127
VALID_TOPIC = re.compile(r"[%|a-zA-Z0-9_-]+")  # whole names only: use fullmatch


def topic_error(topic: str) -> str | None:
    """Why `topic` is not a valid topic name (TopicValidator.validateTopic), or None."""
    if not topic or not topic.strip():
        return "The specified topic is blank."
    if not VALID_TOPIC.fullmatch(topic):
        return f"The specified topic[{topic}] contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
    if len(topic) > TOPIC_MAX_LENGTH:
        return f"The specified topic is longer than topic max length {TOPIC_MAX_LENGTH}."
    return None
