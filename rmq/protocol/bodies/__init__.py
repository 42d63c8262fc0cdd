"""The JSON bodies rmq exchanges, one frozen value class each, by family:

- routes: TopicRouteData (QueueData, BrokerData), ClusterInfo
- configs: TopicConfig, SubscriptionGroupConfig, their tables TopicConfigSerializeWrapper and
  SubscriptionGroupWrapper, and DataVersion
- register: RegisterBrokerBody, in its JSON, compressed and pre-3.0.11 forms
- heartbeat: HeartbeatData with ConsumerData, ProducerData and SubscriptionData
- clients: ConsumerConnection, ProducerConnection (with Connection), ProducerTableInfo (ProducerInfo),
  GetConsumerListByGroupResponseBody, the lock bodies LockBatchRequestBody,
  UnlockBatchRequestBody and LockBatchResponseBody, CheckClientRequestBody
- stats: TopicStatsTable (TopicOffset), ConsumeStats (OffsetWrapper), ConsumeStatsList
- offsets: ConsumerOffsetSerializeWrapper, OffsetSerializeWrapper, ResetOffsetBody
- lists: TopicList, GroupList, KVTable
- controller: SyncStateSet, ElectMasterResponseBody (BrokerMemberGroup), BrokerReplicasInfo
  (ReplicasInfo, ReplicaIdentity), RocketMQ 5.x's controller's; EpochEntryCache (EpochEntry),
  a controller-mode broker's epochs

Each class has `from_json(obj)`, reading the object `rmq.protocol.body.loads` parsed in any
dialect peers write (Java's fastjson, Go's and C++'s clients: quoted or unquoted keys,
numbers as strings, fields left out), and `to_json()`, giving what Java writes: fastjson's
field order (alphabetical), nulls left out, for `rmq.protocol.body.dumps`. A malformed body
raises BodyError (rmq.protocol.errors).
"""

from .clients import CheckClientRequestBody as CheckClientRequestBody
from .clients import Connection as Connection
from .clients import ConsumerConnection as ConsumerConnection
from .clients import GetConsumerListByGroupResponseBody as GetConsumerListByGroupResponseBody
from .clients import LockBatchRequestBody as LockBatchRequestBody
from .clients import LockBatchResponseBody as LockBatchResponseBody
from .clients import ProducerConnection as ProducerConnection
from .clients import ProducerInfo as ProducerInfo
from .clients import ProducerTableInfo as ProducerTableInfo
from .clients import UnlockBatchRequestBody as UnlockBatchRequestBody
from .configs import DataVersion as DataVersion
from .configs import SubscriptionGroupConfig as SubscriptionGroupConfig
from .configs import SubscriptionGroupWrapper as SubscriptionGroupWrapper
from .configs import TopicConfig as TopicConfig
from .configs import TopicConfigSerializeWrapper as TopicConfigSerializeWrapper
from .controller import BrokerMemberGroup as BrokerMemberGroup
from .controller import BrokerReplicasInfo as BrokerReplicasInfo
from .controller import ElectMasterResponseBody as ElectMasterResponseBody
from .controller import EpochEntry as EpochEntry
from .controller import EpochEntryCache as EpochEntryCache
from .controller import ReplicaIdentity as ReplicaIdentity
from .controller import ReplicasInfo as ReplicasInfo
from .controller import SyncStateSet as SyncStateSet
from .heartbeat import ConsumerData as ConsumerData
from .heartbeat import HeartbeatData as HeartbeatData
from .heartbeat import ProducerData as ProducerData
from .heartbeat import SubscriptionData as SubscriptionData
from .lists import GroupList as GroupList
from .lists import KVTable as KVTable
from .lists import TopicList as TopicList
from .offsets import ConsumerOffsetSerializeWrapper as ConsumerOffsetSerializeWrapper
from .offsets import OffsetSerializeWrapper as OffsetSerializeWrapper
from .offsets import ResetOffsetBody as ResetOffsetBody
from .register import RegisterBrokerBody as RegisterBrokerBody
from .routes import BrokerData as BrokerData
from .routes import ClusterInfo as ClusterInfo
from .routes import QueueData as QueueData
from .routes import TopicRouteData as TopicRouteData
from .stats import ConsumeStats as ConsumeStats
from .stats import ConsumeStatsList as ConsumeStatsList
from .stats import OffsetWrapper as OffsetWrapper
from .stats import TopicOffset as TopicOffset
from .stats import TopicStatsTable as TopicStatsTable

__all__ = [
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
]
