"""The admin API: what mqadmin asks name servers and brokers (RocketMQ's MQAdminExt).

    async with MQAdmin("127.0.0.1:9876") as admin:
        for addr in (await admin.cluster_info()).master_addrs("DefaultCluster"):
            await admin.create_topic(addr, TopicConfig("Orders", read_queue_nums=8, write_queue_nums=8))
        stats = await admin.topic_stats("Orders")

Methods come in two kinds. `..._on(addr, ...)` methods and the name-server methods
send one request and return its answer as plain typed values. The others do what
mqadmin's `examine...` calls do: look up which brokers serve a topic (its route) or a
consumer group (the route of `%RETRY%<group>`, else every master), ask each of them in
turn and merge the answers. JSON bodies are read with `rmq.protocol.body.loads`, which
understands fastjson's unquoted integer keys and MessageQueue object keys.

Name-server requests go to the first name server that answers; connection failures and
timeouts move on to the next one. Changes (KV config, topic deletion) go to all.

Controller requests (RocketMQ 5's controller, docs/controller.md) take a controller member's
address: the reads of its own state (metadata, settings) go to that member, and what only the
leader answers goes to the leader the member names, as MQClientAPIImpl does.

Errors are MQClientError subclasses: MQNoRouteError (no route for a topic),
MQConnectError / MQTimeoutError (an address could not be reached or did not answer in
`timeout` seconds), AdminResponseError (a peer answered an error code: it names the
request, the address, the code and the remark), and plain MQClientError for a
malformed answer or an unknown cluster. Cancelling a call may leave a change applied
on some brokers and not on others, as an interrupted mqadmin would.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self, TypeVar

from rmq.protocol import (
    LanguageCode,
    ProtocolError,
    RemotingCommand,
    RequestCode,
    ResponseCode,
    acl,
    bodies,
    code_name,
    javaprops,
)
from rmq.protocol import body as B
from rmq.protocol import headers as H
from rmq.protocol import properties as P
from rmq.protocol.bodies.clients import Connection as ClientConnection
from rmq.protocol.bodies.clients import ProducerConnection
from rmq.protocol.bodies.clients import ProducerTableInfo as ProducerTableInfo
from rmq.protocol.bodies.configs import DataVersion, SubscriptionGroupWrapper, TopicConfigSerializeWrapper
from rmq.protocol.bodies.configs import SubscriptionGroupConfig as SubscriptionGroupConfig
from rmq.protocol.bodies.configs import TopicConfig as TopicConfig
from rmq.protocol.bodies.controller import BrokerMemberGroup, BrokerReplicasInfo, EpochEntryCache
from rmq.protocol.bodies.lists import GroupList, KVTable, TopicList
from rmq.protocol.bodies.offsets import ResetOffsetBody
from rmq.protocol.bodies.stats import ConsumeStats as ConsumeStats
from rmq.protocol.bodies.stats import OffsetWrapper as OffsetWrapper
from rmq.protocol.bodies.stats import TopicOffset as TopicOffset
from rmq.protocol.bodies.stats import TopicStatsTable
from rmq.protocol.constants import (
    PULL_SUBSCRIPTION,
    RETRY_PREFIX,
    TOOLS_CONSUMER_GROUP,
)
from rmq.protocol.constants import perm_to_string as perm_to_string
from rmq.protocol.message import (
    MessageExt,
    decompress_body,
    iter_records,
    parse_offset_msg_id,
)
from rmq.remoting import ClientConfig as RemotingConfig
from rmq.remoting import RemotingClient
from rmq.remoting.tlsconfig import TlsClientSettings

from .api import ClientAPI, PullStatus
from .config import parse_namesrv, tls_context
from .errors import (
    MQBrokerError,
    MQClientError,
    MQConnectError,
    MQNoRouteError,
    MQTimeoutError,
)
from .message import MessageQueue
from .route import TopicRoute

T = TypeVar("T")

DLEDGER_LEADERSHIP_TRANSFER = 51005  # DLedgerRequestCode.LEADERSHIP_TRANSFER

__all__ = [
    "AclVersionInfo",
    "Admin",
    "AdminResponseError",
    "ClientConnection",
    "ClusterInfo",
    "ConsumeStats",
    "ConsumerConnection",
    "MQAdmin",
    "OffsetWrapper",
    "ProducerTableInfo",
    "RollbackStats",
    "SubscriptionGroupConfig",
    "TopicConfig",
    "TopicOffset",
    "perm_to_string",
    "version_desc",
]

ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"  # name-server KV namespace of order-topic confs
UNIQUE_KEY_QUERY = "_UNIQUE_KEY_QUERY"
MAX_TIMESTAMP = (1 << 63) - 1
DEFAULT_QUERY_MAX_NUM = 64
PULL_BATCH = 32


class AdminResponseError(MQBrokerError):
    """A name server or broker answered `request_code` with an error `response_code`."""

    def __init__(self, request_code: int, response_code: int, remark: str | None, address: str) -> None:
        super().__init__(response_code, remark, address=address)
        self.request_code = request_code
        self.remark = self.remark.strip()
        text = (
            f"{code_name(request_code, response=False)} to {address} answered {code_name(response_code, response=True)}"
        )
        self.args = (f"{text}: {self.remark}" if self.remark else text,)


# -- typed values ---------------------------------------------------------------------------


class ClusterInfo(bodies.ClusterInfo):
    """GET_BROKER_CLUSTER_INFO: brokers by name and broker names by cluster, with the
    questions mqadmin asks of it."""

    __slots__ = ()

    def broker_names(self, cluster: str) -> list[str]:
        """The cluster's broker names; MQClientError if the cluster is unknown."""
        names = self.clusters.get(cluster)
        if names is None:
            known = ", ".join(sorted(self.clusters)) or "none"
            raise MQClientError(f"cluster {cluster!r} is not known to the name server (clusters: {known})")
        return sorted(names)

    def masters(self, cluster: str) -> list[tuple[str, str]]:
        """(broker name, master address) of every broker of `cluster` that has a master."""
        out = []
        for name in self.broker_names(cluster):
            bd = self.brokers.get(name)
            if bd is not None and bd.master_addr is not None:
                out.append((name, bd.master_addr))
        return out

    def master_addrs(self, cluster: str) -> list[str]:
        return [addr for _, addr in self.masters(cluster)]

    def members(self, cluster: str) -> list[tuple[str, int, str]]:
        """(broker name, broker id, address) of every master and slave of `cluster`, by
        name then id (a group's master, id 0, first)."""
        out: list[tuple[str, int, str]] = []
        for name in self.broker_names(cluster):
            bd = self.brokers.get(name)
            if bd is not None:
                out.extend((name, bid, addr) for bid, addr in sorted(bd.addrs.items()))
        return out

    def all_addrs(self, cluster: str) -> list[str]:
        """Every master and slave address of `cluster` (mqadmin's
        fetchMasterAndSlaveAddrByClusterName)."""
        return [addr for _, _, addr in self.members(cluster)]

    def broker_name_of(self, addr: str) -> str | None:
        for bd in self.brokers.values():
            if addr in bd.addrs.values():
                return bd.broker_name
        return None


@dataclass(frozen=True, slots=True)
class ConsumerConnection:
    """Who is online in a group and what it subscribes, as mqadmin shows it: the
    GET_CONSUMER_CONNECTION_LIST answer (rmq.protocol.bodies.ConsumerConnection) with each
    subscription as its expression, merged over brokers by `MQAdmin.consumer_connection`."""

    connections: list[ClientConnection]
    subscriptions: dict[str, str]  # topic → subscription expression
    consume_type: str = ""
    message_model: str = ""
    consume_from_where: str = ""

    @classmethod
    def of(cls, answer: bodies.ConsumerConnection) -> ConsumerConnection:
        subs = {topic: sub.sub_string for topic, sub in answer.subscriptions.items()}
        return cls(list(answer.connections), subs, answer.consume_type, answer.message_model, answer.consume_from_where)

    @property
    def min_version(self) -> int:
        return min((c.version for c in self.connections), default=0)


@dataclass(frozen=True, slots=True)
class RollbackStats:
    """One queue's result of resetting offsets in the broker (resetOffsetByTimeOld)."""

    broker_name: str
    queue_id: int
    broker_offset: int
    consumer_offset: int
    timestamp_offset: int
    rollback_offset: int


def _version_names() -> list[str]:
    """MQVersion.Version in ordinal order: irregular 3.0.0 releases, then SNAPSHOT and
    release of each version (3.3.x to 3.9.x start at patch 1), up to 9.9.9."""
    names = ["V3_0_0_SNAPSHOT", "V3_0_0_ALPHA1"] + [f"V3_0_0_BETA{i}" for i in range(1, 6)]
    for i in range(6, 10):
        names += [f"V3_0_0_BETA{i}_SNAPSHOT", f"V3_0_0_BETA{i}"]
    names.append("V3_0_0_FINAL")
    versions = [(3, 0, p) for p in range(1, 16)]
    versions += [(3, m, p) for m in (1, 2) for p in range(10)]
    versions += [(3, m, p) for m in range(3, 10) for p in range(1, 10)]
    versions += [(a, m, p) for a in range(4, 10) for m in range(10) for p in range(10)]
    for a, m, p in versions:
        names += [f"V{a}_{m}_{p}_SNAPSHOT", f"V{a}_{m}_{p}"]
    return names


_VERSION_NAMES = _version_names()


def version_desc(version: int) -> str:
    """MQVersion.getVersionDesc: the release name of a wire version (409 → "V4_9_8")."""
    if 0 <= version < len(_VERSION_NAMES):
        return _VERSION_NAMES[version]
    return "HigherVersion"


def _addr_of(ip: str, port: int) -> str:
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


def _masters_of(route: TopicRoute) -> list[tuple[str, str]]:
    return sorted((bd.broker_name, bd.master_addr) for bd in route.broker_datas if bd.master_addr is not None)


# -- the client -----------------------------------------------------------------------------


class MQAdmin:
    """Admin requests to name servers and brokers; use as `async with MQAdmin(namesrv):`.

    Args:
      namesrv: name server addresses ("a:9876;b:9876" or a list); None reads
        $NAMESRV_ADDR. May be empty for broker-only work; name-server calls then raise
        MQClientError.
      timeout: limit in seconds on each request (connecting included).
      remoting: share a running RemotingClient instead of opening one.
      tls: connect with TLS, as a client's `tls` option (config.py): True, an
        ssl.SSLContext or TlsClientSettings. Not used with `remoting`.
      access_key, secret_key: ACL credentials; every request is signed with them.
    """

    def __init__(
        self,
        namesrv: str | Sequence[str] | None = None,
        *,
        timeout: float = 5.0,
        remoting: RemotingClient | None = None,
        tls: bool | ssl.SSLContext | TlsClientSettings = False,
        access_key: str | None = None,
        secret_key: str | None = None,
    ) -> None:
        self.namesrv: tuple[str, ...] = ()
        if namesrv or os.environ.get("NAMESRV_ADDR", "").strip():
            self.namesrv = parse_namesrv(namesrv or None)  # MQClientError if malformed
        if bool(access_key) != bool(secret_key):
            raise MQClientError("access_key and secret_key go together: pass both or neither")
        self.credentials = (access_key, secret_key) if access_key and secret_key else None
        self.timeout = timeout
        self._own_remoting = remoting is None
        self.tls = tls
        if remoting is None:
            context = tls_context(tls)  # MQClientError for a certificate that cannot be loaded
            remoting = RemotingClient(RemotingConfig(tls=context is not None, ssl_context=context))
        self._remoting = remoting
        self.api = ClientAPI(self._remoting, timeout=timeout, credentials=self.credentials)

    async def __aenter__(self) -> Self:
        if self._own_remoting:
            await self._remoting.__aenter__()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._own_remoting:
            await self._remoting.__aexit__(exc_type, exc, tb)

    # -- plumbing -------------------------------------------------------------------------

    async def _request(
        self,
        addr: str,
        code: int,
        header: H.Header | dict[str, str] | None = None,
        body: bytes = b"",
        ok: Iterable[int] = (ResponseCode.SUCCESS,),
        *,
        language: int | None = None,
    ) -> RemotingCommand:
        ext = header.to_ext() if isinstance(header, H.Header) else header
        request = RemotingCommand.request(code, ext, body)
        if language is not None:
            request.language = language
        response = await self.api.invoke(addr, request, self.timeout)
        if response.code not in tuple(ok):
            raise AdminResponseError(code, response.code, response.remark, addr)
        return response

    def _namesrv_addrs(self) -> tuple[str, ...]:
        if not self.namesrv:
            raise MQClientError("no name server address: pass -n host:port or set NAMESRV_ADDR")
        return self.namesrv

    async def _namesrv_request(
        self, code: int, header: H.Header | None = None, ok: Iterable[int] = (ResponseCode.SUCCESS,)
    ) -> tuple[str, RemotingCommand]:
        """Ask the name servers in order until one answers; (its address, the response)."""
        last: MQClientError | None = None
        for addr in self._namesrv_addrs():
            try:
                return addr, await self._request(addr, code, header, ok=ok)
            except (MQConnectError, MQTimeoutError) as exc:
                last = exc
        assert last is not None
        raise last

    @staticmethod
    def _json(response: RemotingCommand, addr: str, what: str) -> dict[Any, Any]:
        if not response.body:
            return {}
        try:
            obj = B.loads(response.body)
        except ProtocolError as exc:
            raise MQClientError(f"malformed {what} from {addr}: {exc}") from None
        if not isinstance(obj, dict):
            raise MQClientError(f"malformed {what} from {addr}: not a JSON object")
        return obj

    @staticmethod
    def _read(response: RemotingCommand, addr: str, what: str, read: Callable[[Any], T]) -> T:
        """The answer's JSON body read by `read` (a body's from_json); an empty body is `{}`."""
        try:
            return read(B.loads(response.body) if response.body else {})
        except ProtocolError as exc:
            raise MQClientError(f"malformed {what} from {addr}: {exc}") from None

    @staticmethod
    def _records(response: RemotingCommand, addr: str) -> list[MessageExt]:
        out = []
        try:
            for msg in iter_records(response.body):
                msg.body = decompress_body(msg.body, msg.sys_flag)
                out.append(msg)
        except ProtocolError as exc:
            raise MQClientError(f"malformed messages from {addr}: {exc}") from None
        return out

    # -- name server ----------------------------------------------------------------------

    async def cluster_info(self) -> ClusterInfo:
        """GET_BROKER_CLUSTER_INFO."""
        addr, response = await self._namesrv_request(RequestCode.GET_BROKER_CLUSTER_INFO)
        return self._read(response, addr, "cluster info", ClusterInfo.from_json)

    async def topic_list(self) -> list[str]:
        """GET_ALL_TOPIC_LIST_FROM_NAMESERVER, sorted."""
        addr, response = await self._namesrv_request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        return sorted(self._read(response, addr, "topic list", TopicList.from_json).topics)

    async def topic_route(self, topic: str) -> TopicRoute:
        """GET_ROUTEINFO_BY_TOPIC; MQNoRouteError when the name server knows no route."""
        last: MQClientError | None = None
        for addr in self._namesrv_addrs():
            try:
                route = await self.api.get_route(addr, topic, self.timeout)
            except (MQConnectError, MQTimeoutError) as exc:
                last = exc
                continue
            if route is None or not route.broker_datas:
                raise MQNoRouteError(topic, [addr], "the name server has no route for it")
            return route
        assert last is not None
        raise last

    async def delete_topic_in_namesrv(self, topic: str, cluster: str | None = None) -> list[str]:
        """DELETE_TOPIC_IN_NAMESRV on every name server; returns their addresses."""
        header = H.DeleteTopicFromNamesrvRequestHeader(topic, cluster)
        addrs = list(self._namesrv_addrs())
        for addr in addrs:
            await self._request(addr, RequestCode.DELETE_TOPIC_IN_NAMESRV, header)
        return addrs

    async def get_kv_config(self, namespace: str, key: str) -> str | None:
        """GET_KV_CONFIG; None when the name server has no such key."""
        header = H.KVConfigRequestHeader(namespace, key)
        _, response = await self._namesrv_request(
            RequestCode.GET_KV_CONFIG, header, (ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND)
        )
        if response.code == ResponseCode.QUERY_NOT_FOUND:
            return None
        return response.ext_fields.get("value")

    async def put_kv_config(self, namespace: str, key: str, value: str) -> None:
        """PUT_KV_CONFIG on every name server."""
        header = H.KVConfigRequestHeader(namespace, key, value)
        for addr in self._namesrv_addrs():
            await self._request(addr, RequestCode.PUT_KV_CONFIG, header)

    async def update_order_conf(self, topic: str, conf: str, *, whole_cluster: bool) -> str:
        """Set a topic's order conf ("brokerName:queues;..."); unless `whole_cluster`,
        merge it into what the name server has for other brokers. Returns the conf set."""
        if not whole_cluster:
            old = await self.get_kv_config(ORDER_TOPIC_CONFIG, topic)
            if old:
                entries = dict(item.partition(":")[::2] for item in old.split(";") if ":" in item)
                entries.update(item.partition(":")[::2] for item in conf.split(";") if ":" in item)
                conf = ";".join(f"{name}:{nums}" for name, nums in entries.items())
        await self.put_kv_config(ORDER_TOPIC_CONFIG, topic, conf)
        return conf

    # -- topics on a broker ---------------------------------------------------------------

    async def create_topic(self, addr: str, config: TopicConfig) -> None:
        """UPDATE_AND_CREATE_TOPIC on the broker at `addr` (it then re-registers)."""
        header = H.CreateTopicRequestHeader(
            topic=config.topic_name,
            read_queue_nums=config.read_queue_nums,
            write_queue_nums=config.write_queue_nums,
            perm=config.perm,
            topic_filter_type=config.topic_filter_type,
            topic_sys_flag=config.topic_sys_flag,
            order=config.order,
        )
        await self._request(addr, RequestCode.UPDATE_AND_CREATE_TOPIC, header)

    async def delete_topic_in_broker(self, addr: str, topic: str) -> None:
        await self._request(addr, RequestCode.DELETE_TOPIC_IN_BROKER, H.TopicRequestHeader(topic))

    async def topic_stats_on(self, addr: str, topic: str) -> dict[MessageQueue, TopicOffset]:
        """GET_TOPIC_STATS_INFO on one broker."""
        response = await self._request(addr, RequestCode.GET_TOPIC_STATS_INFO, H.TopicRequestHeader(topic))
        return dict(self._read(response, addr, "topic stats", TopicStatsTable.from_json).offsets)

    async def topic_stats(self, topic: str) -> dict[MessageQueue, TopicOffset]:
        """The topic's queue offsets on every master that serves it (examineTopicStats)."""
        route = await self.topic_route(topic)
        out: dict[MessageQueue, TopicOffset] = {}
        for _, addr in _masters_of(route):
            out.update(await self.topic_stats_on(addr, topic))
        return out

    async def topic_consumed_by(self, topic: str) -> list[str]:
        """QUERY_TOPIC_CONSUME_BY_WHO on every master of the topic; the groups, sorted."""
        route = await self.topic_route(topic)
        groups: set[str] = set()
        for _, addr in _masters_of(route):
            response = await self._request(addr, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, H.TopicRequestHeader(topic))
            groups.update(self._read(response, addr, "group list", GroupList.from_json).groups)
        return sorted(groups)

    # -- brokers --------------------------------------------------------------------------

    async def broker_runtime_info(self, addr: str) -> dict[str, str]:
        """GET_BROKER_RUNTIME_INFO: the broker's KVTable of figures (all strings)."""
        response = await self._request(addr, RequestCode.GET_BROKER_RUNTIME_INFO)
        return dict(self._read(response, addr, "runtime info", KVTable.from_json).table)

    async def transfer_leadership(self, addr: str, transferee: str | None = None) -> str:
        """Hand a DLedger group's leadership to member ``transferee`` (default: the group's
        preferredLeaderId) with DLedger's LEADERSHIP_TRANSFER (51005), sent to the leader's
        DLedger port. ``addr``: any member's broker address. Returns the new leader's id."""
        info = await self.broker_runtime_info(addr)
        if "dLegerPeers" not in info:
            raise MQClientError(f"{addr} is not a member of a DLedger group")
        peers = dict(p.split("-", 1) for p in info["dLegerPeers"].split(";") if "-" in p)
        to = transferee or info.get("preferredLeaderId") or ""
        if to not in peers:
            raise MQClientError(f"name a member to lead ({', '.join(peers)}): {to or 'none given'}")
        leader = info.get("dLegerLeaderId") or ""
        if leader not in peers:
            raise MQClientError(f"the group {info.get('dLegerGroup')} has no leader now; try again")
        body = B.dumps(
            {
                "group": info.get("dLegerGroup", ""),
                "remoteId": leader,
                "leaderId": leader,
                "term": int(info.get("dLegerTerm", "0")),
                "transfereeId": to,
            }
        )
        request = RemotingCommand.request(DLEDGER_LEADERSHIP_TRANSFER, None, body)
        response = await self.api.invoke(peers[leader], request, max(self.timeout, 15.0))
        if response.code != ResponseCode.SUCCESS:
            raise AdminResponseError(DLEDGER_LEADERSHIP_TRANSFER, response.code, response.remark, peers[leader])
        return to

    async def broker_ha_status(self, addr: str) -> dict[str, Any]:
        """GET_BROKER_HA_STATUS: RocketMQ 5.x's HARuntimeInfo of a master (its slaves, their
        acked offsets and lag) or of a slave (its master, offsets and last transfers)."""
        response = await self._request(addr, RequestCode.GET_BROKER_HA_STATUS)
        info = self._json(response, addr, "HA status")
        if not isinstance(info, dict):
            raise MQClientError(f"malformed HA status from {addr}")
        return info

    # -- subscription groups ----------------------------------------------------------------

    async def create_subscription_group(self, addr: str, config: SubscriptionGroupConfig) -> None:
        await self._request(addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=B.dumps(config.to_json()))

    async def delete_subscription_group(self, addr: str, group: str) -> None:
        await self._request(addr, RequestCode.DELETE_SUBSCRIPTIONGROUP, H.DeleteSubscriptionGroupRequestHeader(group))

    async def group_masters(self, group: str) -> list[tuple[str, str]]:
        """(broker name, master address) of the brokers serving `group`: those in the route
        of `%RETRY%<group>`, or every master known when that topic has no route."""
        try:
            return _masters_of(await self.topic_route(RETRY_PREFIX + group))
        except MQNoRouteError:
            info = await self.cluster_info()
            return sorted(
                (bd.broker_name, bd.master_addr) for bd in info.brokers.values() if bd.master_addr is not None
            )

    # -- consumers ------------------------------------------------------------------------

    async def consume_stats_on(self, addr: str, group: str, topic: str | None = None) -> ConsumeStats:
        """GET_CONSUME_STATS on one broker (every topic the group has offsets for, or `topic`)."""
        header = H.GetConsumeStatsRequestHeader(group, topic)
        response = await self._request(addr, RequestCode.GET_CONSUME_STATS, header)
        return self._read(response, addr, "consume stats", ConsumeStats.from_json)

    async def consume_stats(self, group: str, topic: str | None = None) -> ConsumeStats:
        """The group's progress on every broker serving it (examineConsumeStats).

        Raises MQClientError when no broker has an offset for the group.
        """
        offsets: dict[MessageQueue, OffsetWrapper] = {}
        tps = 0.0
        for _, addr in await self.group_masters(group):
            stats = await self.consume_stats_on(addr, group, topic)
            offsets.update(stats.offsets)
            tps += stats.consume_tps
        if not offsets:
            raise MQClientError(f"no consume stats for group {group!r}: no broker has an offset for it")
        return ConsumeStats(offsets, tps)

    async def consumer_connection_on(self, addr: str, group: str) -> ConsumerConnection:
        """GET_CONSUMER_CONNECTION_LIST on one broker; AdminResponseError 206 if offline."""
        response = await self._request(addr, RequestCode.GET_CONSUMER_CONNECTION_LIST, H.GroupRequestHeader(group))
        answer = self._read(response, addr, "consumer connections", bodies.ConsumerConnection.from_json)
        return ConsumerConnection.of(answer)

    async def consumer_connection(self, group: str) -> ConsumerConnection:
        """The group's connections on every broker serving it, merged.

        Raises AdminResponseError (206 CONSUMER_NOT_ONLINE) when no broker has one.
        """
        merged: ConsumerConnection | None = None
        offline: AdminResponseError | None = None
        for _, addr in await self.group_masters(group):
            try:
                cc = await self.consumer_connection_on(addr, group)
            except AdminResponseError as exc:
                if exc.response_code != ResponseCode.CONSUMER_NOT_ONLINE:
                    raise
                offline = exc
                continue
            if merged is None:
                merged = cc
            else:
                known = {c.client_id for c in merged.connections}
                merged.connections.extend(c for c in cc.connections if c.client_id not in known)
                merged.subscriptions.update(cc.subscriptions)
        if merged is None or not merged.connections:
            if offline is not None:
                raise offline
            raise MQClientError(f"the consumer group {group!r} is not online: no broker serves it")
        return merged

    # -- offsets --------------------------------------------------------------------------

    async def reset_offset_on(
        self, addr: str, topic: str, group: str, timestamp: int, *, force: bool = True, cpp: bool = False
    ) -> dict[MessageQueue, int]:
        """INVOKE_BROKER_TO_RESET_OFFSET: the broker sets the group's offsets of `topic` to the
        first message stored at or after `timestamp` (ms) and tells the online consumers.

        `cpp` sends the request as a C++ client would, so the broker answers the C++ form.
        """
        header = H.ResetOffsetRequestHeader(topic, group, timestamp, force)
        language = LanguageCode.CPP if cpp else None
        response = await self._request(addr, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, header, language=language)
        return dict(self._read(response, addr, "reset offsets", ResetOffsetBody.from_json).offset_table)

    async def reset_offset_by_time(
        self, topic: str, group: str, timestamp: int, *, force: bool = True, cpp: bool = False
    ) -> dict[MessageQueue, int]:
        """INVOKE_BROKER_TO_RESET_OFFSET on every master of `topic`; the new offsets.

        An AdminResponseError with code 206 (CONSUMER_NOT_ONLINE) means no consumer of
        the group is online: mqadmin then falls back to `reset_offset_by_time_old`.
        """
        route = await self.topic_route(topic)
        out: dict[MessageQueue, int] = {}
        for _, addr in _masters_of(route):
            out.update(await self.reset_offset_on(addr, topic, group, timestamp, force=force, cpp=cpp))
        return out

    async def reset_offset_by_time_old(
        self, group: str, topic: str, timestamp: int, *, force: bool = True
    ) -> list[RollbackStats]:
        """Reset offsets in the brokers directly (resetOffsetByTimestampOld): for each queue,
        search the offset at `timestamp` (-1: the max offset) and commit it when `force` or
        when it is behind the group's offset. Online consumers are not told and may
        overwrite it with their next commit."""
        route = await self.topic_route(topic)
        out: list[RollbackStats] = []
        for name, addr in _masters_of(route):
            stats = await self.consume_stats_on(addr, group, topic)
            for mq, ow in sorted(stats.offsets.items()):
                if mq.topic != topic:
                    continue
                if timestamp == -1:
                    offset = await self.api.get_max_offset(addr, mq, self.timeout)
                else:
                    offset = await self.api.search_offset(addr, mq, timestamp, self.timeout)
                rollback = ow.consumer_offset
                if force or offset <= ow.consumer_offset:
                    await self.api.update_consumer_offset(addr, group, mq, offset, timeout=self.timeout)
                    rollback = offset
                out.append(RollbackStats(name, mq.queue_id, ow.broker_offset, ow.consumer_offset, offset, rollback))
        return out

    # -- messages -------------------------------------------------------------------------

    async def view_message(self, offset_msg_id: str) -> MessageExt:
        """VIEW_MESSAGE_BY_ID at the broker the offset message id names."""
        try:
            ip, port, offset = parse_offset_msg_id(offset_msg_id.strip())
        except ProtocolError as exc:
            raise MQClientError(f"{offset_msg_id!r} is not an offset message id: {exc}") from None
        addr = _addr_of(ip, port)
        response = await self._request(addr, RequestCode.VIEW_MESSAGE_BY_ID, H.ViewMessageRequestHeader(offset))
        msgs = self._records(response, addr)
        if not msgs:
            raise MQClientError(f"{addr} answered VIEW_MESSAGE_BY_ID without a message")
        return msgs[0]

    async def query_message_on(
        self,
        addr: str,
        topic: str,
        key: str,
        *,
        max_num: int = DEFAULT_QUERY_MAX_NUM,
        begin: int = 0,
        end: int = MAX_TIMESTAMP,
        unique: bool = False,
    ) -> list[MessageExt]:
        """QUERY_MESSAGE on one broker: what its index holds under `key` (unfiltered)."""
        ext = H.QueryMessageRequestHeader(topic, key, max_num, begin, end).to_ext()
        if unique:
            ext[UNIQUE_KEY_QUERY] = "true"
        response = await self._request(
            addr, RequestCode.QUERY_MESSAGE, ext, ok=(ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND)
        )
        if response.code == ResponseCode.QUERY_NOT_FOUND:
            return []
        return self._records(response, addr)

    async def query_message(
        self,
        topic: str,
        key: str,
        *,
        max_num: int = DEFAULT_QUERY_MAX_NUM,
        begin: int = 0,
        end: int = MAX_TIMESTAMP,
        unique: bool = False,
    ) -> list[MessageExt]:
        """Messages of `topic` with business key `key` (or, `unique`, with UNIQ_KEY `key`),
        asked of every broker of the topic. The index matches by hash, so like Java the
        answers are filtered: a key must equal one of the message's KEYS exactly, a unique
        key its UNIQ_KEY. Unique-key results are sorted by store time."""
        route = await self.topic_route(topic)
        found: list[MessageExt] = []
        for bd in sorted(route.broker_datas, key=lambda b: b.broker_name):
            addr = bd.any_addr()
            if addr is not None:
                found += await self.query_message_on(
                    addr, topic, key, max_num=max_num, begin=begin, end=end, unique=unique
                )
        if unique:
            return sorted((m for m in found if m.properties.get(P.UNIQ_KEY) == key), key=lambda m: m.store_timestamp)
        return [m for m in found if key in (m.properties.get(P.KEYS) or "").split(P.KEY_SEPARATOR)]

    async def pull_messages(
        self, topic: str, *, max_messages: int = 100, group: str = TOOLS_CONSUMER_GROUP
    ) -> list[MessageExt]:
        """Up to `max_messages` messages of `topic` from the first offset of each readable
        queue, pulled without a consumer (no subscription registered, no offset committed)."""
        route = await self.topic_route(topic)
        out: list[MessageExt] = []
        for mq in route.subscribe_queues(topic):
            bd = route.broker(mq.broker_name)
            addr = bd.any_addr() if bd is not None else None
            if addr is None:
                continue
            offset = await self.api.get_min_offset(addr, mq, self.timeout)
            end = await self.api.get_max_offset(addr, mq, self.timeout)
            # every FOUND answer moves `offset` forward by at least one message
            for _ in range(max_messages + 2):
                want = max_messages - len(out)
                if offset >= end or want <= 0:
                    break
                header = H.PullMessageRequestHeader(
                    consumer_group=group,
                    topic=topic,
                    queue_id=mq.queue_id,
                    queue_offset=offset,
                    max_msg_nums=min(PULL_BATCH, want),
                    sys_flag=PULL_SUBSCRIPTION,
                    suspend_timeout_millis=0,
                    subscription="*",
                    expression_type="TAG",
                )
                result = await self.api.pull(addr, header, self.timeout)
                if result.next_begin_offset <= offset:
                    break
                if result.status == PullStatus.FOUND:
                    out += result.messages[:want]
                elif result.status != PullStatus.OFFSET_ILLEGAL:
                    break
                offset = result.next_begin_offset
        for msg in out:  # pull bookkeeping, not part of the message
            msg.properties.pop(P.MIN_OFFSET, None)
            msg.properties.pop(P.MAX_OFFSET, None)
        return out

    # -- ACL 1.0 --------------------------------------------------------------------------

    async def update_acl_config(self, addr: str, config: acl.PlainAccessConfig) -> None:
        """UPDATE_AND_CREATE_ACL_CONFIG: create the account, or change the fields given (None:
        kept; `admin` is always set) in the broker's plain_acl.yml."""
        await self._request(addr, RequestCode.UPDATE_AND_CREATE_ACL_CONFIG, config.to_header())

    async def delete_acl_config(self, addr: str, access_key: str) -> None:
        """DELETE_ACL_CONFIG: remove an account from the broker's plain_acl.yml."""
        await self._request(addr, RequestCode.DELETE_ACL_CONFIG, acl.DeleteAccessConfigRequestHeader(access_key))

    async def update_global_white_addrs(self, addr: str, addresses: Sequence[str], acl_file: str | None = None) -> None:
        """UPDATE_GLOBAL_WHITE_ADDRS_CONFIG: replace the broker's globalWhiteRemoteAddresses."""
        header = acl.UpdateGlobalWhiteAddrsConfigRequestHeader(",".join(addresses), acl_file)
        await self._request(addr, RequestCode.UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, header)

    async def acl_version_info(self, addr: str) -> AclVersionInfo:
        """GET_BROKER_CLUSTER_ACL_INFO: the broker's identity and its ACL file versions."""
        response = await self._request(addr, RequestCode.GET_BROKER_CLUSTER_ACL_INFO)
        try:
            h = acl.GetBrokerAclConfigResponseHeader.from_ext(response.ext_fields)
            version = DataVersion.from_json(B.loads(h.version.encode()) if h.version else {})
            files = B.loads(h.all_acl_file_version.encode()) if h.all_acl_file_version else {}
            versions = {str(k): DataVersion.from_json(v) for k, v in files.items()}
        except (ProtocolError, AttributeError) as exc:
            raise MQClientError(f"malformed ACL version info from {addr}: {exc}") from None
        return AclVersionInfo(
            h.cluster_name,
            h.broker_name,
            h.broker_addr,
            (version.counter, version.timestamp),
            {path: (v.counter, v.timestamp) for path, v in versions.items()},
        )

    async def acl_config(self, addr: str) -> acl.AclConfigBody:
        """GET_BROKER_CLUSTER_ACL_CONFIG: the broker's white list and accounts, secrets included."""
        response = await self._request(addr, RequestCode.GET_BROKER_CLUSTER_ACL_CONFIG)
        try:
            return acl.AclConfigBody.from_json(self._json(response, addr, "ACL config"))
        except ProtocolError as exc:
            raise MQClientError(f"malformed ACL config from {addr}: {exc}") from None

    # -- maintenance (mqadmin's broker, name server and client commands) ------------------

    async def broker_config(self, addr: str) -> dict[str, str]:
        """GET_BROKER_CONFIG: the broker's settings as conf keys and text values."""
        response = await self._request(addr, RequestCode.GET_BROKER_CONFIG)
        return javaprops.parse(response.body.decode("utf-8", "replace"))

    async def update_broker_config(self, addr: str, props: dict[str, str]) -> None:
        """UPDATE_BROKER_CONFIG: change settings of a running broker (not its conf file)."""
        body = "".join(f"{k}={v}\n" for k, v in props.items()).encode("utf-8")
        await self._request(addr, RequestCode.UPDATE_BROKER_CONFIG, body=body)

    async def namesrv_config(self) -> dict[str, dict[str, str]]:
        """GET_NAMESRV_CONFIG of every name server: address → settings."""
        out = {}
        for addr in self._namesrv_addrs():
            response = await self._request(addr, RequestCode.GET_NAMESRV_CONFIG)
            out[addr] = javaprops.parse(response.body.decode("utf-8", "replace"))
        return out

    async def update_namesrv_config(self, props: dict[str, str]) -> list[str]:
        """UPDATE_NAMESRV_CONFIG on every name server; returns their addresses."""
        body = "".join(f"{k}={v}\n" for k, v in props.items()).encode("utf-8")
        addrs = list(self._namesrv_addrs())
        for addr in addrs:
            await self._request(addr, RequestCode.UPDATE_NAMESRV_CONFIG, body=body)
        return addrs

    async def delete_kv_config(self, namespace: str, key: str) -> None:
        """DELETE_KV_CONFIG on every name server."""
        for addr in self._namesrv_addrs():
            await self._request(addr, RequestCode.DELETE_KV_CONFIG, H.KVConfigRequestHeader(namespace, key))

    async def change_write_perm(self, broker_name: str, *, add: bool) -> list[tuple[str, int]]:
        """WIPE_ or ADD_WRITE_PERM_OF_BROKER on every name server: (address, topics changed)."""
        code = RequestCode.ADD_WRITE_PERM_OF_BROKER if add else RequestCode.WIPE_WRITE_PERM_OF_BROKER
        field = "addTopicCount" if add else "wipeTopicCount"
        out = []
        for addr in self._namesrv_addrs():
            response = await self._request(addr, code, H.BrokerNameRequestHeader(broker_name))
            out.append((addr, int(response.ext_fields.get(field, "0") or 0)))
        return out

    async def producer_connection_on(self, addr: str, group: str) -> list[ClientConnection]:
        """GET_PRODUCER_CONNECTION_LIST on one broker."""
        response = await self._request(addr, RequestCode.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": group})
        return list(self._read(response, addr, "producer connections", ProducerConnection.from_json).connections)

    async def all_producer_info(self, addr: str) -> ProducerTableInfo:
        """GET_ALL_PRODUCER_INFO: every producer group the broker knows, with its connections."""
        response = await self._request(addr, RequestCode.GET_ALL_PRODUCER_INFO)
        return self._read(response, addr, "producer table", ProducerTableInfo.from_json)

    async def topic_configs(self, addr: str) -> TopicConfigSerializeWrapper:
        """GET_ALL_TOPIC_CONFIG: every topic of one broker, system topics included."""
        response = await self._request(addr, RequestCode.GET_ALL_TOPIC_CONFIG)
        return self._read(response, addr, "topic configs", TopicConfigSerializeWrapper.from_json)

    async def subscription_group_configs(self, addr: str) -> SubscriptionGroupWrapper:
        """GET_ALL_SUBSCRIPTIONGROUP_CONFIG read as SubscriptionGroupWrapper (its data version too)."""
        response = await self._request(addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        return self._read(response, addr, "subscription groups", SubscriptionGroupWrapper.from_json)

    async def system_topics_on(self, addr: str) -> list[str]:
        """GET_SYSTEM_TOPIC_LIST_FROM_BROKER: the topics the broker counts as the system's."""
        response = await self._request(addr, RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER)
        return list(self._read(response, addr, "system topics", TopicList.from_json).topics)

    async def _call_consumer(self, group: str, code: int, header: H.Header, addr: str | None = None) -> dict[Any, Any]:
        """A request the broker relays to one client of `group` (307, 309); the client's answer."""
        addrs = [addr] if addr else [a for _, a in await self.group_masters(group)]
        last: MQClientError | None = None
        for target in addrs:
            try:
                response = await self._request(target, code, header)
            except AdminResponseError as exc:
                last = exc
                continue
            return self._json(response, target, "client answer")
        raise last or MQClientError(f"no broker serves group {group!r}")

    async def consumer_running_info(
        self, group: str, client_id: str, *, jstack: bool = False, addr: str | None = None
    ) -> dict[Any, Any]:
        """GET_CONSUMER_RUNNING_INFO: the client's ConsumerRunningInfo, relayed by a broker
        (`addr`, else the first master serving the group that knows the client)."""
        header = H.GetConsumerRunningInfoRequestHeader(group, client_id, jstack)
        return await self._call_consumer(group, RequestCode.GET_CONSUMER_RUNNING_INFO, header, addr)

    async def consume_message_directly(
        self, group: str, client_id: str, offset_msg_id: str, topic: str | None = None
    ) -> dict[Any, Any]:
        """CONSUME_MESSAGE_DIRECTLY at the broker storing the message: the client runs its
        handler on it and answers a ConsumeMessageDirectlyResult."""
        try:
            ip, port, _ = parse_offset_msg_id(offset_msg_id.strip())
        except ProtocolError as exc:
            raise MQClientError(f"{offset_msg_id!r} is not an offset message id: {exc}") from None
        header = H.ConsumeMessageDirectlyRequestHeader(group, client_id, offset_msg_id.strip(), topic=topic)
        return await self._call_consumer(group, RequestCode.CONSUME_MESSAGE_DIRECTLY, header, _addr_of(ip, port))

    async def broker_consume_stats(self, addr: str, *, is_order: bool = False) -> dict[Any, Any]:
        """GET_BROKER_CONSUME_STATS: ConsumeStatsList of every group on one broker."""
        header = H.GetConsumeStatsInBrokerHeader(is_order)
        return self._json(await self._request(addr, RequestCode.GET_BROKER_CONSUME_STATS, header), addr, "stats")

    async def view_broker_stats_data(self, addr: str, name: str, key: str) -> dict[str, dict[str, float]]:
        """VIEW_BROKER_STATS_DATA: BrokerStatsData of one item (statsMinute, statsHour, statsDay,
        each with sum, tps and avgpt), e.g. TOPIC_PUT_NUMS of a topic."""
        header = H.ViewBrokerStatsDataRequestHeader(name, key)
        data = self._json(await self._request(addr, RequestCode.VIEW_BROKER_STATS_DATA, header), addr, "stats data")
        return {k: v for k, v in data.items() if isinstance(v, dict)}

    async def clone_group_offset(self, addr: str, src: str, dest: str, topic: str | None, offline: bool) -> None:
        header = H.CloneGroupOffsetRequestHeader(src, dest, topic, offline)
        await self._request(addr, RequestCode.CLONE_GROUP_OFFSET, header)

    async def query_consume_queue(
        self, addr: str, topic: str, queue_id: int, index: int, count: int, group: str | None = None
    ) -> dict[Any, Any]:
        """QUERY_CONSUME_QUEUE: raw entries (CommitLog offset, size, tags code) of a queue."""
        header = H.QueryConsumeQueueRequestHeader(topic, queue_id, index, count, group)
        return self._json(await self._request(addr, RequestCode.QUERY_CONSUME_QUEUE, header), addr, "queue data")

    async def broker_maintenance(self, addr: str, code: int) -> None:
        """CLEAN_EXPIRED_CONSUMEQUEUE, CLEAN_UNUSED_TOPIC or DELETE_EXPIRED_COMMITLOG."""
        await self._request(addr, code)

    async def subscription_groups(self, addr: str) -> dict[str, dict[str, Any]]:
        """GET_ALL_SUBSCRIPTIONGROUP_CONFIG: group name → its config JSON."""
        response = await self._request(addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        table = self._json(response, addr, "subscription groups").get("subscriptionGroupTable") or {}
        return {str(k): v for k, v in table.items() if isinstance(v, dict)}

    async def pull_queue(self, mq: MessageQueue, offset: int, count: int) -> list[MessageExt]:
        """Up to `count` messages of one queue from `offset`, pulled without a consumer."""
        route = await self.topic_route(mq.topic)
        bd = route.broker(mq.broker_name)
        addr = bd.any_addr() if bd is not None else None
        if addr is None:
            raise MQNoRouteError(mq.topic, [], f"broker {mq.broker_name} is not in the route")
        out: list[MessageExt] = []
        for _ in range(count + 2):
            if len(out) >= count:
                break
            header = H.PullMessageRequestHeader(
                consumer_group=TOOLS_CONSUMER_GROUP,
                topic=mq.topic,
                queue_id=mq.queue_id,
                queue_offset=offset,
                max_msg_nums=min(PULL_BATCH, count - len(out)),
                sys_flag=PULL_SUBSCRIPTION,
                suspend_timeout_millis=0,
                subscription="*",
                expression_type="TAG",
            )
            result = await self.api.pull(addr, header, self.timeout)
            if result.status != PullStatus.FOUND or result.next_begin_offset <= offset:
                break
            out += result.messages[: count - len(out)]
            offset = result.next_begin_offset
        for msg in out:
            msg.properties.pop(P.MIN_OFFSET, None)
            msg.properties.pop(P.MAX_OFFSET, None)
        return out

    # -- controller (RocketMQ 5) ----------------------------------------------------------

    async def controller_metadata(self, addr: str) -> H.GetMetaDataResponseHeader:
        """CONTROLLER_GET_METADATA_INFO of the member at `addr`: its group, the leader it knows, its peers."""
        response = await self._request(addr, RequestCode.CONTROLLER_GET_METADATA_INFO)
        try:
            return H.GetMetaDataResponseHeader.from_ext(response.ext_fields)
        except ProtocolError as exc:
            raise MQClientError(f"malformed controller metadata from {addr}: {exc}") from None

    async def controller_leader(self, addr: str) -> str:
        """The address of the controller group's leader, as the member at `addr` knows it."""
        meta = await self.controller_metadata(addr)
        if not meta.controller_leader_address:
            raise MQClientError(f"the controller at {addr} knows no leader now; try again")
        return meta.controller_leader_address

    async def sync_state_data(self, addr: str, broker_names: Sequence[str]) -> BrokerReplicasInfo:
        """CONTROLLER_GET_SYNC_STATE_DATA from the leader: each group's master, epochs and
        replicas in and out of its SyncStateSet (groups the controller does not know are left out)."""
        leader = await self.controller_leader(addr)
        body = B.dumps(list(broker_names))
        response = await self._request(leader, RequestCode.CONTROLLER_GET_SYNC_STATE_DATA, body=body)
        return self._read(response, leader, "sync state data", BrokerReplicasInfo.from_json)

    async def elect_master(
        self, addr: str, cluster: str, broker_name: str, broker_id: int
    ) -> tuple[H.ElectMasterResponseHeader, BrokerMemberGroup | None]:
        """CONTROLLER_ELECT_MASTER on the leader for `broker_id` (an admin's election: that
        broker is preferred when it may be elected); the new master and the group's members."""
        leader = await self.controller_leader(addr)
        header = H.ElectMasterRequestHeader(broker_name, cluster, broker_id, designate_elect=True)
        response = await self._request(leader, RequestCode.CONTROLLER_ELECT_MASTER, header)
        try:
            elected = H.ElectMasterResponseHeader.from_ext(response.ext_fields)
            body = B.loads(response.body) if response.body else {}
            group = body.get("brokerMemberGroup") if isinstance(body, dict) else None
            return elected, None if group is None else BrokerMemberGroup.from_json(group)
        except ProtocolError as exc:
            raise MQClientError(f"malformed election answer from {leader}: {exc}") from None

    async def clean_controller_broker_data(
        self, addr: str, cluster: str | None, broker_name: str, broker_ids: str | None, clean_living: bool
    ) -> None:
        """CLEAN_BROKER_DATA on the leader: forget `broker_ids` ("1;2") of a group, or the
        whole group; brokers still alive only with `clean_living`."""
        leader = await self.controller_leader(addr)
        header = H.CleanControllerBrokerDataRequestHeader(broker_name, cluster, broker_ids, clean_living)
        await self._request(leader, RequestCode.CLEAN_BROKER_DATA, header)

    async def controller_config(self, addrs: Sequence[str]) -> dict[str, dict[str, str]]:
        """GET_CONTROLLER_CONFIG of each member: address → settings."""
        out = {}
        for addr in addrs:
            response = await self._request(addr, RequestCode.GET_CONTROLLER_CONFIG)
            out[addr] = javaprops.parse(response.body.decode("utf-8", "replace"))
        return out

    async def update_controller_config(self, props: dict[str, str], addrs: Sequence[str]) -> None:
        """UPDATE_CONTROLLER_CONFIG on each member (each changes its own settings); every member
        is asked, and the last refusal is raised, as MQClientAPIImpl does."""
        body = "".join(f"{k}={v}\n" for k, v in props.items()).encode("utf-8")
        refused: AdminResponseError | None = None
        for addr in addrs:
            try:
                await self._request(addr, RequestCode.UPDATE_CONTROLLER_CONFIG, body=body)
            except AdminResponseError as exc:
                refused = exc
        if refused is not None:
            raise refused

    async def broker_epoch_cache(self, addr: str) -> EpochEntryCache:
        """GET_BROKER_EPOCH_CACHE of a broker in controller mode: its epochs and max offset."""
        response = await self._request(addr, RequestCode.GET_BROKER_EPOCH_CACHE)
        return self._read(response, addr, "epoch cache", EpochEntryCache.from_json)


@dataclass(frozen=True)
class AclVersionInfo:
    """A broker's ACL versions (ClusterAclVersionInfo); a version is (counter, ms of its last change)."""

    cluster_name: str
    broker_name: str
    broker_addr: str
    version: tuple[int, int]
    files: dict[str, tuple[int, int]]


Admin = MQAdmin
