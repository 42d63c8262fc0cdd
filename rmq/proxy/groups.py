"""The consumer groups' configs the proxy needs, read from the brokers and cached.

Java's proxy reads a group's SubscriptionGroupConfig from a broker (GET_SUBSCRIPTIONGROUP_CONFIG,
ClusterMetadataService's cache, refreshed `subscriptionGroupConfigCacheRefreshSeconds` after it
was read) for two things: whether the group consumes in order (`consumeMessageOrderly`: fifo
in its clients' settings and orderly POP on receive) and how often a message is delivered
(`retryMaxTimes` + 1 attempts: the clients' backoff policy, and the receive's dead-letter
forward of a message popped that often). A broker that does not know the group (and does not
create groups) has no config: the defaults then, as in Java.
"""

from __future__ import annotations

import logging

import trio

from rmq.client.errors import MQBrokerError, MQClientError
from rmq.client.instance import ClientInstance
from rmq.protocol import RemotingCommand, RequestCode, ResponseCode, body
from rmq.protocol.bodies.configs import SubscriptionGroupConfig
from rmq.protocol.errors import ProtocolError
from rmq.protocol.headers import GetSubscriptionGroupConfigRequestHeader

log = logging.getLogger("rmq.proxy")


class GroupConfigs:
    def __init__(self, instance: ClientInstance, refresh_seconds: float) -> None:
        self.instance = instance
        self.refresh_seconds = refresh_seconds
        self._cache: dict[str, tuple[float, SubscriptionGroupConfig | None]] = {}  # group → (read at, config)

    async def get(self, group: str, addr: str) -> SubscriptionGroupConfig | None:
        """The group's config, from the cache while it is fresh, else from the broker at `addr`;
        None when the broker has none. A broker that cannot answer (a 4.x broker has no
        GET_SUBSCRIPTIONGROUP_CONFIG) leaves the cached config, or none, in use until the
        next refresh."""
        cached = self._cache.get(group)
        now = trio.current_time()
        if cached is not None and now - cached[0] < self.refresh_seconds:
            return cached[1]
        try:
            config = await self._read(group, addr)
        except (MQClientError, ProtocolError) as exc:
            log.warning("cannot read the config of consumer group %s from %s: %s", group, addr, exc)
            config = cached[1] if cached is not None else None
        self._cache[group] = (now, config)
        return config

    async def _read(self, group: str, addr: str) -> SubscriptionGroupConfig | None:
        header = GetSubscriptionGroupConfigRequestHeader(group)
        request = RemotingCommand.request(RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG, header.to_ext())
        response = await self.instance.api.invoke(addr, request)
        if response.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST:
            return None
        if response.code != ResponseCode.SUCCESS:
            raise MQBrokerError(response.code, response.remark, address=addr)
        return SubscriptionGroupConfig.from_json(body.loads(response.body or b""))
