"""The dashboard's web application (Starlette on hypercorn's Trio worker) and its command.

    rmq dashboard -n 127.0.0.1:9876 --port 8080 [--users users.properties] [--read-only]

Every page is rendered on the server from `data.py`'s rows; writes are HTML forms posted
back, refused in read-only mode or for a logged-in user who is not an administrator. Errors
from brokers or bad form input are shown on the page, with the status code saying whose
fault it was (400 input, 502 broker), never as a traceback.
"""

from __future__ import annotations

import argparse
import hmac
import json
import logging
import secrets
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

import trio

from rmq.admin import acl, groups, offsets
from rmq.admin.messages import TimePage, admin_producer, dead_letters, resend
from rmq.client import Message, MessageQueue, MQAdmin, MQBrokerError, MQClientError, MQConnectError, MQNoRouteError
from rmq.client.admin import DEFAULT_QUERY_MAX_NUM, SubscriptionGroupConfig, TopicConfig
from rmq.client.message import check_topic
from rmq.protocol import ProtocolError
from rmq.protocol.acl import PlainAccessConfig
from rmq.protocol.constants import DLQ_PREFIX, topic_error
from rmq.protocol.message import parse_offset_msg_id

from . import data
from .auth import Throttle, User, UsersFileError, check, load_users
from .charts import bar_chart, line_chart

log = logging.getLogger("rmq.dashboard")
HERE = Path(__file__).parent
MISSING_EXTRA = "the dashboard needs its extra: pip install 'rmq[dashboard]'"
DLQ_PAGE = 200  # dead letters read for a page, an export or a resend
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

Handler = Callable[[Any], Awaitable[Any]]


class InputError(ValueError):
    """A form or query value the page cannot use; shown to the user, status 400."""


class NotFound(LookupError):
    """What the page is about (a topic, a message, a group) does not exist; status 404."""


def plain(exc: MQClientError) -> str:
    """A client error as a sentence for the page, without request codes or Python reprs."""
    if isinstance(exc, MQBrokerError):
        who = f"The broker at {exc.address}" if exc.address else "The broker"
        return f"{who} refused: {exc.remark or 'no reason given'}"
    if isinstance(exc, MQConnectError):
        return f"Cannot reach {exc.address}: {exc.reason}"
    return str(exc)


@dataclass
class Settings:
    namesrv: list[str]
    read_only: bool = False
    users: dict[str, User] | None = None
    access_key: str | None = None
    secret_key: str | None = None
    sample_interval: float = 10.0  # seconds between TPS samples
    topics_interval: float = 60.0  # seconds between busiest-topic samples


def _int(form: Any, name: str, low: int, high: int, default: int | None = None) -> int:
    raw = str(form.get(name) or "").strip()
    if not raw and default is not None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise InputError(f"{name} must be a whole number, not {raw!r}") from None
    if not low <= value <= high:
        raise InputError(f"{name} must be between {low} and {high}, not {value}")
    return value


def _topic_name(raw: object, *, new: bool = False) -> str:
    """A topic name from a form or path; `new` (creating, sending) also applies the client's
    send rules, which refuse system topics."""
    name = str(raw or "").strip()
    if not name:
        raise InputError("the topic name is empty")
    if topic_error(name) is not None:
        raise InputError(f"{name!r} is not a topic name: 1-127 of letters, digits, %, |, _ and -")
    if new:
        try:
            check_topic(name)
        except MQClientError as exc:
            raise InputError(str(exc)) from None
    return name


def _perm(form: Any) -> int:
    """A topic's permission: 6 read and write, 4 read only, 2 write only."""
    perm = _int(form, "perm", 2, 6, 6)
    if perm not in (2, 4, 6):
        raise InputError(f"perm must be 6 (read and write), 4 (read) or 2 (write), not {perm}")
    return perm


ACL_PERMS = ("DENY", "PUB", "SUB", "PUB|SUB")


def _acl_perm(form: Any, name: str) -> str | None:
    value = str(form.get(name) or "").strip()
    if value and value not in ACL_PERMS:
        raise InputError(f"{name} must be one of {', '.join(ACL_PERMS)}, not {value!r}")
    return value or None


REFRESH_CHOICES = (5, 10, 30, 60)  # seconds a page may reload itself after


def _refresh(raw: str) -> int:
    return int(raw) if raw.isdigit() and int(raw) in REFRESH_CHOICES else 0


def _sort(request: Any, default: str) -> tuple[str, bool]:
    """The table column to sort by (`?sort=lag&desc=1`)."""
    key = str(request.query_params.get("sort", "") or default)
    return key, request.query_params.get("desc", "") == "1"


def _time_ms(raw: str, default: int) -> int:
    """A form time: empty, milliseconds since the epoch, or "YYYY-MM-DD HH:MM[:SS]" (local)."""
    text = raw.strip().replace("T", " ")
    if not text:
        return default
    if text.isdigit():
        return int(text)
    for fmt in ("%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M"):
        try:
            return int(time.mktime(time.strptime(text, fmt)) * 1000)
        except ValueError:
            continue
    raise InputError(f"not a time: {raw!r} (use YYYY-MM-DD HH:MM[:SS] or milliseconds)")


def build_app(settings: Settings, admin: MQAdmin, sampler: data.Sampler | None = None) -> Any:
    """The ASGI application; `admin` must be running (its connections stay open)."""
    try:
        from starlette.applications import Starlette
        from starlette.middleware import Middleware
        from starlette.middleware.sessions import SessionMiddleware
        from starlette.requests import Request
        from starlette.responses import JSONResponse, RedirectResponse, Response
        from starlette.routing import Mount, Route
        from starlette.staticfiles import StaticFiles
        from starlette.templating import Jinja2Templates
    except ImportError:
        raise SystemExit(MISSING_EXTRA) from None

    templates = Jinja2Templates(directory=str(HERE / "templates"))
    sampler = sampler or data.Sampler(admin, settings.sample_interval, settings.topics_interval)
    throttle = Throttle()

    def user_of(request: Request) -> User | None:
        if settings.users is None:
            return None
        name = request.session.get("user")
        return settings.users.get(name) if name else None

    def can_write(request: Request) -> bool:
        if settings.read_only:
            return False
        if settings.users is None:
            return True
        user = user_of(request)
        return user is not None and user.admin

    def csrf_token(request: Request) -> str:
        """The session's token, which every form posts back (made on the first page)."""
        token = request.session.get("csrf")
        if not isinstance(token, str) or not token:
            token = request.session["csrf"] = secrets.token_urlsafe(32)
        return token

    async def csrf_refusal(request: Request) -> str | None:
        """Why a state-changing request is refused as cross-site, or None. In every mode
        (with no login too, where no cookie would stop it): the Origin, else the Referer,
        must name this host, and the form must carry the session's token."""
        host = request.headers.get("host", "")
        source = request.headers.get("origin") or request.headers.get("referer")
        if source is not None and urlsplit(source).netloc != host:
            return "refused: the request came from another site"
        form = await request.form()
        sent = str(form.get("csrf") or request.headers.get("x-csrf-token") or "")
        expected = request.session.get("csrf")
        if not isinstance(expected, str) or not hmac.compare_digest(sent.encode(), expected.encode()):
            return "refused: the form is out of date or did not come from this dashboard; reload the page and try again"
        return None

    def render(request: Request, name: str, status: int = 200, **context: Any) -> Response:
        context.update(
            csrf=csrf_token(request),
            read_only=not can_write(request),
            user=user_of(request),
            login=settings.users is not None,
            namesrv=";".join(admin.namesrv),
            refresh=_refresh(request.query_params.get("refresh", "")),
            flash=request.query_params.get("flash", ""),
        )
        return templates.TemplateResponse(request, name, context, status_code=status)

    def page(fn: Handler, *, write: bool = False) -> Handler:
        """Errors become the page's message: 400 for input, 502 for the cluster, 403 for a
        write that is not allowed."""

        async def handler(request: Request) -> Response:
            if write and not can_write(request):
                why = "the dashboard is read-only" if settings.read_only else "only an administrator may change this"
                return render(request, "error.html", 403, error=why)
            if request.method not in SAFE_METHODS:
                refused = await csrf_refusal(request)
                if refused is not None:
                    return render(request, "error.html", 403, error=refused)
            try:
                result: Response = await fn(request)
                return result
            except InputError as exc:
                return render(request, "error.html", 400, error=str(exc))
            except NotFound as exc:
                return render(request, "error.html", 404, error=str(exc))
            except MQNoRouteError as exc:
                return render(request, "error.html", 404, error=f"There is no topic {exc.topic}.")
            except MQClientError as exc:
                return render(request, "error.html", 502, error=plain(exc))

        return handler

    def back(url: str, flash: str) -> RedirectResponse:
        from urllib.parse import quote

        sep = "&" if "?" in url else "?"
        return RedirectResponse(f"{url}{sep}flash={quote(flash)}", status_code=303)

    # -- pages --------------------------------------------------------------------------

    async def home(request: Request) -> Response:
        points = list(sampler.points)
        every = f"{sampler.interval:g} s"
        tps = line_chart(
            {"in (put)": [(t, i) for t, i, _ in points], "out (pulled)": [(t, o) for t, _, o in points]},
            title=f"Messages per second put into and pulled from all masters, sampled every {every}, last hour",
        )
        busiest = bar_chart(
            sampler.busiest, title="Ten busiest topics: messages put in the last hour (all masters, TOPIC_PUT_NUMS)"
        )
        rows = await data.cluster_rows(admin)
        return render(request, "home.html", tps_chart=tps, busiest_chart=busiest, brokers=rows, error=sampler.error)

    async def cluster(request: Request) -> Response:
        brokers = await data.cluster_rows(admin)
        return render(
            request,
            "cluster.html",
            brokers=brokers,
            dledger=data.dledger_rows(brokers),
            replicas=data.controller_rows(brokers),
        )

    async def broker_config(request: Request) -> Response:
        addr = request.query_params.get("addr", "")
        if not addr:
            raise InputError("no broker address given")
        return render(request, "config.html", addr=addr, config=await admin.broker_config(addr))

    async def topics(request: Request) -> Response:
        q = request.query_params.get("q", "")
        kinds = frozenset(request.query_params.getlist("kind") or ["NORMAL"])
        info = await admin.cluster_info()
        rows = await data.topic_rows(admin, q, kinds)
        return render(request, "topics.html", topics=rows, q=q, kinds=kinds, clusters=sorted(info.clusters))

    async def topic_save(request: Request) -> Response:
        form = await request.form()
        name = _topic_name(form.get("topic"), new=True)
        config = TopicConfig(
            name,
            read_queue_nums=_int(form, "read", 1, 1024, 8),
            write_queue_nums=_int(form, "write", 1, 1024, 8),
            perm=_perm(form),
        )
        info = await admin.cluster_info()
        cluster_name = str(form.get("cluster") or "").strip() or next(iter(sorted(info.clusters)), "")
        masters = info.masters(cluster_name)
        if not masters:
            raise InputError(f"cluster {cluster_name!r} has no master")
        for _, addr in masters:
            await admin.create_topic(addr, config)
        return back(f"/topic/{name}", f"topic {name} saved on {len(masters)} broker(s)")

    async def topic(request: Request) -> Response:
        name = _topic_name(request.path_params["topic"])
        return render(request, "topic.html", t=await data.topic_detail(admin, name), result=None)

    async def topic_config(request: Request) -> Response:
        """Change the queue counts and permission of the topic on every broker of its route."""
        name = _topic_name(request.path_params["topic"])
        form = await request.form()
        config = TopicConfig(
            name,
            read_queue_nums=_int(form, "read", 1, 1024),
            write_queue_nums=_int(form, "write", 1, 1024),
            perm=_perm(form),
        )
        route = await admin.topic_route(name)
        masters = [bd.master_addr for bd in route.broker_datas if bd.master_addr is not None]
        for addr in masters:
            await admin.create_topic(addr, config)
        return back(f"/topic/{name}", f"topic {name} updated on {len(masters)} broker(s)")

    async def topic_delete(request: Request) -> Response:
        name = _topic_name(request.path_params["topic"])
        route = await admin.topic_route(name)
        for bd in route.broker_datas:
            if bd.master_addr is not None:
                await admin.delete_topic_in_broker(bd.master_addr, name)
        await admin.delete_topic_in_namesrv(name)
        return back("/topics", f"topic {name} deleted")

    async def topic_send(request: Request) -> Response:
        name = _topic_name(request.path_params["topic"], new=True)
        form = await request.form()
        body = str(form.get("body") or "")
        if not body:
            raise InputError("the message body is empty")
        msg = Message(name, body, tags=str(form.get("tags") or "") or None, keys=str(form.get("keys") or "") or None)
        async with admin_producer(admin) as producer:
            result = await producer.send(msg)
        flash = f"{result.status.name}: msgId {result.msg_id}, queue {result.message_queue.queue_id}"
        return back(f"/topic/{name}", flash)

    async def topic_reset(request: Request) -> Response:
        name = _topic_name(request.path_params["topic"])
        form = await request.form()
        group = str(form.get("group") or "").strip()
        if not group:
            raise InputError("no consumer group given")
        when = _time_ms(str(form.get("time") or ""), int(time.time() * 1000))
        reset = await offsets.reset_by_time(admin, name, group, when)  # nobody online: the stored offsets
        count = len(reset.offsets) if reset.offsets is not None else len(reset.stats or [])
        return back(f"/topic/{name}", f"offsets of {group} reset on {count} queue(s)")

    async def consumers(request: Request) -> Response:
        q = request.query_params.get("q", "").strip()
        key, desc = _sort(request, "group")
        rows = [g for g in await data.group_rows(admin) if q.lower() in g["group"].lower()]
        info = await admin.cluster_info()
        return render(
            request, "consumers.html", groups=data.sort_rows(rows, key, desc), q=q, clusters=sorted(info.clusters),
            cfg=SubscriptionGroupConfig(""), sort=key, desc=desc,
        )  # fmt: skip

    async def group_save(request: Request) -> Response:
        """Create or update a consumer group's config on a cluster's masters."""
        form = await request.form()
        name = str(form.get("group") or "").strip()
        if not name or topic_error(name) is not None:
            raise InputError(f"{name!r} is not a group name: 1-127 of letters, digits, %, |, _ and -")
        config = SubscriptionGroupConfig(
            name,
            consume_enable="consume_enable" in form,
            consume_from_min_enable="consume_from_min_enable" in form,
            consume_broadcast_enable="consume_broadcast_enable" in form,
            retry_queue_nums=_int(form, "retry_queue_nums", 0, 64, 1),
            retry_max_times=_int(form, "retry_max_times", 0, 64, 16),
            broker_id=_int(form, "broker_id", 0, 1024, 0),
            which_broker_when_consume_slowly=_int(form, "which_broker_when_consume_slowly", 0, 1024, 1),
        )
        info = await admin.cluster_info()
        cluster_name = str(form.get("cluster") or "").strip() or next(iter(sorted(info.clusters)), "")
        if not info.masters(cluster_name):
            raise InputError(f"cluster {cluster_name!r} has no master")
        done = [addr async for addr in groups.create(admin, config, None, cluster_name)]
        return back(f"/consumer/{name}", f"group {name} saved on {len(done)} broker(s)")

    async def consumer_skip(request: Request) -> Response:
        """Skip the accumulated messages: the group's offsets of a topic move to its end."""
        group = request.path_params["group"]
        form = await request.form()
        name = _topic_name(form.get("topic"))
        reset = await offsets.reset_by_time(admin, name, group, -1)
        count = len(reset.offsets) if reset.offsets is not None else len(reset.stats or [])
        return back(f"/consumer/{group}", f"{group} skipped to the end of {name} on {count} queue(s)")

    async def consumer(request: Request) -> Response:
        group = request.path_params["group"]
        g = await data.group_detail(admin, group)
        if not g["configs"] and not g["queues"] and not g["clients"]:
            raise NotFound(f"There is no consumer group {group}.")
        cfg = SubscriptionGroupConfig.from_json(g["config"]) if "config" in g else SubscriptionGroupConfig(group)
        info = await admin.cluster_info()
        named = {q["topic"] for q in g["queues"]} | {s["topic"] for s in g["subscriptions"]}
        topics = sorted(named, key=lambda t: (t.startswith("%"), t))  # the retry topic last
        return render(request, "consumer.html", g=g, cfg=cfg, clusters=sorted(info.clusters), topics=topics)

    async def consumer_client(request: Request) -> Response:
        group, client_id = request.path_params["group"], request.path_params["client"]
        try:
            info = await admin.consumer_running_info(group, client_id)
        except MQBrokerError as exc:
            if "not online" not in exc.remark:
                raise
            raise NotFound(f"Client {client_id} of group {group} is not online.") from None
        text = json.dumps(_jsonable(info), indent=2, sort_keys=True, default=str)
        tables = data.running_tables(info)
        return render(request, "running.html", group=group, client=client_id, text=text, tables=tables)

    async def consumer_delete(request: Request) -> Response:
        group = request.path_params["group"]
        info = await admin.cluster_info()
        count = 0
        for cluster_name in info.clusters:
            for _, addr in info.masters(cluster_name):
                await admin.delete_subscription_group(addr, group)
                count += 1
        return back("/consumers", f"group {group} deleted on {count} broker(s)")

    async def producers(request: Request) -> Response:
        topic_q = request.query_params.get("topic", "").strip()
        group = request.query_params.get("group", "").strip()
        rows = await data.producer_rows(admin, _topic_name(topic_q), group) if topic_q and group else []
        if topic_q and group and not rows:
            raise NotFound(f"No producer of group {group} is connected to the brokers of topic {topic_q}.")
        return render(request, "producers.html", rows=rows, topic=topic_q, group=group, asked=bool(topic_q and group))

    async def _message(msg_id: str, topic: str = "") -> dict[str, Any]:
        """The message by offset id, or by unique key within `topic`: 400 for an id that is
        neither, 404 when no broker holds it."""
        msg_id = msg_id.strip()
        unique = topic and len(msg_id) == 32
        if not unique:
            try:
                parse_offset_msg_id(msg_id)
            except ProtocolError:
                raise InputError(f"{msg_id} is not a message id (32 hexadecimal digits or more).") from None
        try:
            found = await data.message_by_id(admin, msg_id, topic)
        except MQBrokerError:  # VIEW_MESSAGE_BY_ID: nothing at that offset
            found = None
        if found is None:
            raise NotFound(f"There is no message {msg_id}" + (f" in topic {topic}." if topic else "."))
        return found

    async def messages(request: Request) -> Response:
        p = request.query_params
        topic_q, key, msg_id = p.get("topic", "").strip(), p.get("key", "").strip(), p.get("msg_id", "").strip()
        rows: list[dict[str, Any]] = []
        asked = ""
        found: TimePage | None = None
        links: dict[str, str] = {}
        if msg_id:
            hit = await _message(msg_id, topic_q)
            return RedirectResponse(f"/message/{hit['offset_msg_id']}", status_code=303)
        if topic_q and key:
            rows, asked = await data.messages_by_key(admin, _topic_name(topic_q), key), f"key {key}"
            if len(rows) >= DEFAULT_QUERY_MAX_NUM:  # the brokers stop there: say so
                asked += f" (the brokers return at most {DEFAULT_QUERY_MAX_NUM}; more may match)"
        elif topic_q:
            now = int(time.time() * 1000)
            begin = _time_ms(p.get("begin", ""), now - 3600_000)
            end = _time_ms(p.get("end", ""), now)
            if begin > end:
                raise InputError("the range begins after it ends")
            number = _int(p, "page", 1, 1_000_000, 1)
            newest = p.get("order", "newest") != "oldest"
            rows, found = await data.messages_by_time(admin, _topic_name(topic_q), begin, end, number, newest)
            asked = f"time {data._time_text(begin)} .. {data._time_text(end)}"
            # the page links keep the range fixed, so "now" does not move between pages
            here = {"topic": topic_q, "begin": str(begin), "end": str(end), "order": "newest" if newest else "oldest"}
            links = {
                name: "/messages?" + urlencode({**here, "page": str(n)})
                for name, n in (("prev", number - 1), ("next", number + 1))
                if 1 <= n <= found.pages
            }
        return render(
            request, "messages.html", rows=rows, topic=topic_q, key=key, asked=asked, p=p, found=found, links=links
        )

    async def message(request: Request) -> Response:
        m = await _message(request.path_params["msg_id"])
        trace = await data.message_trace(admin, m["msg_id"])
        tracks = await data.message_tracks(admin, m)
        view = request.query_params.get("view", "text")
        return render(request, "message.html", m=m, trace=trace, tracks=tracks, view=view)

    async def message_resend(request: Request) -> Response:
        """Have a client of a group consume the message again (CONSUME_MESSAGE_DIRECTLY), as
        rocketmq-dashboard's resend; the client's answer is shown."""
        m = await _message(request.path_params["msg_id"])
        form = await request.form()
        group = str(form.get("group") or "").strip()
        client_id = str(form.get("client") or "").strip()
        if not group:
            raise InputError("no consumer group given")
        if not client_id:
            conn = await admin.consumer_connection(group)
            if not conn.connections:
                raise NotFound(f"No client of group {group} is online.")
            client_id = conn.connections[0].client_id
        answer = await admin.consume_message_directly(group, client_id, m["offset_msg_id"], m["topic"])
        result = answer.get("consumeResult", "?")
        flash = f"consumed again by {client_id} of {group}: {result}"
        if answer.get("remark"):
            flash += f" ({answer['remark']})"
        return back(f"/message/{m['offset_msg_id']}", flash)

    async def dlq(request: Request) -> Response:
        """Without a group, every group's dead-letter topic; with one, a page of its dead
        letters stored in the time range (default: the last day), newest first."""
        p = request.query_params
        group = p.get("group", "").strip()
        if not group:
            return render(request, "dlq.html", group="", topics=await data.dlq_topics(admin), p=p)
        now = int(time.time() * 1000)
        begin = _time_ms(p.get("begin", ""), now - 86_400_000)
        end = _time_ms(p.get("end", ""), now)
        if begin > end:
            raise InputError("the range begins after it ends")
        number = _int(p, "page", 1, 1_000_000, 1)
        try:
            rows, found = await data.messages_by_time(admin, DLQ_PREFIX + group, begin, end, number)
        except MQNoRouteError:  # no dead letter yet: the broker makes the topic with the first
            rows, found = [], TimePage([], 0, 1, 20, True)
        here = {"group": group, "begin": str(begin), "end": str(end)}
        links = {
            name: "/dlq?" + urlencode({**here, "page": str(n)})
            for name, n in (("prev", number - 1), ("next", number + 1))
            if 1 <= n <= found.pages
        }
        span = f"{data._time_text(begin)} .. {data._time_text(end)}"
        return render(
            request, "dlq.html", group=group, rows=rows, found=found, links=links, span=span, p=p, dlq_page=DLQ_PAGE
        )

    async def dlq_export(request: Request) -> Response:
        group = request.query_params.get("group", "").strip()
        if not group:
            raise InputError("no consumer group given")
        rows = [data.message_view(m) for m in await dead_letters(admin, group, DLQ_PAGE)]
        headers = {"Content-Disposition": f'attachment; filename="dlq-{group}.json"'}
        return JSONResponse(rows, headers=headers)

    async def dlq_resend(request: Request) -> Response:
        form = await request.form()
        group = str(form.get("group") or "").strip()
        msg_id = str(form.get("msg_id") or "").strip()
        if not group:
            raise InputError("no consumer group given")
        if msg_id:  # read by id: it may be anywhere in the topic, not just among the first
            msgs = [await admin.view_message(msg_id)]
            if msgs[0].topic != DLQ_PREFIX + group:
                raise InputError(f"message {msg_id} is not a dead letter of {group}")
        else:
            msgs = await dead_letters(admin, group, DLQ_PAGE)
        sent = 0
        async with admin_producer(admin) as producer:
            for m in msgs:
                done = await resend(producer, m)  # one without an origin topic is left alone
                if done.error is not None:
                    raise done.error
                if done.result is not None:
                    sent += 1
        return back(f"/dlq?group={group}", f"resent {sent} of {len(msgs)} dead letter(s)")

    async def ops(request: Request) -> Response:
        current = admin.namesrv[0] if admin.namesrv else ""
        return render(request, "ops.html", known=settings.namesrv, current=current)

    async def ops_namesrv(request: Request) -> Response:
        """Choose the name server the dashboard asks first (or add one), as the OPS page of
        rocketmq-dashboard does; the others stay as fallbacks."""
        form = await request.form()
        chosen = str(form.get("namesrv") or "").strip()
        host, sep, port = chosen.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise InputError(f"{chosen!r} is not a name server address (host:port)")
        if chosen not in settings.namesrv:
            settings.namesrv.append(chosen)
        admin.namesrv = (chosen, *(a for a in settings.namesrv if a != chosen))
        return back("/ops", f"name server {chosen} chosen")

    async def acl_page(request: Request) -> Response:
        """plain_acl.yml as a broker holds it: the global white list and the accounts."""
        info = await admin.cluster_info()
        members = [(c, f"{name} #{bid}", addr) for c in sorted(info.clusters) for name, bid, addr in info.members(c)]
        if not members:
            raise NotFound("No broker is registered with the name server.")
        addr = request.query_params.get("addr", "") or members[0][2]
        cluster_name = next((c for c, _, a in members if a == addr), None)
        if cluster_name is None:
            raise NotFound(f"There is no broker at {addr}.")
        try:
            config = await admin.acl_config(addr)
            error = ""
        except MQBrokerError as exc:
            config, error = None, plain(exc)
        return render(request, "acl.html", members=members, addr=addr, cluster=cluster_name, config=config, error=error)

    async def acl_account(request: Request) -> Response:
        """Create or update an account on every master and slave of the cluster."""
        form = await request.form()
        key = str(form.get("access_key") or "").strip()
        secret = str(form.get("secret_key") or "").strip()
        if len(key) < 6 or len(secret) < 6:
            raise InputError("the access key and the secret key need 6 characters or more each")

        def items(name: str) -> list[str]:
            return [i.strip() for i in str(form.get(name) or "").replace("\n", ",").split(",") if i.strip()]

        config = PlainAccessConfig(
            key,
            secret,
            white_remote_address=str(form.get("white") or "").strip() or None,
            admin="admin" in form,
            default_topic_perm=_acl_perm(form, "default_topic_perm"),
            default_group_perm=_acl_perm(form, "default_group_perm"),
            topic_perms=items("topic_perms"),
            group_perms=items("group_perms"),
        )
        cluster_name = str(form.get("cluster") or "")
        done = [a async for a in acl.update_account(admin, config, None, cluster_name)]
        return back(f"/acl?addr={form.get('addr') or ''}", f"account {key} saved on {len(done)} broker(s)")

    async def acl_delete(request: Request) -> Response:
        form = await request.form()
        key = str(form.get("access_key") or "").strip()
        if not key:
            raise InputError("no access key given")
        done = [a async for a in acl.delete_account(admin, key, None, str(form.get("cluster") or ""))]
        return back(f"/acl?addr={form.get('addr') or ''}", f"account {key} deleted on {len(done)} broker(s)")

    async def acl_white(request: Request) -> Response:
        form = await request.form()
        addrs = [a.strip() for a in str(form.get("addresses") or "").replace("\n", ",").split(",") if a.strip()]
        done = [a async for a in acl.update_white_list(admin, addrs, None, None, str(form.get("cluster") or ""))]
        return back(f"/acl?addr={form.get('addr') or ''}", f"global white list set on {len(done)} broker(s)")

    async def login(request: Request) -> Response:
        if settings.users is None:
            return RedirectResponse("/", status_code=303)
        if request.method == "POST":
            refused = await csrf_refusal(request)
            if refused is not None:
                return render(request, "login.html", 403, error=refused)
            who = request.client.host if request.client else ""
            wait = throttle.wait(who)
            if wait > 0:
                error = f"too many failed logins from your address; try again in {int(wait) + 1} s"
                return render(request, "login.html", 429, error=error)
            form = await request.form()
            user = check(settings.users, str(form.get("name") or ""), str(form.get("password") or ""))
            if user is None:
                throttle.failed(who)
                return render(request, "login.html", 401, error="wrong name or password")
            throttle.succeeded(who)
            request.session.clear()  # a new token for the new session
            request.session["user"] = user.name
            return RedirectResponse("/", status_code=303)
        return render(request, "login.html", error="")

    async def logout(request: Request) -> Response:
        refused = await csrf_refusal(request)
        if refused is not None:
            return render(request, "error.html", 403, error=refused)
        request.session.clear()
        return RedirectResponse("/login", status_code=303)

    async def failed(request: Request, exc: Exception) -> Response:
        log.exception("dashboard page %s failed", request.url.path)
        return render(request, "error.html", 500, error="The dashboard failed to show this page; its log says why.")

    class LoginRequired:
        """Sends anyone not logged in to /login when a users file is configured."""

        def __init__(self, app: Any) -> None:
            self.app = app

        async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
            path = scope.get("path", "")
            if (
                scope["type"] == "http"
                and settings.users is not None
                and not path.startswith(("/login", "/static/"))
                and not scope.get("session", {}).get("user")
            ):
                await RedirectResponse("/login", status_code=303)(scope, receive, send)
                return
            await self.app(scope, receive, send)

    routes = [
        Route("/", page(home)),
        Route("/cluster", page(cluster)),
        Route("/cluster/config", page(broker_config)),
        Route("/topics", page(topics)),
        Route("/topics", page(topic_save, write=True), methods=["POST"]),
        Route("/topic/{topic}", page(topic)),
        Route("/topic/{topic}/delete", page(topic_delete, write=True), methods=["POST"]),
        Route("/topic/{topic}/config", page(topic_config, write=True), methods=["POST"]),
        Route("/topic/{topic}/send", page(topic_send, write=True), methods=["POST"]),
        Route("/topic/{topic}/reset", page(topic_reset, write=True), methods=["POST"]),
        Route("/consumers", page(consumers)),
        Route("/consumers", page(group_save, write=True), methods=["POST"]),
        Route("/consumer/{group}/skip", page(consumer_skip, write=True), methods=["POST"]),
        Route("/consumer/{group}", page(consumer)),
        Route("/consumer/{group}/client/{client}", page(consumer_client)),
        Route("/consumer/{group}/delete", page(consumer_delete, write=True), methods=["POST"]),
        Route("/producers", page(producers)),
        Route("/messages", page(messages)),
        Route("/message/{msg_id}", page(message)),
        Route("/message/{msg_id}/resend", page(message_resend, write=True), methods=["POST"]),
        Route("/dlq", page(dlq)),
        Route("/dlq/export", page(dlq_export)),
        Route("/dlq/resend", page(dlq_resend, write=True), methods=["POST"]),
        Route("/acl", page(acl_page)),
        Route("/acl/account", page(acl_account, write=True), methods=["POST"]),
        Route("/acl/account/delete", page(acl_delete, write=True), methods=["POST"]),
        Route("/acl/white", page(acl_white, write=True), methods=["POST"]),
        Route("/ops", page(ops)),
        Route("/ops", page(ops_namesrv, write=True), methods=["POST"]),
        Route("/login", login, methods=["GET", "POST"]),
        Route("/logout", logout, methods=["POST"]),
        Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"),
    ]
    middleware = [
        Middleware(SessionMiddleware, secret_key=secrets.token_hex(32), same_site="strict"),
        Middleware(LoginRequired),
    ]
    app = Starlette(routes=routes, middleware=middleware, exception_handlers={Exception: failed})
    app.state.sampler = sampler
    return app


def _jsonable(value: Any) -> Any:
    """Running info as JSON: its tables are keyed by message queues, which JSON cannot key by."""
    if isinstance(value, dict):
        return {k if isinstance(k, str) else str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    return value


async def serve(
    settings: Settings,
    host: str = "127.0.0.1",
    port: int = 8080,
    *,
    task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run the dashboard until cancelled; reports "host:port" once it listens."""
    try:
        from hypercorn.config import Config
        from hypercorn.trio import serve as hypercorn_serve
    except ImportError:
        raise SystemExit(MISSING_EXTRA) from None
    signed = bool(settings.access_key and settings.secret_key)  # both or no credentials
    access_key = settings.access_key if signed else None
    secret_key = settings.secret_key if signed else None
    async with MQAdmin(settings.namesrv, access_key=access_key, secret_key=secret_key) as admin:
        sampler = data.Sampler(admin, settings.sample_interval, settings.topics_interval)
        app = build_app(settings, admin, sampler)
        config = Config()
        config.bind = [f"{host}:{port}"]
        config.accesslog = None
        config.graceful_timeout = 1.0
        async with trio.open_nursery() as nursery:
            nursery.start_soon(sampler.run)
            binds = await nursery.start(hypercorn_serve, app, config)
            task_status.started(binds[0].split("://", 1)[-1])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="rmq dashboard", description="A web console for a RocketMQ cluster.")
    p.add_argument("-n", "--namesrv", help="name server address(es), a;b (default $NAMESRV_ADDR)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (127.0.0.1)")
    p.add_argument("--port", type=int, default=8080, help="port to listen on (8080)")
    p.add_argument("--users", help="users.properties (name=password[,1 for admin]); without it, no login")
    p.add_argument("--read-only", action="store_true", help="refuse every change")
    p.add_argument("--accessKey", dest="access_key", help="ACL access key for the admin calls")
    p.add_argument("--secretKey", dest="secret_key", help="ACL secret key for the admin calls")
    p.add_argument("--sample-interval", type=float, default=10.0, help="seconds between TPS samples (10)")
    args = p.parse_args(argv)
    import os

    namesrv = args.namesrv or os.environ.get("NAMESRV_ADDR")
    if not namesrv:
        print("error: no name server: pass -n host:port or set NAMESRV_ADDR", file=sys.stderr)
        return 2
    if not 0 < args.port < 65536:
        print(f"error: --port {args.port} is not a port number", file=sys.stderr)
        return 2
    if bool(args.access_key) != bool(args.secret_key):
        print("error: --accessKey and --secretKey go together", file=sys.stderr)
        return 2
    try:
        users = load_users(args.users) if args.users else None
    except UsersFileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    settings = Settings(
        namesrv=[a.strip() for a in namesrv.split(";") if a.strip()],
        read_only=args.read_only,
        users=users,
        access_key=args.access_key,
        secret_key=args.secret_key,
        sample_interval=args.sample_interval,
    )
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    async def run() -> None:
        async with trio.open_nursery() as nursery:
            where = await nursery.start(serve, settings, args.host, args.port)
            print(f"rmq dashboard on http://{where}/ (name servers {';'.join(settings.namesrv)})", flush=True)

    try:
        trio.run(run)
    except KeyboardInterrupt:
        pass
    except OSError as exc:
        print(f"error: cannot listen on {args.host}:{args.port}: {exc.strerror}", file=sys.stderr)
        return 1
    return 0


__all__ = ["InputError", "MessageQueue", "Settings", "build_app", "main", "serve"]
