"""The public face of each package: its `__all__`, pinned here.

Changing what a package exports is a deliberate edit of this file. Every package whose
`__init__.py` declares `__all__` must be listed, as must the client's facades (aio, blocking).
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

PUBLIC: dict[str, list[str]] = {
    "rmq.admin": ["AdminError"],
    "rmq.broker": ["BrokerConfig", "BrokerController", "BrokerRole", "ConfigError", "build_dispatcher"],
    "rmq.broker.acl": [
        "ADMIN_CODES",
        "AclConfigError",
        "AclDenied",
        "AclModel",
        "AclProcessor",
        "PlainAcl",
        "authenticate",
        "authorize",
        "check",
        "parse_acl",
    ],
    "rmq.broker.filter": ["SqlFilter", "SqlFilterError", "compile_sql92"],
    "rmq.broker.processors": [
        "AckProcessor",
        "AdminProcessor",
        "ClientManageProcessor",
        "EndTransactionProcessor",
        "NotificationProcessor",
        "PeekProcessor",
        "PollingInfoProcessor",
        "PopProcessor",
        "PullProcessor",
        "ReplyProcessor",
        "ResetOffsetProcessor",
        "SendProcessor",
        "build_dispatcher",
    ],
    "rmq.client": [
        "AllocateByConfig",
        "ClientInstance",
        "ConsumeFromWhere",
        "ConsumeStatus",
        "ConsumerConfig",
        "MQAdmin",
        "MQBrokerError",
        "MQClientError",
        "MQClientStateError",
        "MQConnectError",
        "MQMessageError",
        "MQNoRouteError",
        "MQTimeoutError",
        "Message",
        "MessageExt",
        "MessageModel",
        "MessageQueue",
        "Producer",
        "ProducerConfig",
        "PullConsumer",
        "PushConsumer",
        "SendResult",
        "SendStatus",
        "TlsClientSettings",
        "TransactionProducer",
        "TransactionSendResult",
        "TransactionState",
        "allocate_averagely",
        "allocate_averagely_by_circle",
        "open_producer",
        "open_pull_consumer",
        "open_push_consumer",
        "open_transaction_producer",
        "select_by_hash",
        "select_by_random",
    ],
    "rmq.client.aio": [
        "Producer",
        "PullConsumer",
        "PushConsumer",
        "TransactionProducer",
    ],
    "rmq.client.blocking": [
        "Producer",
        "PullConsumer",
        "PushConsumer",
        "QueueReader",
        "TransactionProducer",
    ],
    "rmq.controller": ["BrokerHeartbeatManager", "ControllerConfig", "ControllerServer", "ReplicasInfoManager"],
    "rmq.metrics": ["install", "install_broker", "install_namesrv", "install_proxy"],
    "rmq.namesrv": ["NamesrvConfig", "NamesrvServer", "RouteInfoManager"],
    "rmq.proxy": ["ProxyConfig", "ProxyServer"],
    "rmq.protocol": [
        "CURRENT_VERSION",
        "DEFAULT_MAX_FRAME_SIZE",
        "FrameDecoder",
        "FrameTooLarge",
        "HeaderError",
        "LanguageCode",
        "LocalProtocolError",
        "ProtocolError",
        "RPC_ONEWAY",
        "RPC_TYPE",
        "RemoteProtocolError",
        "RemotingCommand",
        "RequestCode",
        "ResponseCode",
        "SerializeType",
        "code_name",
        "encode_frame",
    ],
    "rmq.protocol.bodies": [
        "BrokerData",
        "BrokerMemberGroup",
        "BrokerReplicasInfo",
        "CheckClientRequestBody",
        "ClusterInfo",
        "Connection",
        "ConsumeStats",
        "ConsumeStatsList",
        "ConsumerConnection",
        "ConsumerData",
        "ConsumerOffsetSerializeWrapper",
        "DataVersion",
        "ElectMasterResponseBody",
        "EpochEntry",
        "EpochEntryCache",
        "GetConsumerListByGroupResponseBody",
        "GroupList",
        "HeartbeatData",
        "KVTable",
        "LockBatchRequestBody",
        "LockBatchResponseBody",
        "OffsetSerializeWrapper",
        "OffsetWrapper",
        "ProducerConnection",
        "ProducerData",
        "ProducerInfo",
        "ProducerTableInfo",
        "QueueData",
        "RegisterBrokerBody",
        "ReplicaIdentity",
        "ReplicasInfo",
        "ResetOffsetBody",
        "SubscriptionData",
        "SubscriptionGroupConfig",
        "SubscriptionGroupWrapper",
        "SyncStateSet",
        "TopicConfig",
        "TopicConfigSerializeWrapper",
        "TopicList",
        "TopicOffset",
        "TopicRouteData",
        "TopicStatsTable",
        "UnlockBatchRequestBody",
    ],
    "rmq.remoting": [
        "BUSY_OVERLOAD",
        "BUSY_REJECT",
        "ClientConfig",
        "CommandStream",
        "Connection",
        "ConnectionStatistics",
        "Dispatcher",
        "Later",
        "ProcessFunction",
        "RemotingClient",
        "RemotingConnectError",
        "RemotingError",
        "RemotingSendRequestError",
        "RemotingServer",
        "RemotingTimeoutError",
        "RemotingTooMuchRequestError",
        "RequestContext",
        "RequestProcessor",
        "Route",
        "Sent",
        "ServerConfig",
        "TlsMode",
    ],
    "rmq.store": [
        "ArrivalListener",
        "FileRecords",
        "FlushDiskType",
        "FlushPlan",
        "GetMessageResult",
        "GetMessageStatus",
        "IllegalBatch",
        "MessageDraft",
        "MessageStore",
        "PutMessageResult",
        "PutMessageStatus",
        "QueryMessageResult",
        "RetentionResult",
        "SCHEDULE_TOPIC",
        "StoreConfig",
        "StoreError",
        "StoreLockedError",
        "StoreStats",
        "batch_drafts",
        "disk_used_ratio",
        "iter_commitlog",
        "redraft",
        "wall_clock_ms",
    ],
}


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_all_is_pinned(name: str) -> None:
    module = importlib.import_module(name)
    assert sorted(module.__all__) == PUBLIC[name]
    assert len(set(module.__all__)) == len(module.__all__), "a name listed twice"


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_every_public_name_imports(name: str) -> None:
    module = importlib.import_module(name)
    missing = [attr for attr in module.__all__ if not hasattr(module, attr)]
    assert not missing, f"{name}.__all__ names what it does not have: {missing}"


def _packages_declaring_all() -> set[str]:
    """Packages (rmq, rmq_spark) whose __init__.py assigns __all__, found without importing them."""
    found = set()
    for init in [*(ROOT / "rmq").rglob("__init__.py"), *(ROOT / "spark").rglob("__init__.py")]:
        tree = ast.parse(init.read_text(encoding="utf-8"))
        assigns = [node for node in tree.body if isinstance(node, (ast.Assign, ast.AnnAssign))]
        targets = [t for node in assigns for t in (node.targets if isinstance(node, ast.Assign) else [node.target])]
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            parts = init.parent.relative_to(ROOT).parts
            found.add(".".join(("rmq_spark", *parts[1:]) if parts[0] == "spark" else parts))
    return found


def test_every_package_with_all_is_pinned() -> None:
    assert _packages_declaring_all() <= set(PUBLIC)
