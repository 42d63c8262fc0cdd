"""How mqadmin prints: table rows laid out by format specs, Java's time and boolean text,
messages as queryMsgById shows them."""

from __future__ import annotations

import dataclasses
import time
from typing import Any, TextIO

from rmq.client.route import TopicRoute
from rmq.protocol.message import MessageExt

Out = TextIO

BODY_PREVIEW = 256  # characters of a message body the query commands show
MESSAGE_FIELD = "{:<20} {}"
CONFIG_ROW = "{:<50}=  {}"


def row(out: Out, spec: str, *values: object) -> None:
    """One table line: `values` as text, laid out by `spec`."""
    print(spec.format(*(v if isinstance(v, (int, float)) else str(v) for v in values)), file=out)


def front(text: object, width: int) -> str:
    """UtilAll.frontStringAtLeast: at most `width` characters."""
    return str(text)[:width]


def human_ms(ms: int) -> str:
    """UtilAll.timeMillisToHumanString2: "yyyy-MM-dd HH:mm:ss,SSS" in local time."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000)) + f",{ms % 1000:03d}"


def date_text(ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000))


def java_bool(value: object) -> str:
    return "true" if value else "false"


def body_preview(body: bytes) -> str:
    text = body[:BODY_PREVIEW].decode("utf-8", "replace").replace("\r", "\\r").replace("\n", "\\n")
    return text + (f"... ({len(body)} bytes)" if len(body) > BODY_PREVIEW else "")


def config_table(out: Out, title: str, table: dict[str, str]) -> None:
    """A server's settings under a title (getBrokerConfig, getNamesrvConfig)."""
    print(f"============{title}============", file=out)
    for key in sorted(table):
        row(out, CONFIG_ROW, key, table[key])
    print(file=out)


def _host(host: tuple[str, int]) -> str:
    return f"{host[0]}:{host[1]}"


def print_message(msg: MessageExt, out: Out) -> None:
    """A message as mqadmin's queryMsgById prints it (the body shown, not saved to a file)."""
    fields: list[tuple[str, object]] = [
        ("OffsetID:", msg.offset_msg_id),
        ("Message ID:", msg.msg_id),
        ("Topic:", msg.topic),
        ("Tags:", f"[{msg.tags}]"),
        ("Keys:", f"[{msg.keys}]"),
        ("Queue ID:", msg.queue_id),
        ("Queue Offset:", msg.queue_offset),
        ("CommitLog Offset:", msg.commitlog_offset),
        ("Reconsume Times:", msg.reconsume_times),
        ("Born Timestamp:", human_ms(msg.born_timestamp)),
        ("Store Timestamp:", human_ms(msg.store_timestamp)),
        ("Born Host:", _host(msg.born_host)),
        ("Store Host:", _host(msg.store_host)),
        ("System Flag:", msg.sys_flag),
        ("Properties:", "{" + ", ".join(f"{k}={v}" for k, v in msg.properties.items()) + "}"),
        ("Message Body:", body_preview(msg.body)),
    ]
    for label, value in fields:
        row(out, MESSAGE_FIELD, label, value)


def route_json(route: TopicRoute) -> dict[str, Any]:
    """TopicRouteData's JSON by broker name, without filter servers, with orderTopicConf
    last when the topic has one (json.dumps writes the broker ids as string keys)."""
    shown = dataclasses.replace(
        route,
        queue_datas=tuple(sorted(route.queue_datas, key=lambda q: q.broker_name)),
        broker_datas=tuple(sorted(route.broker_datas, key=lambda b: b.broker_name)),
        order_topic_conf=None,
        filter_server_table={},
    )
    obj = shown.to_json()
    if route.order_topic_conf:
        obj["orderTopicConf"] = route.order_topic_conf
    return obj
