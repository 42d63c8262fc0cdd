"""rmq's RocketMQ 4.x client on Trio: producer, transaction producer, push consumer, lite
pull consumer (rmq.client.aio and rmq.client.blocking offer them to asyncio and blocking code).

    from rmq.client import Message, open_producer

    async with open_producer("my_group", namesrv="127.0.0.1:9876") as producer:
        result = await producer.send(Message("TopicTest", b"Hello RocketMQ", tags="TagA"))
        print(result)

Every object is an `async with` object owning its tasks; leaving it commits offsets,
unregisters from the brokers and closes the connections. Errors are MQClientError
subclasses (errors.py); nothing from Trio or rmq.remoting leaks out.
"""

from rmq.remoting.tlsconfig import TlsClientSettings as TlsClientSettings

from .admin import MQAdmin as MQAdmin
from .config import ConsumeFromWhere as ConsumeFromWhere
from .config import ConsumerConfig as ConsumerConfig
from .config import ConsumerOptions as ConsumerOptions
from .config import MessageModel as MessageModel
from .config import ProducerConfig as ProducerConfig
from .config import ProducerOptions as ProducerOptions
from .consumer import ConsumeStatus as ConsumeStatus
from .consumer import PushConsumer as PushConsumer
from .consumer import open_push_consumer as open_push_consumer
from .errors import MQBrokerError as MQBrokerError
from .errors import MQClientError as MQClientError
from .errors import MQClientStateError as MQClientStateError
from .errors import MQConnectError as MQConnectError
from .errors import MQNoRouteError as MQNoRouteError
from .errors import MQTimeoutError as MQTimeoutError
from .instance import ClientInstance as ClientInstance
from .message import Message as Message
from .message import MessageExt as MessageExt
from .message import MessageQueue as MessageQueue
from .message import MQMessageError as MQMessageError
from .message import SendResult as SendResult
from .message import SendStatus as SendStatus
from .producer import Producer as Producer
from .producer import open_producer as open_producer
from .pull_consumer import PullConsumer as PullConsumer
from .pull_consumer import open_pull_consumer as open_pull_consumer
from .rebalance import AllocateByConfig as AllocateByConfig
from .rebalance import allocate_averagely as allocate_averagely
from .rebalance import allocate_averagely_by_circle as allocate_averagely_by_circle
from .selector import select_by_hash as select_by_hash
from .selector import select_by_random as select_by_random
from .transaction import TransactionProducer as TransactionProducer
from .transaction import TransactionSendResult as TransactionSendResult
from .transaction import TransactionState as TransactionState
from .transaction import open_transaction_producer as open_transaction_producer

__all__ = [
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
]
