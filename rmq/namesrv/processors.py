"""The name server's request handlers (RocketMQ's DefaultRequestProcessor; PROTOCOL.md 3.8).

Each handler is a plain function `(state, request, channel) -> response` over the
synchronous RouteInfoManager and KVConfigManager, so it runs without awaiting and is
atomic on the Trio thread. `NamesrvProcessor` adapts them to the remoting Dispatcher.

Bad input never escapes as an exception: a missing or malformed header field, an
unparsable body or a CRC mismatch is answered with SYSTEM_ERROR and a remark saying
what was wrong, and the connection keeps serving.
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rmq.protocol import body as json_body
from rmq.protocol import javaprops as properties
from rmq.protocol.bodies.configs import DataVersion
from rmq.protocol.bodies.lists import KVTable, TopicList
from rmq.protocol.bodies.register import decode_register_body
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.command import RemotingCommand
from rmq.protocol.constants import TOPIC_SYS_FLAG_UNIT, TOPIC_SYS_FLAG_UNIT_SUB
from rmq.protocol.errors import HeaderError, ProtocolError
from rmq.protocol.headers import (
    BrokerNameRequestHeader,
    ClusterRequestHeader,
    DeleteTopicFromNamesrvRequestHeader,
    GetRouteInfoRequestHeader,
    Header,
    KVConfigRequestHeader,
    KVConfigResponseHeader,
    NamespaceRequestHeader,
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
    UnregisterBrokerRequestHeader,
)
from rmq.remoting.dispatcher import Dispatcher
from rmq.rocketmq_keys import ConfigError

from .config import NamesrvConfig
from .kvconfig import ORDER_TOPIC_CONFIG, KVConfigManager
from .route_info import RouteInfoManager

if TYPE_CHECKING:
    from rmq.remoting.abc import RequestContext

log = logging.getLogger("rmq.namesrv")

V4_9_4 = 401  # from this client version on, routes are standard JSON (PROTOCOL.md 4.3)


@dataclass(slots=True)
class QueryDataVersionRequestHeader(Header):
    broker_name: str
    broker_addr: str
    cluster_name: str
    broker_id: int


class NamesrvState:
    """What the handlers share: routes, KV config and the live configuration.

    `config` is replaced as a whole by UPDATE_NAMESRV_CONFIG; readers take it fresh.
    """

    def __init__(self, config: NamesrvConfig, routes: RouteInfoManager, kv: KVConfigManager) -> None:
        self.config = config
        self.routes = routes
        self.kv = kv


Handler = Callable[[NamesrvState, RemotingCommand, Hashable | None], RemotingCommand]


def _error(request: RemotingCommand, remark: str) -> RemotingCommand:
    return request.make_response(ResponseCode.SYSTEM_ERROR, remark)


def _ok(request: RemotingCommand, ext: dict[str, Any] | None = None, body: bytes = b"") -> RemotingCommand:
    return request.make_response(ResponseCode.SUCCESS, None, ext, body)


# -- brokers ------------------------------------------------------------------------------


def register_broker(state: NamesrvState, request: RemotingCommand, channel: Hashable | None) -> RemotingCommand:
    header = RegisterBrokerRequestHeader.from_ext(request.ext_fields)
    if header.body_crc32 != 0:
        crc = zlib.crc32(request.body) & 0x7FFFFFFF
        if crc != header.body_crc32:
            log.warning(
                "register from %s refused: body crc32 %d does not match the header's %d",
                header.broker_addr,
                crc,
                header.body_crc32,
            )
            return _error(request, "crc32 not match")
    body = decode_register_body(request.body, compressed=header.compressed, version=request.version)
    routes = state.routes
    known = header.broker_addr in routes.live
    result = routes.register_broker(
        header.cluster_name,
        header.broker_addr,
        header.broker_name,
        header.broker_id,
        header.ha_server_addr,
        body.data_version,
        body.topic_configs,
        body.filter_servers,
        channel,
    )
    if result.refused is not None:
        # a deposed master's late registration, typically: the answer says so in its log
        log.warning("register from %s (%s, id %d) refused: %s", header.broker_addr, header.broker_name,
                    header.broker_id, result.refused)  # fmt: skip
        return _error(request, result.refused)
    if not known:
        log.info(
            "new broker registered: %s (%s, id %d, cluster %s, HA %s)",
            header.broker_addr,
            header.broker_name,
            header.broker_id,
            header.cluster_name,
            header.ha_server_addr,
        )
    response_header = RegisterBrokerResponseHeader(result.ha_server_addr, result.master_addr)
    return _ok(request, response_header.to_ext(), _kv_table(state.kv.namespace(ORDER_TOPIC_CONFIG)))


def unregister_broker(state: NamesrvState, request: RemotingCommand, channel: Hashable | None) -> RemotingCommand:
    header = UnregisterBrokerRequestHeader.from_ext(request.ext_fields)
    state.routes.unregister_broker(header.cluster_name, header.broker_addr, header.broker_name, header.broker_id)
    log.info("broker unregistered: %s (%s, id %d)", header.broker_addr, header.broker_name, header.broker_id)
    return _ok(request)


def query_data_version(state: NamesrvState, request: RemotingCommand, channel: Hashable | None) -> RemotingCommand:
    header = QueryDataVersionRequestHeader.from_ext(request.ext_fields)
    version = _data_version_body(request.body)
    routes = state.routes
    changed = routes.is_topic_config_changed(header.broker_addr, version)
    if not changed:
        routes.touch(header.broker_addr)
    stored = routes.data_version_of(header.broker_addr)
    body = b"" if stored is None else json_body.dumps(stored.to_json())
    return _ok(request, {"changed": changed}, body)


def _data_version_body(data: bytes) -> DataVersion:
    try:
        return DataVersion.from_json(json_body.loads(data))
    except ValueError as exc:
        raise ProtocolError(f"bad DataVersion body: {exc}") from None
    except ProtocolError as exc:
        raise ProtocolError(f"bad DataVersion body: {exc}") from None


def wipe_write_perm(state: NamesrvState, request: RemotingCommand, channel: Hashable | None) -> RemotingCommand:
    header = BrokerNameRequestHeader.from_ext(request.ext_fields)
    count = state.routes.wipe_write_perm(header.broker_name)
    log.info("write permission of broker %s wiped on %d topics", header.broker_name, count)
    return _ok(request, {"wipeTopicCount": count})


def add_write_perm(state: NamesrvState, request: RemotingCommand, channel: Hashable | None) -> RemotingCommand:
    header = BrokerNameRequestHeader.from_ext(request.ext_fields)
    count = state.routes.add_write_perm(header.broker_name)
    log.info("write permission of broker %s added on %d topics", header.broker_name, count)
    return _ok(request, {"addTopicCount": count})


# -- routes and topics --------------------------------------------------------------------


def get_route_info(state: NamesrvState, request: RemotingCommand, channel: Hashable | None) -> RemotingCommand:
    header = GetRouteInfoRequestHeader.from_ext(request.ext_fields)
    conf = state.kv.get(ORDER_TOPIC_CONFIG, header.topic) if state.config.order_message_enable else None
    route = state.routes.topic_route(header.topic, conf)
    if route is None:
        return request.make_response(
            ResponseCode.TOPIC_NOT_EXIST, f"No topic route info in name server for the topic: {header.topic}"
        )
    standard = request.version >= V4_9_4 or bool(header.accept_standard_json_only)
    return _ok(request, body=json_body.dumps(route.to_json(), legacy=not standard))


def get_broker_cluster_info(state: NamesrvState, request: RemotingCommand, channel: Hashable | None) -> RemotingCommand:
    # always fastjson's legacy dialect, in 5.x too
    return _ok(request, body=json_body.dumps(state.routes.cluster_info(), legacy=True))


def get_all_topic_list(state: NamesrvState, request: RemotingCommand, channel: Hashable | None) -> RemotingCommand:
    return _topic_list(request, state.routes.all_topics())


def get_topics_by_cluster(state: NamesrvState, request: RemotingCommand, channel: Hashable | None) -> RemotingCommand:
    header = ClusterRequestHeader.from_ext(request.ext_fields)
    return _topic_list(request, state.routes.topics_by_cluster(header.cluster))


def get_system_topic_list(state: NamesrvState, request: RemotingCommand, channel: Hashable | None) -> RemotingCommand:
    topics, broker_addr = state.routes.system_topics()
    return _ok(request, body=json_body.dumps(TopicList(tuple(topics), broker_addr).to_json()))


def get_unit_topic_list(state: NamesrvState, request: RemotingCommand, channel: Hashable | None) -> RemotingCommand:
    return _topic_list(request, state.routes.topics_by_sys_flag(TOPIC_SYS_FLAG_UNIT))


def get_has_unit_sub_topic_list(
    state: NamesrvState, request: RemotingCommand, channel: Hashable | None
) -> RemotingCommand:
    return _topic_list(request, state.routes.topics_by_sys_flag(TOPIC_SYS_FLAG_UNIT_SUB))


def get_has_unit_sub_ununit_topic_list(
    state: NamesrvState, request: RemotingCommand, channel: Hashable | None
) -> RemotingCommand:
    return _topic_list(request, state.routes.topics_by_sys_flag(TOPIC_SYS_FLAG_UNIT_SUB, without=TOPIC_SYS_FLAG_UNIT))


def _topic_list(request: RemotingCommand, topics: list[str]) -> RemotingCommand:
    return _ok(request, body=json_body.dumps(TopicList(tuple(topics)).to_json()))


def delete_topic(state: NamesrvState, request: RemotingCommand, channel: Hashable | None) -> RemotingCommand:
    header = DeleteTopicFromNamesrvRequestHeader.from_ext(request.ext_fields)
    state.routes.delete_topic(header.topic, header.cluster_name)
    log.info("topic %s deleted%s", header.topic, f" on cluster {header.cluster_name}" if header.cluster_name else "")
    return _ok(request)


# -- KV config ----------------------------------------------------------------------------


def put_kv_config(state: NamesrvState, request: RemotingCommand, channel: Hashable | None) -> RemotingCommand:
    header = KVConfigRequestHeader.from_ext(request.ext_fields)
    if header.value is None:
        raise HeaderError("the header field 'value' is missing in PutKVConfigRequestHeader")
    state.kv.put(header.namespace, header.key, header.value)
    log.info("KV config put: %s %s=%s", header.namespace, header.key, header.value)
    return _ok(request)


def get_kv_config(state: NamesrvState, request: RemotingCommand, channel: Hashable | None) -> RemotingCommand:
    header = KVConfigRequestHeader.from_ext(request.ext_fields)
    value = state.kv.get(header.namespace, header.key)
    if value is None:
        return request.make_response(
            ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {header.namespace} Key: {header.key}"
        )
    return _ok(request, KVConfigResponseHeader(value).to_ext())


def delete_kv_config(state: NamesrvState, request: RemotingCommand, channel: Hashable | None) -> RemotingCommand:
    header = KVConfigRequestHeader.from_ext(request.ext_fields)
    state.kv.delete(header.namespace, header.key)
    log.info("KV config deleted: %s %s", header.namespace, header.key)
    return _ok(request)


def get_kv_list(state: NamesrvState, request: RemotingCommand, channel: Hashable | None) -> RemotingCommand:
    header = NamespaceRequestHeader.from_ext(request.ext_fields)
    entries = state.kv.namespace(header.namespace)
    if entries is None:
        return request.make_response(ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {header.namespace}")
    return _ok(request, body=_kv_table(entries))


def _kv_table(entries: dict[str, str] | None) -> bytes:
    return b"" if entries is None else json_body.dumps(KVTable(dict(sorted(entries.items()))).to_json())


# -- name server config -------------------------------------------------------------------


def get_namesrv_config(state: NamesrvState, request: RemotingCommand, channel: Hashable | None) -> RemotingCommand:
    return _ok(request, body=properties.render(state.config.to_properties()).encode("utf-8"))


def update_namesrv_config(state: NamesrvState, request: RemotingCommand, channel: Hashable | None) -> RemotingCommand:
    if not request.body:
        return _ok(request)
    try:
        text = request.body.decode("utf-8")
    except UnicodeDecodeError as exc:
        return _error(request, f"the config body is not UTF-8: {exc}")
    try:
        config, unknown = state.config.with_properties(properties.parse(text), runtime_only=True)
    except ConfigError as exc:
        return _error(request, f"config not updated: {exc}")
    if unknown:
        return _error(request, f"config not updated: unknown keys {', '.join(sorted(unknown))}")
    state.config = config
    log.info("name server config updated: %s", text.strip().replace("\n", ", "))
    return _ok(request)


HANDLERS: dict[int, Handler] = {
    RequestCode.REGISTER_BROKER: register_broker,
    RequestCode.UNREGISTER_BROKER: unregister_broker,
    RequestCode.QUERY_DATA_VERSION: query_data_version,
    RequestCode.WIPE_WRITE_PERM_OF_BROKER: wipe_write_perm,
    RequestCode.ADD_WRITE_PERM_OF_BROKER: add_write_perm,
    RequestCode.GET_ROUTEINFO_BY_TOPIC: get_route_info,
    RequestCode.GET_BROKER_CLUSTER_INFO: get_broker_cluster_info,
    RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: get_all_topic_list,
    RequestCode.GET_TOPICS_BY_CLUSTER: get_topics_by_cluster,
    RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS: get_system_topic_list,
    RequestCode.GET_UNIT_TOPIC_LIST: get_unit_topic_list,
    RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST: get_has_unit_sub_topic_list,
    RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST: get_has_unit_sub_ununit_topic_list,
    RequestCode.DELETE_TOPIC_IN_NAMESRV: delete_topic,
    RequestCode.PUT_KV_CONFIG: put_kv_config,
    RequestCode.GET_KV_CONFIG: get_kv_config,
    RequestCode.DELETE_KV_CONFIG: delete_kv_config,
    RequestCode.GET_KVLIST_BY_NAMESPACE: get_kv_list,
    RequestCode.GET_NAMESRV_CONFIG: get_namesrv_config,
    RequestCode.UPDATE_NAMESRV_CONFIG: update_namesrv_config,
}


def handle(state: NamesrvState, request: RemotingCommand, channel: Hashable | None = None) -> RemotingCommand:
    """Answer one name server request; unknown codes get REQUEST_CODE_NOT_SUPPORTED."""
    handler = HANDLERS.get(request.code)
    if handler is None:
        return request.make_response(
            ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {request.code} not supported"
        )
    try:
        return handler(state, request, channel)
    except ProtocolError as exc:
        log.info("bad request %d: %s", request.code, exc)
        return _error(request, str(exc))
    except OSError as exc:
        # the change is in memory but not on disk; say so rather than pretend
        log.error("cannot write the KV config file: %s", exc)
        return _error(request, f"applied in memory but not persisted: {exc}")


class NamesrvProcessor:
    """Serves every name server code from one NamesrvState.

    The connection a request arrives on is the broker's channel identity: a broker is
    dropped when the connection it last registered on closes.
    """

    def __init__(self, state: NamesrvState) -> None:
        self.state = state

    async def process(self, ctx: RequestContext, request: RemotingCommand) -> RemotingCommand | None:
        # no await inside: each request sees and leaves the tables consistent
        return handle(self.state, request, ctx.connection)


def build_dispatcher(state: NamesrvState) -> Dispatcher:
    """A Dispatcher serving the name server codes; others get REQUEST_CODE_NOT_SUPPORTED."""
    dispatcher = Dispatcher()
    dispatcher.register(HANDLERS, NamesrvProcessor(state))
    return dispatcher
