"""Master/slave replication over RocketMQ 4.x's HA protocol (PROTOCOL.md 9).

`master.HAService` runs on ASYNC_MASTER and SYNC_MASTER brokers, `slave.HAClient` and
`sync.SlaveSynchronize` on SLAVE brokers; the broker's role cell (rmq.broker.parts) holds
whichever of the first two it runs as `ha`, for status.
The codec is sans-IO in rmq.protocol.ha; the store gives raw reads and raw appends.
"""
