"""Exports of a cluster's metadata, settings and figures as JSON documents (mqadmin's
exportMetadata, exportConfigs, exportMetrics): what Apache 4.9.8's commands put in
metadata.json (or topic.json, subscriptionGroup.json), configs.json and metrics.json.
The caller writes them (`write`)."""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from rmq.client import MQClientError
from rmq.client.admin import MQAdmin, SubscriptionGroupConfig, TopicConfig, version_desc
from rmq.protocol import CURRENT_VERSION
from rmq.protocol.bodies.configs import SubscriptionGroupWrapper, TopicConfigSerializeWrapper
from rmq.protocol.constants import (
    CLIENT_INNER_PRODUCER_GROUP,
    DEFAULT_PRODUCER_GROUP,
    DLQ_PREFIX,
    FILTERSRV_CONSUMER_GROUP,
    MONITOR_CONSUMER_GROUP,
    RETRY_PREFIX,
    SCHEDULE_TOPIC,
    SELF_TEST_CONSUMER_GROUP,
    TOOLS_CONSUMER_GROUP,
    TRANS_HALF_TOPIC,
)

from .brokers import item_on_masters
from .common import AdminError, now_ms

# Java's default folder: rocketmq/export in the system's temporary folder
DEFAULT_DIR = os.path.join(tempfile.gettempdir(), "rocketmq", "export")

# DefaultMQAdminExtImpl.SYSTEM_GROUP_SET, and MixAll.isSysConsumerGroup's prefix
SYSTEM_GROUPS = frozenset(
    {
        "DEFAULT_CONSUMER",
        DEFAULT_PRODUCER_GROUP,
        TOOLS_CONSUMER_GROUP,
        FILTERSRV_CONSUMER_GROUP,
        MONITOR_CONSUMER_GROUP,
        CLIENT_INNER_PRODUCER_GROUP,
        "SELF_TEST_P_GROUP",
        SELF_TEST_CONSUMER_GROUP,
        "CID_ONS-HTTP-PROXY",
        "CID_ONSAPI_PERMISSION",
        "CID_ONSAPI_OWNER",
    }
)
SYSTEM_GROUP_PREFIX = "CID_RMQ_SYS_"

# ExportConfigsCommand.needBrokerProprties: the broker settings configs.json keeps
EXPORTED_BROKER_KEYS = (
    "brokerClusterName",
    "brokerId",
    "brokerName",
    "brokerRole",
    "fileReservedTime",
    "filterServerNums",
    "flushDiskType",
    "maxMessageSize",
    "messageDelayLevel",
    "msgTraceTopicName",
    "slaveReadEnable",
    "traceOn",
    "traceTopicEnable",
    "useTLS",
    "autoCreateTopicEnable",
    "autoCreateSubscriptionGroup",
)


def write(document: dict[str, Any], folder: str, name: str) -> Path:
    """`document` as pretty JSON in `folder`/`name` (folders made as needed); its path."""
    path = Path(folder) / name
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(document, indent="\t", sort_keys=True) + "\n", encoding="utf-8")
    except OSError as exc:
        raise AdminError(f"cannot write {path}: {exc.strerror or exc}") from None
    return path


# -- metadata ---------------------------------------------------------------------------------


async def user_topics(admin: MQAdmin, addr: str, special: bool) -> TopicConfigSerializeWrapper:
    """The broker's topics less the system's (getUserTopicConfig), and less retry and
    dead-letter topics unless `special`."""
    wrapper = await admin.topic_configs(addr)
    system = set(await admin.system_topics_on(addr))
    table = {
        name: tc
        for name, tc in wrapper.topic_config_table.items()
        if name not in system and (special or not name.startswith((RETRY_PREFIX, DLQ_PREFIX)))
    }
    return dataclasses.replace(wrapper, topic_config_table=table)


def is_system_group(group: str) -> bool:
    return group in SYSTEM_GROUPS or group.startswith(SYSTEM_GROUP_PREFIX)


async def user_groups(admin: MQAdmin, addr: str) -> SubscriptionGroupWrapper:
    """The broker's subscription groups less the system's (getUserSubscriptionGroup)."""
    wrapper = await admin.subscription_group_configs(addr)
    table = {name: g for name, g in wrapper.subscription_group_table.items() if not is_system_group(name)}
    return dataclasses.replace(wrapper, subscription_group_table=table)


async def broker_metadata(admin: MQAdmin, addr: str, *, special: bool, what: str) -> tuple[str, dict[str, Any]]:
    """(file name, document) of one broker's user topics (`what` "topic") or groups ("group"):
    its wrapper as the broker keeps it, data version included."""
    if what == "topic":
        return "topic.json", (await user_topics(admin, addr, special)).to_json()
    return "subscriptionGroup.json", (await user_groups(admin, addr)).to_json()


async def merged_metadata(
    admin: MQAdmin, masters: list[str], *, special: bool, what: str
) -> tuple[str, dict[str, Any]]:
    """(file name, document) of the user topics and groups of `masters` (a cluster's):
    a topic's queues and a group's retry queues summed over the masters that have it;
    `what` "topic" or "group" keeps one table, "" both (metadata.json)."""
    topics: dict[str, TopicConfig] = {}
    groups: dict[str, SubscriptionGroupConfig] = {}
    for addr in masters:
        for name, tc in (await user_topics(admin, addr, special)).topic_config_table.items():
            seen = topics.get(name)
            if seen is not None:
                tc = dataclasses.replace(
                    tc,
                    read_queue_nums=tc.read_queue_nums + seen.read_queue_nums,
                    write_queue_nums=tc.write_queue_nums + seen.write_queue_nums,
                )
            topics[name] = tc
        for name, g in (await user_groups(admin, addr)).subscription_group_table.items():
            seen_group = groups.get(name)
            if seen_group is not None:
                g = dataclasses.replace(g, retry_queue_nums=g.retry_queue_nums + seen_group.retry_queue_nums)
            groups[name] = g
    topic_table = {name: tc.to_json() for name, tc in topics.items()}
    group_table = {name: g.to_json() for name, g in groups.items()}
    document: dict[str, Any]
    if what == "topic":
        name, document = "topic.json", {"topicConfigTable": topic_table}
    elif what == "group":
        name, document = "subscriptionGroup.json", {"subscriptionGroupTable": group_table}
    else:
        name, document = "metadata.json", {"topicConfigTable": topic_table, "subscriptionGroupTable": group_table}
    document["exportTime"] = now_ms()
    return name, document


# -- configs ----------------------------------------------------------------------------------


async def cluster_configs(admin: MQAdmin, cluster: str) -> dict[str, Any]:
    """configs.json: each master's settings that matter (by broker name) and the cluster's
    scale (name servers, masters, slaves)."""
    members = (await admin.cluster_info()).members(cluster)
    broker_configs: dict[str, dict[str, str]] = {}
    masters = slaves = 0
    for _, broker_id, addr in members:
        if broker_id != 0:
            slaves += 1
            continue
        masters += 1
        props = await admin.broker_config(addr)
        # a key the broker does not have is left out, as fastjson leaves out nulls
        broker_configs[props.get("brokerName", addr)] = {k: props[k] for k in EXPORTED_BROKER_KEYS if k in props}
    scale = {"namesrvSize": len(admin.namesrv), "masterBrokerSize": masters, "slaveBrokerSize": slaves}
    return {"brokerConfigs": broker_configs, "clusterScale": scale}


# -- metrics ----------------------------------------------------------------------------------


def _first_number(text: str | None) -> float:
    """The first of the space-separated figures putTps and getTransferedTps carry."""
    try:
        return float((text or "0").split()[0])
    except (ValueError, IndexError):
        return 0.0


def _count(table: dict[str, str], key: str) -> int:
    try:
        return int(table.get(key) or 0)
    except ValueError:
        return 0


async def _client_versions(admin: MQAdmin, groups: SubscriptionGroupWrapper) -> list[str]:
    """ "LANGUAGE%Version" of every online consumer of the groups, sorted."""
    seen: set[str] = set()
    for group in groups.subscription_group_table:
        try:
            cc = await admin.consumer_connection(group)
        except MQClientError:
            continue  # offline, as Java skips it
        seen.update(f"{c.language}%{version_desc(c.version)}" for c in cc.connections)
    return sorted(seen)


def _present(values: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


async def cluster_metrics(admin: MQAdmin, cluster: str) -> dict[str, Any]:
    """metrics.json: each master's environment, figures (minute TPS, the last day's counts,
    disk ratios, average message size, user topics and groups) and version, and the
    cluster's totals (ExportMetricsCommand)."""
    total_tps = dict.fromkeys(("totalNormalInTps", "totalNormalOutTps", "totalTransInTps", "totalScheduleInTps"), 0.0)
    day_keys = ("normalOneDayInNum", "normalOneDayOutNum", "transOneDayInNum", "scheduleOneDayInNum")
    total_day = dict.fromkeys(day_keys, 0)
    report: dict[str, Any] = {}
    for name, addr in (await admin.cluster_info()).masters(cluster):
        kv = await admin.broker_runtime_info(addr)
        props = await admin.broker_config(addr)
        groups = await user_groups(admin, addr)
        topics = await user_topics(admin, addr, special=False)
        trans_tps, trans_day = await item_on_masters(admin, [addr], "TOPIC_PUT_NUMS", TRANS_HALF_TOPIC)
        schedule_tps, schedule_day = await item_on_masters(admin, [addr], "TOPIC_PUT_NUMS", SCHEDULE_TOPIC)
        tps = {
            "normalInTps": _first_number(kv.get("putTps")),
            "normalOutTps": _first_number(kv.get("getTransferedTps")),
            "transInTps": trans_tps,
            "scheduleInTps": schedule_tps,
        }
        day = {
            "normalOneDayInNum": _count(kv, "msgPutTotalTodayMorning") - _count(kv, "msgPutTotalYesterdayMorning"),
            "normalOneDayOutNum": _count(kv, "msgGetTotalTodayMorning") - _count(kv, "msgGetTotalYesterdayMorning"),
            "transOneDayInNum": trans_day,
            "scheduleOneDayInNum": schedule_day,
        }
        for key, total_key in zip(tps, total_tps, strict=True):
            total_tps[total_key] += tps[key]
        for key in day_keys:
            total_day[key] += day[key]
        quota = {
            "diskRatio": _present(
                {
                    "commitLogDiskRatio": kv.get("commitLogDiskRatio"),
                    "consumeQueueDiskRatio": kv.get("consumeQueueDiskRatio"),
                }
            ),
            "tps": tps,
            "oneDayNum": day,
            "topicSize": len(topics.topic_config_table),
            "groupSize": len(groups.subscription_group_table),
            **_present({"messageAverageSize": kv.get("putMessageAverageSize")}),
        }
        report[name] = {
            "runtimeEnv": _present(
                {"cpuNum": props.get("clientCallbackExecutorThreads"), "totalMemKBytes": kv.get("totalMemKBytes")}
            ),
            "runtimeQuota": quota,
            "runtimeVersion": {
                "rocketmqVersion": version_desc(CURRENT_VERSION),
                "clientInfo": await _client_versions(admin, groups),
            },
        }
    return {"evaluateReport": report, "totalData": {"totalTps": total_tps, "totalOneDayNum": total_day}}
