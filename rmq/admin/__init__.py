"""Admin operations: what mqadmin's commands and the dashboard do with MQAdmin, as functions
that return data. Nothing here parses a command line or prints.

One module per command group: `topics`, `groups` (subscription groups, consumers and
producers), `brokers` (clusters, runtime figures, settings, maintenance), `offsets`,
`messages` (queries, dead letters, traces, sends), `tracks` (where a message stands with each
group, and sending it again), `probes` (send round trips), `consume` (pulling a topic's
messages as a tool), `monitoring` (MonitorService's rounds), `export` (metadata, settings and
figures as JSON), `acl` and `controller` (RocketMQ 5's controller: SyncStateSets, brokers' epochs).
`common` holds the error the operations raise themselves and which brokers a command
addresses. MQAdmin (rmq.client.admin) sends the requests.
"""

from .common import AdminError as AdminError

__all__ = ["AdminError"]
