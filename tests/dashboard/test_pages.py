"""The dashboard's pages against a live name server and broker: what each shows, what its
forms change in the cluster, and how it refuses bad input, writes in read-only mode and
visitors who are not logged in. (test_browser.py drives the same pages in Chromium.)"""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
import trio

from rmq.client import ConsumeFromWhere, ConsumeStatus, Message, MessageExt, MQAdmin, Producer, PushConsumer
from rmq.client.admin import DEFAULT_QUERY_MAX_NUM, TopicConfig
from rmq.dashboard.auth import Throttle, UsersFileError, load_users
from rmq.dashboard.charts import bar_chart, line_chart
from rmq.protocol.message import make_offset_msg_id

from .conftest import ACL_ADMIN, Stack, wait_for

FAST = {"poll_name_server_interval": 1.0, "rebalance_interval": 1.0, "persist_consumer_offset_interval": 0.5}


def client(url: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=url, timeout=10, follow_redirects=True)


async def csrf(http: httpx.AsyncClient) -> str:
    """The session's form token, as every page carries it (a cheap page: no query asked)."""
    page = await http.get("/producers")
    found = re.search(r'<meta name="csrf" content="([^"]+)">', page.text)
    assert found is not None, page.text[:400]
    return found.group(1)


async def post(http: httpx.AsyncClient, path: str, data: dict[str, str] | None = None) -> httpx.Response:
    """A form post as the dashboard's own pages send it: with the session's token."""
    return await http.post(path, data={**(data or {}), "csrf": await csrf(http)})


async def test_every_page_renders(stack: Stack) -> None:
    async with client(stack.url) as http:
        for path in ("/", "/cluster", "/topics", "/consumers", "/producers", "/messages", "/dlq"):
            r = await http.get(path)
            assert r.status_code == 200, (path, r.text[-500:])
            assert "rmq dashboard" in r.text
        cluster = await http.get("/cluster")
        assert stack.broker.address in cluster.text and "MASTER" in cluster.text
        assert re.search(r"<td>broker-a</td><td>0</td>", cluster.text)
        config = await http.get("/cluster/config", params={"addr": stack.broker.address})
        assert "brokerName" in config.text and "broker-a" in config.text
        static = await http.get("/static/style.css")
        assert static.status_code == 200 and "svg.chart" in static.text


async def test_topic_create_send_query_and_delete(stack: Stack) -> None:
    async with client(stack.url) as http:
        r = await post(
            http, "/topics", data={"topic": "DashOrders", "cluster": "TestCluster", "read": "2", "write": "2"}
        )
        assert r.status_code == 200 and "topic DashOrders saved on 1 broker(s)" in r.text
        assert "DashOrders" in (await http.get("/topics", params={"q": "dashord"})).text
        assert "DashOrders" not in (await http.get("/topics", params={"q": "nothing"})).text
        async with MQAdmin(stack.ns) as admin:
            route = await admin.topic_route("DashOrders")
            assert route.queue_datas[0].write_queue_nums == 2

        r = await post(http, "/topic/DashOrders/send", data={"tags": "TagA", "keys": "order-7", "body": "seven"})
        assert r.status_code == 200 and "SEND_OK" in r.text
        detail = await http.get("/topic/DashOrders")
        assert "1 message(s) held in 2 queue(s)" in detail.text

        by_key = await http.get("/messages", params={"topic": "DashOrders", "key": "order-7"})
        assert "1 message(s) of DashOrders by key order-7" in by_key.text and "seven" in by_key.text
        offset_id = re.search(r'href="/message/([0-9A-F]{32})"', by_key.text)
        assert offset_id is not None
        by_time = await http.get("/messages", params={"topic": "DashOrders"})
        assert "seven" in by_time.text
        message = await http.get(f"/message/{offset_id.group(1)}")
        assert "<td>Keys</td><td>order-7</td>" in message.text and "<td>Tags</td><td>TagA</td>" in message.text
        assert '<pre id="body">seven</pre>' in message.text
        hex_view = await http.get(f"/message/{offset_id.group(1)}", params={"view": "hex"})
        assert "73 65 76 65 6e" in hex_view.text  # "seven"
        by_id = await http.get("/messages", params={"msg_id": offset_id.group(1)})
        assert by_id.url.path == f"/message/{offset_id.group(1)}"

        r = await post(http, "/topic/DashOrders/delete")
        assert r.status_code == 200 and "topic DashOrders deleted" in r.text
        assert "DashOrders" not in (await http.get("/topics")).text


async def test_search_by_time_pages_newest_first(stack: Stack) -> None:
    """A busy topic: more than the 200 messages the search used to read, oldest first and
    silently cut. The first page is the newest, and the page says how many matched."""
    async with Producer("pg_busy", stack.ns) as producer:
        for i in range(230):
            await producer.send(Message("DashPaged", f"busy-{i:03d}"))
    async with client(stack.url) as http:
        first = await http.get("/messages", params={"topic": "DashPaged", "begin": "0"})
        assert "230 matched, showing 1-20 (newest first, page 1 of 12)" in first.text, first.text[-800:]
        assert "busy-229" in first.text and "busy-000" not in first.text
        assert 'id="prev-page"' not in first.text
        link = re.search(r'href="([^"]+)" id="next-page"', first.text)
        assert link is not None
        second = await http.get(link.group(1).replace("&amp;", "&"))
        assert "showing 21-40 (newest first, page 2 of 12)" in second.text
        numbers = [int(n) for n in re.findall(r'<td class="body">busy-(\d+)</td>', second.text)]
        assert len(numbers) == 20 and all(180 <= n < 220 for n in numbers)  # ms ties may swap neighbours
        last = await http.get("/messages", params={"topic": "DashPaged", "begin": "0", "page": "12"})
        assert "showing 221-230" in last.text and "busy-000" in last.text and 'id="next-page"' not in last.text
        oldest = await http.get("/messages", params={"topic": "DashPaged", "begin": "0", "order": "oldest"})
        assert "showing 1-20 (oldest first, page 1 of 12)" in oldest.text and "busy-000" in oldest.text
        async with Producer("pg_busy", stack.ns) as producer:
            for _ in range(DEFAULT_QUERY_MAX_NUM + 1):
                await producer.send(Message("DashPaged", b"same key", keys="hot"))
        by_key = await http.get("/messages", params={"topic": "DashPaged", "key": "hot"})
        assert f"the brokers return at most {DEFAULT_QUERY_MAX_NUM}; more may match" in by_key.text
        bad = await http.get("/messages", params={"topic": "DashPaged", "page": "0"})
        assert bad.status_code == 400 and "page must be between 1" in bad.text


async def test_bad_input_is_shown_not_a_traceback(stack: Stack) -> None:
    async with client(stack.url) as http:
        cases = [
            (lambda: post(http, "/topics", data={"topic": ""}), 400, "the topic name is empty"),
            (lambda: post(http, "/topics", data={"topic": "a b"}), 400, "is not a topic name"),
            (lambda: post(http, "/topics", data={"topic": "T1", "read": "x"}), 400, "read must be a whole number"),
            (lambda: post(http, "/topics", data={"topic": "T1", "write": "5000"}), 400, "between 1 and 1024"),
            (lambda: post(http, "/topics", data={"topic": "T1", "cluster": "Nowhere"}), 502, "Nowhere"),
            (lambda: http.get("/message/ZZZ"), 400, "ZZZ is not a message id"),
            (lambda: http.get("/messages", params={"topic": "TBW102", "begin": "yesterday"}), 400, "not a time"),
            (lambda: http.get("/cluster/config"), 400, "no broker address"),
            (lambda: post(http, "/topic/SCHEDULE_TOPIC_XXXX/send", data={"body": "x"}), 400, "is forbidden"),
            (lambda: http.get("/dlq/export"), 400, "no consumer group"),
        ]
        for request, status, text in cases:
            r = await request()
            assert r.status_code == status, (text, r.status_code, r.text[-400:])
            assert text in r.text and "Traceback" not in r.text
        assert (await http.get("/")).status_code == 200  # still serving


async def test_missing_things_are_404_with_a_plain_sentence(stack: Stack) -> None:
    """Not a 502 with the broker's remark, request codes or Python reprs."""
    host, port = stack.broker.address.split(":")
    nowhere = make_offset_msg_id(host, int(port), 99_999)  # a well-formed id of an empty offset
    cases = [
        ("/topic/NoSuchTopic", "There is no topic NoSuchTopic."),
        ("/messages?topic=NoSuch&key=k", "There is no topic NoSuch."),
        ("/messages?topic=NoSuch", "There is no topic NoSuch."),
        (f"/message/{nowhere}", f"There is no message {nowhere}."),
        (f"/messages?msg_id={nowhere}", f"There is no message {nowhere}."),
        ("/messages?topic=TBW102&msg_id=0123456789ABCDEF0123456789ABCDEF", "There is no message 0123456789ABCDEF"),
        ("/consumer/NoSuchGroup", "There is no consumer group NoSuchGroup."),
        ("/consumer/NoSuchGroup/client/someone", "Client someone of group NoSuchGroup is not online."),
        ("/producers?topic=TBW102&group=nobody", "No producer of group nobody is connected"),
    ]
    async with client(stack.url) as http:
        for path, sentence in cases:
            r = await http.get(path)
            error = re.search(r'<p class="error" id="error">([^<]*)</p>', r.text)
            assert r.status_code == 404 and error is not None, (path, r.status_code, r.text[-300:])
            text = error.group(1)
            assert text.startswith(sentence), (path, text)
            for raw in ("[&#39;", "MQKey(", "MessageQueue(", "SYSTEM_ERROR", "(33)", "answered"):
                assert raw not in text, (path, text)


async def test_consumers_running_info_and_reset(stack: Stack) -> None:
    async with Producer("pg_dash", stack.ns) as producer:
        for i in range(5):
            await producer.send(Message("DashFlow", f"flow {i}"))
    got: list[MessageExt] = []

    async def handler(msg: MessageExt) -> None:
        got.append(msg)

    consumer = PushConsumer(
        "cg_dash", stack.ns, handler=handler, consume_from_where=ConsumeFromWhere.FIRST_OFFSET, **FAST
    )
    consumer.subscribe("DashFlow", "*")
    async with consumer, client(stack.url) as http:

        async def consumed() -> bool:
            page = await http.get("/consumer/cg_dash")
            return len(got) >= 5 and "Lag 0 in total" in page.text

        await wait_for(consumed)
        page = await http.get("/consumer/cg_dash")
        assert consumer.instance.client_id in page.text and "DashFlow" in page.text and "CLUSTERING" in page.text
        listing = await http.get("/consumers")
        assert re.search(r">cg_dash</a></td><td class=\"num\">1</td>", listing.text)
        client_id = quote(consumer.instance.client_id, safe="")  # it may hold a '#'
        running = await http.get(f"/consumer/cg_dash/client/{client_id}")
        assert running.status_code == 200 and "DashFlow" in running.text, running.text[-600:]
        topic = await http.get("/topic/DashFlow")
        assert "cg_dash" in topic.text
        r = await post(http, "/topic/DashFlow/reset", data={"group": "cg_dash", "time": "2000-01-01 00:00"})
        assert r.status_code == 200 and "offsets of cg_dash reset on" in r.text

        async def redelivered() -> bool:
            return len(got) >= 10

        await wait_for(redelivered)  # back to the start: the five come again
    async with client(stack.url) as http, Producer("pg_online", stack.ns) as online:
        await online.send(Message("DashFlow", b"hello"))
        producers = await http.get("/producers", params={"topic": "DashFlow", "group": "pg_online"})
        assert online.instance.client_id in producers.text and "PYTHON" in producers.text
        offline = await http.get("/producers", params={"topic": "DashFlow", "group": "pg_dash"})
        assert offline.status_code == 404 and "No producer of group pg_dash is connected" in offline.text


async def test_dead_letters_list_export_and_resend(stack: Stack) -> None:
    async with Producer("pg_dlq", stack.ns) as producer:
        await producer.send(Message("DashDlq", b"poison", keys="p-1"))
    seen: list[bytes] = []

    async def refuse(msg: MessageExt) -> ConsumeStatus:
        seen.append(msg.body)
        return ConsumeStatus.RECONSUME_LATER

    consumer = PushConsumer(
        "cg_dlq", stack.ns, handler=refuse, consume_from_where=ConsumeFromWhere.FIRST_OFFSET, max_reconsume_times=0,
        **FAST,
    )  # fmt: skip
    consumer.subscribe("DashDlq", "*")
    async with consumer, client(stack.url) as http:

        async def dead() -> bool:
            return "1 dead letter(s) of cg_dlq" in (await http.get("/dlq", params={"group": "cg_dlq"})).text

        await wait_for(dead)
        listing = await http.get("/dlq")
        assert re.search(r'>cg_dlq</a></td><td>%DLQ%cg_dlq</td><td class="num">1</td>', listing.text)
        empty = await http.get(
            "/dlq", params={"group": "cg_dlq", "begin": "2000-01-01 00:00", "end": "2000-01-02 00:00"}
        )
        assert "0 dead letter(s) of cg_dlq" in empty.text
        exported = await http.get("/dlq/export", params={"group": "cg_dlq"})
        assert exported.headers["content-disposition"] == 'attachment; filename="dlq-cg_dlq.json"'
        rows = json.loads(exported.text)
        assert len(rows) == 1 and rows[0]["text"] == "poison" and rows[0]["origin"] == "DashDlq"
        before = len(seen)
        r = await post(http, "/dlq/resend", data={"group": "cg_dlq", "msg_id": rows[0]["offset_msg_id"]})
        assert r.status_code == 200 and "resent 1 of 1 dead letter(s)" in r.text

        async def back_in_topic() -> bool:
            return len(seen) > before

        await wait_for(back_in_topic)  # the resent copy is consumed from DashDlq again
        assert seen[-1] == b"poison"


async def test_trace_shown_on_the_message_page(stack: Stack) -> None:
    async with Producer("pg_traced", stack.ns, enable_trace=True) as producer:
        result = await producer.send(Message("DashTraced", b"traced"))
    async with client(stack.url) as http:

        async def traced() -> bool:
            page = await http.get(f"/message/{result.offset_msg_id}")
            return "<td>Pub</td><td>pg_traced</td>" in page.text

        await wait_for(traced)


async def test_topic_config_and_permission_editing(stack: Stack) -> None:
    async with MQAdmin(stack.ns) as admin:
        await admin.create_topic(stack.broker.address, TopicConfig("DashPerm", 2, 2))
    async with client(stack.url) as http:
        page = await http.get("/topic/DashPerm")
        assert 'id="topic-config"' in page.text and 'id="config-read" value="2"' in page.text
        r = await post(http, "/topic/DashPerm/config", {"read": "4", "write": "3", "perm": "4"})
        assert r.status_code == 200 and "topic DashPerm updated on 1 broker(s)" in r.text
        assert "<td>4</td><td>3</td><td>R (4)</td>" in r.text
        r = await post(http, "/topic/DashPerm/config", {"read": "4", "write": "3", "perm": "5"})
        assert r.status_code == 400 and "perm must be 6" in r.text
    async with MQAdmin(stack.ns) as admin:
        qd = (await admin.topic_route("DashPerm")).queue_datas[0]
        assert (qd.read_queue_nums, qd.write_queue_nums, qd.perm) == (4, 3, 4)


async def test_consumer_group_create_edit_sort_filter_and_refresh(stack: Stack) -> None:
    async with client(stack.url) as http:
        data = {"group": "cg_made", "cluster": "TestCluster", "consume_enable": "on", "retry_max_times": "3"}
        r = await post(http, "/consumers", data)
        assert r.status_code == 200 and "group cg_made saved on 1 broker(s)" in r.text, r.text[-500:]
        page = await http.get("/consumer/cg_made")
        assert 'name="retry_max_times" value="3"' in page.text and 'name="consume_enable" checked' in page.text
        r = await post(http, "/consumers", {"group": "cg_made", "cluster": "TestCluster", "retry_max_times": "5"})
        assert r.status_code == 200
        for g in ("cg_zeta", "cg_alpha"):
            await post(http, "/consumers", {"group": g, "cluster": "TestCluster", "consume_enable": "on"})
        listing = await http.get("/consumers", params={"q": "cg_", "sort": "group", "desc": "1"})
        names = re.findall(r'<td><a href="/consumer/[^"]+">([^<]+)</a></td>', listing.text)
        assert names == ["cg_zeta", "cg_made", "cg_alpha"], names
        only = await http.get("/consumers", params={"q": "ALPHA"})
        assert re.findall(r'<td><a href="/consumer/[^"]+">([^<]+)</a></td>', only.text) == ["cg_alpha"]
        refreshing = await http.get("/consumers", params={"refresh": "10"})
        assert '<meta http-equiv="refresh" content="10">' in refreshing.text
        assert "http-equiv" not in (await http.get("/consumers", params={"refresh": "7"})).text
        r = await post(http, "/consumers", {"group": "bad name"})
        assert r.status_code == 400 and "is not a group name" in r.text
    async with MQAdmin(stack.ns) as admin:
        config = (await admin.subscription_groups(stack.broker.address))["cg_made"]
        assert config["retryMaxTimes"] == 5 and config["consumeEnable"] is False


async def test_skip_accumulated_message_tracks_and_consume_again(stack: Stack) -> None:
    got: list[MessageExt] = []

    async def handler(msg: MessageExt) -> None:
        got.append(msg)

    async with Producer("pg_skip", stack.ns) as producer:
        first = await producer.send(Message("DashSkip", b"first"))
    consumer = PushConsumer(
        "cg_skip", stack.ns, handler=handler, consume_from_where=ConsumeFromWhere.FIRST_OFFSET, **FAST
    )
    consumer.subscribe("DashSkip", "*")
    async with consumer, client(stack.url) as http:

        async def consumed() -> bool:
            page = await http.get(f"/message/{first.offset_msg_id}")
            return ">cg_skip</a></td><td>CONSUMED</td>" in page.text

        await wait_for(consumed)
        page = await http.get(f"/message/{first.offset_msg_id}")
        assert 'id="tracks"' in page.text and "CONSUMED" in page.text
        before = len(got)
        r = await post(http, f"/message/{first.offset_msg_id}/resend", {"group": "cg_skip"})
        assert r.status_code == 200 and "consumed again by" in r.text and "CR_SUCCESS" in r.text, r.text[-600:]
        assert len(got) == before + 1 and got[-1].body == b"first"
        running = await http.get(f"/consumer/cg_skip/client/{quote(consumer.instance.client_id, safe='')}")
        assert "<h2>Queues</h2>" in running.text and "<h2>Subscriptions</h2>" in running.text
        assert re.search(r"<td>DashSkip broker-a #\d</td>", running.text)
    async with client(stack.url) as http:  # offline now: messages pile up, then are skipped
        async with Producer("pg_skip", stack.ns) as producer:
            for i in range(5):
                await producer.send(Message("DashSkip", f"later {i}"))
        async with MQAdmin(stack.ns) as admin:
            assert (await admin.consume_stats("cg_skip")).diff_total == 5
        page = await http.get("/consumer/cg_skip")
        assert "<option>DashSkip</option>" in page.text
        r = await post(http, "/consumer/cg_skip/skip", {"topic": "DashSkip"})
        assert r.status_code == 200 and "cg_skip skipped to the end of DashSkip" in r.text, r.text[-500:]
        async with MQAdmin(stack.ns) as admin:
            assert (await admin.consume_stats("cg_skip")).diff_total == 0


async def test_ops_chooses_the_name_server(stack: Stack) -> None:
    url = await stack.dashboard()
    async with client(url) as http:
        page = await http.get("/ops")
        assert f"<td>{stack.ns}</td><td><b>asked first</b></td>" in page.text
        r = await post(http, "/ops", {"namesrv": "127.0.0.1:1"})  # nobody there: the other one answers
        assert r.status_code == 200 and "name server 127.0.0.1:1 chosen" in r.text
        assert "<td>127.0.0.1:1</td><td><b>asked first</b></td>" in r.text and "name server 127.0.0.1:1;" in r.text
        assert "TBW102" in (await http.get("/topics", params={"kind": "SYSTEM"})).text
        r = await post(http, "/ops", {"namesrv": stack.ns})
        assert f"<td>{stack.ns}</td><td><b>asked first</b></td>" in r.text
        r = await post(http, "/ops", {"namesrv": "nowhere"})
        assert r.status_code == 400 and "is not a name server address" in r.text


async def test_acl_accounts_and_white_list(acl_stack: Stack) -> None:
    async with client(acl_stack.url) as http:
        page = await http.get("/acl")
        assert page.status_code == 200, page.text[-500:]
        assert "<code>10.10.103.*</code>" in page.text and "<td>RocketMQUser</td><td>12••••</td>" in page.text
        assert "TopicPub=PUB|SUB" in page.text and "12345678user" not in page.text  # secrets stay hidden
        data = {"cluster": "TestCluster", "access_key": "WebUser1", "secret_key": "web-secret-1",
                "default_topic_perm": "SUB", "topic_perms": "Orders=PUB|SUB, Audit=DENY"}  # fmt: skip
        r = await post(http, "/acl/account", data)
        assert r.status_code == 200 and "account WebUser1 saved on 1 broker(s)" in r.text, r.text[-500:]
        assert "<td>WebUser1</td>" in r.text and "Orders=PUB|SUB, Audit=DENY" in r.text
        r = await post(http, "/acl/white", {"cluster": "TestCluster", "addresses": "10.1.1.*, 192.168.0.7"})
        assert r.status_code == 200 and "<code>10.1.1.*</code> <code>192.168.0.7</code>" in r.text
        r = await post(http, "/acl/account/delete", {"cluster": "TestCluster", "access_key": "RocketMQUser"})
        assert r.status_code == 200 and "<td>RocketMQUser</td>" not in r.text
        bad_perm = {"access_key": "abcdef", "secret_key": "abcdefg", "default_topic_perm": "ALL"}
        for bad, text in (({"access_key": "ab", "secret_key": "x"}, "6 characters"), (bad_perm, "must be one of")):
            r = await post(http, "/acl/account", {"cluster": "TestCluster", **bad})
            assert r.status_code == 400 and text in r.text
    async with MQAdmin(acl_stack.ns, access_key=ACL_ADMIN[0], secret_key=ACL_ADMIN[1]) as admin:
        config = await admin.acl_config(acl_stack.broker.address)
        keys = {c.access_key: c for c in config.plain_access_configs}
        assert "RocketMQUser" not in keys and keys["WebUser1"].topic_perms == ["Orders=PUB|SUB", "Audit=DENY"]
        assert config.global_white_addrs == ["10.1.1.*", "192.168.0.7"]


async def test_acl_page_says_when_acl_is_off(stack: Stack) -> None:
    async with client(stack.url) as http:
        page = await http.get("/acl")
        assert page.status_code == 200 and 'id="acl-error"' in page.text and "aclEnable=true" in page.text


async def test_read_only_refuses_writes_and_hides_forms(stack: Stack) -> None:
    url = await stack.dashboard(read_only=True)
    async with client(url) as http:
        page = await http.get("/topics")
        assert 'id="read-only"' in page.text and 'id="create-topic"' not in page.text
        for path in ("/topics", "/topic/TBW102/delete", "/topic/TBW102/send", "/dlq/resend", "/consumer/g/delete"):
            r = await post(http, path, data={"topic": "Nope", "body": "x", "group": "g"})
            assert r.status_code == 403 and "the dashboard is read-only" in r.text
    async with MQAdmin(stack.ns) as admin:
        assert "Nope" not in await admin.topic_list()


async def test_login_from_a_users_file(stack: Stack, tmp_path: Path) -> None:
    users = tmp_path / "users.properties"
    users.write_text("# who may log in\nadmin=secret,1\nviewer=look\n")
    url = await stack.dashboard(users=load_users(users))
    async with client(url) as http:
        r = await http.get("/topics")
        assert r.url.path == "/login" and 'id="login"' in r.text
        r = await post(http, "/login", data={"name": "admin", "password": "wrong"})
        assert r.status_code == 401 and "wrong name or password" in r.text
        r = await post(http, "/login", data={"name": "viewer", "password": "look"})
        assert r.url.path == "/" and "viewer" in r.text
        r = await post(http, "/topics", data={"topic": "ByViewer"})
        assert r.status_code == 403 and "only an administrator" in r.text
        await post(http, "/logout")
        r = await post(http, "/login", data={"name": "admin", "password": "secret"})
        r = await post(http, "/topics", data={"topic": "ByAdmin", "cluster": "TestCluster"})
        assert r.status_code == 200 and "topic ByAdmin saved" in r.text


async def test_cross_site_and_tokenless_posts_are_refused(stack: Stack) -> None:
    """With no login (the default) a form on another site could delete a topic: every
    write needs this dashboard's origin and the session's token."""
    async with MQAdmin(stack.ns) as admin:
        await admin.create_topic(stack.broker.address, TopicConfig("Guarded", 2, 2))
    async with client(stack.url) as http:
        foreign = {"Origin": "http://evil.example"}
        r = await http.post("/topic/Guarded/delete", headers=foreign)
        assert r.status_code == 403 and "came from another site" in r.text
        r = await http.post("/topic/Guarded/delete")
        assert r.status_code == 403 and "reload the page" in r.text
        token = await csrf(http)  # even with the token, not from another site
        r = await http.post("/topic/Guarded/delete", data={"csrf": token}, headers=foreign)
        assert r.status_code == 403 and "came from another site" in r.text
        r = await http.post("/topic/Guarded/delete", data={"csrf": token}, headers={"Referer": "http://evil.example/x"})
        assert r.status_code == 403 and "came from another site" in r.text
        r = await http.post("/topic/Guarded/delete", data={"csrf": "guessed"})
        assert r.status_code == 403 and "reload the page" in r.text
    async with client(stack.url) as stranger:  # a valid token of another session does not do
        r = await stranger.post("/topic/Guarded/delete", data={"csrf": token})
        assert r.status_code == 403
    async with MQAdmin(stack.ns) as admin:
        assert "Guarded" in await admin.topic_list()
    async with client(stack.url) as http:  # the same origin with the token may
        r = await http.post("/topic/Guarded/delete", data={"csrf": await csrf(http)}, headers={"Origin": stack.url})
        assert r.status_code == 200 and "topic Guarded deleted" in r.text


async def test_login_needs_a_token_and_is_throttled(stack: Stack, tmp_path: Path) -> None:
    users = tmp_path / "users.properties"
    users.write_text("admin=secret,1\n")
    url = await stack.dashboard(users=load_users(users))
    async with client(url) as http:
        r = await http.post("/login", data={"name": "admin", "password": "secret"})
        assert r.status_code == 403 and r.url.path == "/login"
        for _ in range(5):
            r = await post(http, "/login", data={"name": "admin", "password": "guess"})
            assert r.status_code == 401
        r = await post(http, "/login", data={"name": "admin", "password": "secret"})  # right, but too soon
        assert r.status_code == 429 and "too many failed logins" in r.text


def test_every_post_form_carries_the_token() -> None:
    templates = Path(__file__).parents[2] / "rmq" / "dashboard" / "templates"
    forms = 0
    for path in templates.glob("*.html"):
        for form in re.findall(r'<form method="post".*?</form>', path.read_text(), re.S):
            forms += 1
            assert '<input type="hidden" name="csrf" value="{{ csrf }}">' in form, (path.name, form[:200])
    assert forms >= 10


def test_throttle_waits_longer_after_each_failure() -> None:
    now = [0.0]
    throttle = Throttle(free=2, base=10.0, cap=25.0, clock=lambda: now[0])
    throttle.failed("a")
    assert throttle.wait("a") == 0
    throttle.failed("a")
    assert throttle.wait("a") == 10 and throttle.wait("b") == 0
    throttle.failed("a")
    assert throttle.wait("a") == 20
    throttle.failed("a")
    assert throttle.wait("a") == 25  # capped
    now[0] = 30.0
    assert throttle.wait("a") == 0
    throttle.succeeded("a")
    throttle.failed("a")
    assert throttle.wait("a") == 0


def test_users_file_errors(tmp_path: Path) -> None:
    with pytest.raises(UsersFileError, match="cannot read"):
        load_users(tmp_path / "missing")
    bad = tmp_path / "bad.properties"
    bad.write_text("admin\n")
    with pytest.raises(UsersFileError, match="bad.properties:1"):
        load_users(bad)
    empty = tmp_path / "empty.properties"
    empty.write_text("# nobody\n")
    with pytest.raises(UsersFileError, match="no users"):
        load_users(empty)


def test_charts_are_svg_with_their_data() -> None:
    svg = line_chart({"in": [(0, 0), (60, 120.0)], "out": [(0, 5), (60, 10)]}, title="TPS")
    assert svg.startswith("<svg") and svg.endswith("</svg>") and svg.count("<polyline") == 2
    assert "200 msg/s" in svg and "1 min ago" in svg
    assert "no samples yet" in line_chart({"in": []}, title="TPS")
    bars = bar_chart([("Orders", 300.0), ("<b>", 100.0)], title="Busiest")
    assert bars.count("<rect") == 2 and "300 messages" in bars and "&lt;b&gt;" in bars


async def test_home_page_charts_fill_in(stack: Stack) -> None:
    async with Producer("pg_home", stack.ns) as producer:
        for _ in range(20):
            await producer.send(Message("DashBusy", b"x"))
    async with client(stack.url) as http:

        async def charted() -> bool:
            page = await http.get("/")
            return "<polyline" in page.text and "DashBusy" in page.text

        await wait_for(charted)


async def test_command_line_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from rmq.dashboard.app import main

    assert main(["--port", "0", "-n", "127.0.0.1:1"]) == 2
    assert "not a port number" in capsys.readouterr().err
    assert main(["-n", "127.0.0.1:1", "--users", str(tmp_path / "none")]) == 2
    assert "cannot read users file" in capsys.readouterr().err
    assert main(["-n", "127.0.0.1:1", "--accessKey", "a"]) == 2
    assert "go together" in capsys.readouterr().err
    await trio.lowlevel.checkpoint()
