"""`python -m rmq.tools.configdoc > docs/configuration.md`: the configuration reference.

Keys and defaults come from the config classes themselves (BrokerConfig, NamesrvConfig,
ProducerConfig, ConsumerConfig); only the meanings are written here. tests/tools/
test_configdoc.py fails when a setting has no meaning or docs/configuration.md is stale.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any

BROKER = {
    "brokerClusterName": "Cluster the broker belongs to (clusterList groups by it).",
    "brokerName": "Name of the broker group; a master and its slaves share it. Default: the host name.",
    "brokerId": "0 for a master, > 0 for a slave of the group.",
    "brokerRole": "ASYNC_MASTER, SYNC_MASTER (answers SEND_OK once a slave has the message) or SLAVE.",
    "namesrvAddr": "Name servers, `ip:port;ip:port`; falls back to $NAMESRV_ADDR.",
    "brokerIP1": "Address registered with the name servers and stamped into messages. Default: the outgoing interface.",
    "brokerIP2": "Address registered as the HA address (haServerAddr). Default: brokerIP1.",
    "brokerPermission": "Permission mask of the whole broker: 6 read+write, 4 read only, 2 write only.",
    "registerNameServerPeriod": "Milliseconds between registrations (clamped to 10-60 s).",
    "regionId": "Region stamped into send answers (MSG_REGION).",
    "traceOn": "TRACE_ON in send answers.",
    "listenPort": "Main port. The VIP port is listenPort - 2; 0 picks a free port (tests).",
    "bindAddress": "Address to listen on.",
    "haListenPort": "Port a master accepts its slaves on; 0 = listenPort + 1.",
    "vipChannelEnable": "Also serve the VIP port (listenPort - 2) that Java clients before 4.5.1 send to.",
    "serverChannelMaxIdleTimeSeconds": "Connections idle this long are closed.",
    "serverMaxConnections": "rmq's own: connections the main port (and the VIP port, each) holds at once; one more "
    "is closed at once, logged and counted (docs/operations.md, Connection limits). A client that sends and never "
    "reads holds up to about 5 MB. 0: no limit.",
    "serverMaxConnectionsPerAddress": "rmq's own: connections one client IP address may hold on a port; 0: no limit.",
    "busyPollMicros": "rmq's own: microseconds the event loop polls for I/O before it sleeps, while its sleeps "
    "are short (back-to-back requests), e.g. 300. It about halves the round trip at one request in flight, "
    "for CPU; a little above the gap between messages at a steady rate (1000 at 1,000 msg/s) keeps the broker "
    "awake for the next send, for up to a core spinning (docs/clients.md); it stops for a while when a yield "
    "between polls let another process run (cores shared with busy clients; docs/clients.md). 0: off.",
    "haMasterAddress": "A slave's master HA address; empty = learn it from the name servers.",
    "enableControllerMode": "The controller group elects this broker group's master (RocketMQ 5's controller "
    "mode, docs/controller.md); brokerRole and brokerId are then ignored: a broker is a slave until the "
    "controller names its role.",
    "controllerAddr": "Controller members, `host:port;host:port` (required with enableControllerMode).",
    "syncBrokerMetadataPeriod": "Milliseconds between asks of the controller for the group's master and SyncStateSet.",
    "checkSyncStateSetPeriod": "Milliseconds between a master's checks of its SyncStateSet (laggards leave).",
    "syncControllerMetadataPeriod": "Milliseconds between looks for the controller leader.",
    "brokerHeartbeatInterval": "Milliseconds between heartbeats to every controller member.",
    "sendHeartbeatTimeoutMillis": "Milliseconds a heartbeat to a controller member may take.",
    "controllerHeartBeatTimeoutMills": "Milliseconds without a heartbeat after which the controller deems this "
    "broker dead (and elects another master if it was the master).",
    "brokerElectionPriority": "The lower, the likelier the controller elects this broker among equals.",
    "haMaxTimeSlaveNotCatchup": "Milliseconds a slave may go without catching up before it leaves the SyncStateSet.",
    "allAckInSyncStateSet": "A send is answered SEND_OK only once every replica of the SyncStateSet holds it "
    "(controller mode; with it no acknowledged message is lost when the controller elects a new master).",
    "inSyncReplicas": "Without allAckInSyncStateSet: replicas (the master included) a send waits for.",
    "minInSyncReplicas": "Sends are refused while the SyncStateSet has fewer replicas than this.",
    "enableAutoInSyncReplicas": "Wait for at most as many replicas as the SyncStateSet holds.",
    "storePathEpochFile": "The epoch file (each master epoch's first CommitLog offset). Default: "
    "<storePathRootDir>/epochFileCheckpoint.",
    "storePathBrokerIdentity": "The broker's controller-assigned id (`cluster#name#id`). Default: "
    "<storePathRootDir>/brokerIdentity.",
    "readUnCommitted": "Controller mode: consumers may see records not every in-sync replica holds yet "
    "(a failover may take them back).",
    "haSendHeartbeatInterval": "Milliseconds between a slave's offset reports (and a master's heartbeats) when idle.",
    "haHousekeepingInterval": "Milliseconds of silence after which an HA connection is closed.",
    "haTransferBatchSize": "Most CommitLog bytes a master sends in one chunk.",
    "haSlaveFallbehindMax": "Bytes a slave may lag before a SYNC_MASTER answers SLAVE_NOT_AVAILABLE (11) at once.",
    "accessMessageInMemoryMaxRatio": "Percent of RAM behind the log end counted as in memory (slave reads).",
    "enableDLegerCommitLog": "CommitLog replicated by a DLedger group (Raft); its elected leader is the master.",
    "dLegerGroup": "Name of the DLedger group; empty = brokerName.",
    "dLegerPeers": "Members of the group and their DLedger ports, `n0-host:port;n1-host:port;n2-host:port`.",
    "dLegerSelfId": "This member's id in dLegerPeers; a follower registers as brokerId = its number + 1.",
    "preferredLeaderId": "Member the leader hands leadership to once it holds the whole log; empty = none.",
    "dLegerElectionTimeoutMs": "Milliseconds without a leader before a member stands for election (randomized to 2x).",
    "dLegerHeartbeatIntervalMs": "Milliseconds between the leader's heartbeats; an unanswered push is resent after it.",
    "dLegerLazyPushMs": "rmq's own: milliseconds between pushes to the followers a commit does not wait for "
    "(the others get each entry at once); 0 = every follower gets each entry at once. 0..10000.",
    "storePathRootDir": "Store directory (CommitLog, consume queues, index, config).",
    "storePathCommitLog": "CommitLog directory. Default: <storePathRootDir>/commitlog.",
    "mappedFileSizeCommitLog": "Size of each CommitLog file in bytes.",
    "mappedFileSizeConsumeQueue": "Size of each consume queue file (a multiple of 20).",
    "flushDiskType": "ASYNC_FLUSH (sync in the background) or SYNC_FLUSH (answer after the fsync).",
    "syncFlushTimeout": "Milliseconds a SYNC_FLUSH or SYNC_MASTER send waits (then FLUSH_DISK/SLAVE_TIMEOUT).",
    "deleteWhen": "Hours of the day (`04` or `04;16`) when expired CommitLog files are deleted.",
    "fileReservedTime": "Hours a CommitLog file is kept after it was last written.",
    "diskMaxUsedSpaceRatio": "Disk use (percent) above which expired CommitLog files are deleted at once, not only "
    "at deleteWhen (docs/operations.md, Disk space).",
    "diskSpaceCleanForciblyRatio": "Disk use (percent, 30-85) above which CommitLog files that have not expired are "
    "deleted too, oldest first, consumed or not (with cleanFileForciblyEnable).",
    "diskSpaceWarningLevelRatio": "Disk use (percent, 35-90) above which sends are refused with SERVICE_NOT_AVAILABLE "
    "(14) until it is below again; pulls and queries are still served.",
    "cleanFileForciblyEnable": "Delete CommitLog files that have not expired above diskSpaceCleanForciblyRatio; "
    "false keeps every message until it expires and the broker refuses sends at diskSpaceWarningLevelRatio instead.",
    "warmMapedFileEnable": "Allocate the blocks of each CommitLog and consume queue file when it is made (a full "
    "disk fails there, not within the file; CommitLog syncs on ext4 get slower). Index files always are.",
    "loneSyncInline": "SYNC_FLUSH: the sync of a send in flight alone (nothing else for the broker to do "
    "since the last sync) runs on the event loop instead of in a kernel worker or a thread, answering it about "
    "0.1 ms sooner; sends that come together still share syncs off the loop. While such a sync runs the loop "
    "waits with it, so a stalling disk stalls the broker for that long; they stop for a second whenever they "
    "average over 2 ms. false: every sync leaves the loop.",
    "maxMessageSize": "Largest message body accepted, in bytes.",
    "messageDelayLevel": "The delay levels, `1s 5s 10s ...`.",
    "maxMsgsNumBatch": "Most messages one query returns.",
    "defaultQueryMaxNum": "Messages a query by unique key returns.",
    "maxTransferBytesOnMessageInMemory": "Most bytes one pull returns from memory.",
    "maxTransferCountOnMessageInMemory": "Most messages one pull returns from memory.",
    "flushIntervalCommitLog": "Milliseconds between CommitLog syncs with ASYNC_FLUSH.",
    "flushIntervalConsumeQueue": "Milliseconds between consume queue flush rounds (entries into their files, syncs).",
    "flushConsumeQueueLeastPages": "A consume queue is synced once this many 4 KiB pages are unsynced.",
    "flushConsumeQueueThoroughInterval": "Milliseconds between rounds that sync every consume queue.",
    "flushIntervalIndex": (
        "rmq's own: milliseconds between index syncs; after a crash the index is rebuilt from the "
        "last one. RocketMQ syncs an index file only when it is full."
    ),
    "cleanResourceInterval": "Milliseconds between checks of disk use and expired files.",
    "checkCRCOnRecover": "Check each record's CRC when recovery validates the CommitLog.",
    "messageIndexEnable": "Build the index (queryMsgByKey, queryMsgByUniqueKey); off saves its CPU and disk writes.",
    "maxHashSlotNum": "Hash slots per index file.",
    "maxIndexNum": "Entries per index file; then a new one is started.",
    "autoCreateTopicEnable": "Create unknown topics on first send (from TBW102).",
    "autoCreateSubscriptionGroup": "Create unknown consumer groups on first use.",
    "defaultTopicQueueNums": "Queues of the TBW102 template topic.",
    "clusterTopicEnable": "Register a topic named after the cluster.",
    "brokerTopicEnable": "Register a topic named after the broker.",
    "traceTopicEnable": "Create the message trace topic (msgTraceTopicName, 1 queue) at start.",
    "msgTraceTopicName": "The trace topic created by traceTopicEnable.",
    "rejectTransactionMessage": "Refuse transactional messages.",
    "storeReplyMessageEnable": (
        "Store request-reply replies in `<cluster>_REPLY_TOPIC` as well as pushing them to their requester."
    ),
    "longPollingEnable": "Hold pulls until a message arrives (else retry after shortPollingTimeMills).",
    "shortPollingTimeMills": "Milliseconds a pull is held without long polling.",
    "enablePropertyFilter": "Allow SQL92 property filters.",
    "slaveReadEnable": "Send consumers that lag beyond memory to a slave (the group's whichBrokerWhenConsumeSlowly).",
    "notifyConsumerIdsChangedEnable": "Tell consumers to rebalance when their group changes.",
    "reviveQueueNum": "Queues of the POP revive topic rmq_sys_REVIVE_LOG_<cluster>, a revive task each (docs/pop.md).",
    "reviveInterval": "Milliseconds a POP revive task rests when nothing is due.",
    "popFromRetryProbability": "Percent of pops that read the group's POP retry topic before the topic.",
    "maxPopPollingSize": "Pops waiting for messages at once; more are answered POLLING_FULL.",
    "transactionTimeOut": "Milliseconds before a half message is first checked back.",
    "transactionCheckInterval": "Milliseconds between transaction check-back rounds.",
    "transactionCheckMax": "Check-backs before a half message is given up (TRANS_CHECK_MAX_TIME_TOPIC).",
    "timerWheelEnable": "Serve timer messages (TIMER_DELIVER_MS, TIMER_DELAY_SEC/MS, __STARTDELIVERTIME).",
    "timerMaxDelaySec": "Longest timer delay accepted, in seconds.",
    "tls.server.mode": "TLS on the main, VIP and HA ports: disabled, permissive (plain and TLS), enforcing (TLS only).",
    "tls.server.certPath": "PEM certificate chain for TLS (docs/security.md).",
    "tls.server.keyPath": "PEM private key for TLS.",
    "tls.server.keyPassword": "Password of an encrypted tls.server.keyPath (shown as ******).",
    "tls.server.need.client.auth": "Ask clients for a certificate: none, optional (verified if sent) or require.",
    "tls.server.trustCertPath": "PEM CA file (or directory) client certificates must chain to; empty: system CAs.",
    "tls.enable": "This broker's own connections (name servers, a slave's master and HA port) use TLS.",
    "tls.client.certPath": "PEM certificate the broker presents when a server asks for one (mutual TLS).",
    "tls.client.keyPath": "PEM private key of tls.client.certPath.",
    "tls.client.keyPassword": "Password of an encrypted tls.client.keyPath (shown as ******).",
    "tls.client.trustCertPath": "PEM CA file (or directory) servers must chain to; empty: the system's CAs.",
    "tls.client.authServer": "Verify the certificate and address of the servers this broker connects to.",
    "tls.config.file": "A tls.properties file the tls.* keys are also read from; keys set here win.",
    "aclEnable": "Check every request against plain_acl.yml (ACL 1.0, docs/security.md).",
    "rocketmqHome": "RocketMQ home; the ACL file is <rocketmqHome>/conf/plain_acl.yml. Default: $ROCKETMQ_HOME.",
    "aclPlainFile": "The ACL file instead of <rocketmqHome>/conf/plain_acl.yml; a relative path is under rocketmqHome.",
    "aclRequireSignedRequestCode": "rmq's own: refuse a signed request unless its signature covers its request code "
    "(the RequestCode field rmq's clients sign), so a captured request cannot be replayed under another code. "
    "RocketMQ's own clients do not sign it: leave off while they connect (docs/security.md).",
    "metricsExporterType": "PROM serves Prometheus metrics (docs/operations.md, Metrics); DISABLE does not.",
    "metricsPromExporterHost": "Address of the metrics endpoint. Default: brokerIP1.",
    "metricsPromExporterPort": "Port of the metrics endpoint (GET /metrics); 0 picks a free port.",
}

# Where the broker does not do what RocketMQ 4.9.8 / 5.x's mqbroker does with the same key.
# Keys RocketMQ has no setter for are listed as rmq's own without a note here.
BROKER_DIFFERS = {
    "brokerId": "A DLedger member: RocketMQ sets -1 and registers with its follower id (n<k>: k + 1) once the "
    "group's election has told it its role; rmq starts as that follower at once, so `-p` shows that id.",
    "brokerRole": "A DLedger member: `-p` shows SLAVE, the role it starts in; RocketMQ's shows the file's value "
    "(both ignore it and let the election decide).",
    "brokerName": "Refused unless letters, digits, `-`, `_` and `.`; RocketMQ takes any text.",
    "namesrvAddr": "RocketMQ can also fetch it from an address server (fetchNamesrvAddrByAddressServer, "
    "rmqAddressServerDomain); rmq accepts those keys and does not.",
    "haListenPort": "RocketMQ 4.9.8 ignores it (always listenPort + 1); 5.x and rmq honour it.",
    "aclEnable": "ACL 1.0 (plain_acl.yml) only: RocketMQ 5's ACL 2.0 keys (authenticationEnabled, "
    "authorizationEnabled, ...) are accepted and ignored.",
    "aclPlainFile": "RocketMQ reads the `rocketmq.acl.plain.file` system property instead.",
    "rocketmqHome": "RocketMQ refuses to start without it; rmq needs it only for the ACL file.",
    "metricsExporterType": "OTLP_GRPC and LOG start the broker with a WARNING and export nothing.",
    "tls.*": "RocketMQ reads these as `-D` system properties or from tls.config.file, not from broker.conf.",
}

NAMESRV_DIFFERS = {
    "tls.*": "RocketMQ reads these as `-D` system properties or from tls.config.file, not from the -c file.",
}

NAMESRV = {
    "bindAddress": "Address to listen on.",
    "listenPort": "Port (9876); 0 picks a free one.",
    "kvConfigPath": "KV config file (ORDER_TOPIC_CONFIG and other namespaces); empty keeps it in memory.",
    "scanNotActiveBrokerInterval": "Milliseconds between scans for brokers that stopped registering.",
    "brokerChannelExpiredTime": "Milliseconds without a registration after which a broker is dropped.",
    "orderMessageEnable": "Return ORDER_TOPIC_CONFIG with routes.",
    "serverChannelMaxIdleTimeSeconds": "Connections idle this long are closed.",
    "serverMaxConnections": "rmq's own: connections held at once; one more is closed at once, logged and counted "
    "(docs/operations.md, Connection limits). 0: no limit.",
    "serverMaxConnectionsPerAddress": "rmq's own: connections one client IP address may hold; 0: no limit.",
    "tls.server.mode": "disabled, permissive (plain text and TLS) or enforcing (TLS only).",
    "tls.server.certPath": "PEM certificate for TLS.",
    "tls.server.keyPath": "PEM private key for TLS.",
    "tls.server.keyPassword": "Password of an encrypted tls.server.keyPath (shown as ******).",
    "tls.server.need.client.auth": "Ask clients for a certificate: none, optional (verified if sent) or require.",
    "tls.server.trustCertPath": "PEM CA file (or directory) client certificates must chain to; empty: system CAs.",
    "tls.config.file": "A tls.properties file the tls.server.* keys are also read from; keys set here win.",
    "websocketPort": "Also serve RemotingCommands over WebSocket on this port.",
    "metricsExporterType": "PROM serves Prometheus metrics (docs/operations.md, Metrics); DISABLE does not.",
    "metricsPromExporterHost": "Address of the metrics endpoint. Default: bindAddress.",
    "metricsPromExporterPort": "Port of the metrics endpoint (GET /metrics); 0 picks a free port.",
    "enableControllerInNamesrv": "Also run a controller member in this process, its settings (controllerDLeger* "
    "and the rest) from the same file (docs/controller.md).",
}

CLIENT = {
    "namesrv": "Name servers, `a:9876;b:9876` or a list; None reads $NAMESRV_ADDR.",
    "instance_name": "Part of the client id; default: pid and start time, unique per client.",
    "client_ip": "Address in the client id; default: the outgoing interface.",
    "unit_name": "Unit name appended to the client id.",
    "request_timeout": "Seconds for name server and admin calls.",
    "poll_name_server_interval": "Seconds between route refreshes (a failing topic refreshes sooner).",
    "heartbeat_broker_interval": "Seconds between heartbeats to every broker.",
    "tls": "TLS to name servers and brokers: True (verified against the system's CAs), an ssl.SSLContext, "
    "or TlsClientSettings (RocketMQ's tls.client.* keys, docs/security.md).",
    "send_timeout": "Seconds a send waits for its answer.",
    "retry_times": "Extra attempts, on another broker, after a failed send.",
    "retry_another_broker_when_not_store_ok": "Also retry sends answered with a flush or slave error.",
    "compress_over": "Bodies of at least this many bytes are compressed.",
    "compress_type": "zlib (what every 4.x client reads), lz4 or zstd (RocketMQ 5.x clients).",
    "max_message_size": "Largest body sent, in bytes.",
    "default_topic_queue_nums": "Queues a topic gets when the broker creates it on first send.",
    "create_topic_key": "Template topic for creating topics on first send.",
    "send_latency_fault_enable": "Avoid brokers that answered slowly or failed, for a while.",
    "max_async_in_flight": "send_async calls running at once; more wait.",
    "auto_batch": "Coalesce concurrent sends of a topic into batch requests (RocketMQ 5.x's autoBatch); "
    "a lone send is a plain one, each send gets its own SendResult, and a failed batch's messages are "
    "sent again one by one with their own retries. False: one request per message.",
    "batch_max_bytes": "Largest body of an automatic batch, in bytes (batchMaxBytes).",
    "batch_in_flight": "Automatic batches of one topic in flight at once while not full (a full one always leaves).",
    "message_model": "CLUSTERING (the group shares the queues) or BROADCASTING (each consumer gets all).",
    "consume_from_where": "Where a new group starts: LAST_OFFSET, FIRST_OFFSET or TIMESTAMP.",
    "consume_timestamp": "Milliseconds since the epoch for TIMESTAMP; None: half an hour ago.",
    "pull_batch_size": "Messages asked for per pull.",
    "pull_threshold_for_queue": "Messages held per queue before pulling pauses.",
    "pull_threshold_size_for_queue": "Bytes held per queue before pulling pauses.",
    "consume_concurrently_max_span": "Largest offset span held per queue before pulling pauses.",
    "consume_concurrency": "Handler calls running at once.",
    "max_reconsume_times": "Redeliveries before a message goes to the DLQ; -1: 16 (orderly: unlimited).",
    "suspend_current_queue_time": "Orderly: seconds a queue pauses after a failure.",
    "rebalance_interval": "Seconds between rebalances (also on NOTIFY_CONSUMER_IDS_CHANGED).",
    "persist_consumer_offset_interval": "Seconds between offset commits to the broker.",
    "broker_suspend_max_time": "Seconds the broker may hold a pull.",
    "consumer_timeout_when_suspend": "Seconds the consumer waits for a held pull.",
    "pull_error_delay": "Seconds before a failed pull is retried.",
    "flow_control_delay": "Seconds before pulling again when a queue holds too much.",
    "lock_interval": "Orderly: seconds between queue lock renewals.",
    "offset_store_dir": "Broadcasting: directory of local offsets; None: ~/.rocketmq_offsets.",
    "access_key": "ACL AccessKey: requests are signed with secret_key when both are set.",
    "busy_poll_micros": "Microseconds this process's Trio loops poll for I/O before sleeping: lower latency at "
    "one request in flight for some CPU (rmq.remoting.busypoll); process-wide once set; 0 leaves it alone.",
    "secret_key": "ACL SecretKey, used to sign requests (never sent).",
}


def _broker_rows() -> list[tuple[str, str, str]]:
    from rmq.broker.config import _SPECS, BrokerConfig

    defaults = BrokerConfig(broker_name="<host name>", broker_ip1="<outgoing address>")
    rows = []
    for key, spec in _SPECS.items():
        value = spec.format(getattr(defaults, spec.attr))
        if spec.attr == "store_path_root_dir":
            value = "~/store"
        rows.append((key, value, BROKER.get(key, "")))
    return rows


def _differences(keys: list[str], theirs: frozenset[str], notes: dict[str, str]) -> str:
    """One row per key whose behaviour differs from RocketMQ's; `tls.*` keys share one row."""
    lines = ["| key | how it differs from RocketMQ |", "|---|---|"]
    seen = set()
    for key in keys:
        name = "tls.*" if key.startswith("tls.") else key
        if name in seen:
            continue
        seen.add(name)
        note = notes.get(name) or ("" if key in theirs else "rmq's own: RocketMQ has no such key.")
        if note:
            lines.append(f"| `{name}` | {note} |")
    return "\n".join(lines)


def _namesrv_rows() -> list[tuple[str, str, str]]:
    from rmq.namesrv.config import _KEYS, NamesrvConfig

    defaults = NamesrvConfig()
    return [(key, fmt(getattr(defaults, attr)), NAMESRV.get(key, "")) for key, (attr, _, fmt, _) in _KEYS.items()]


def _client_rows(cls: Any, skip: set[str]) -> list[tuple[str, str, str]]:
    rows = []
    for f in dataclasses.fields(cls):
        if f.name in skip:
            continue
        default = f.default_factory() if callable(f.default_factory) else f.default
        text = getattr(default, "name", None) or repr(default)
        rows.append((f.name, text, CLIENT.get(f.name, "")))
    return rows


def missing() -> list[str]:
    """Settings the reference has no meaning for (the test keeps this empty)."""
    from rmq.client.config import ConsumerConfig, ProducerConfig

    out = [f"broker {k}" for k, _, d in _broker_rows() if not d]
    out += [f"namesrv {k}" for k, _, d in _namesrv_rows() if not d]
    # a difference noted for a key the server does not have is stale
    differs = (("broker", _broker_rows(), BROKER_DIFFERS), ("namesrv", _namesrv_rows(), NAMESRV_DIFFERS))
    for what, rows, notes in differs:
        keys = {k for k, _, _ in rows} | {"tls.*"}
        out += [f"{what} difference noted for {k}, which it does not have" for k in notes if k not in keys]
    for cls in (ProducerConfig, ConsumerConfig):
        out += [f"{cls.__name__} {k}" for k, _, d in _client_rows(cls, set()) if not d]
    return out


def _table(rows: list[tuple[str, str, str]], key: str) -> str:
    lines = [f"| {key} | default | meaning |", "|---|---|---|"]
    for name, default, meaning in rows:
        shown = default.replace("|", "\\|") if default else "(empty)"
        lines.append(f"| `{name}` | `{shown}` | {meaning} |")
    return "\n".join(lines)


def render() -> str:
    from rmq import rocketmq_keys
    from rmq.client.config import ClientConfig, ConsumerConfig, ProducerConfig

    common = {f.name for f in dataclasses.fields(ClientConfig)}
    broker, namesrv = _broker_rows(), _namesrv_rows()
    return "\n".join(
        [
            "# Configuration reference",
            "",
            "Generated from the config classes by `python -m rmq.tools.configdoc > docs/configuration.md`;",
            "a test fails when it is stale. Broker and name server keys are RocketMQ's own names, read from",
            "`broker.conf` / the name server's properties file (`-c FILE`). A file RocketMQ 4.9.8 or 5.x",
            "starts with starts rmq the same way:",
            "",
            "- Every other key RocketMQ has (its config classes' setters, rmq/rocketmq_keys.py) is accepted",
            "  and named in one INFO line at start-up as ignored; RocketMQ ignores an unknown key in silence,",
            "  rmq logs a WARNING naming the closest known key (a typo).",
            "- What RocketMQ corrects in silence is corrected the same way, in one log line: a master's",
            "  brokerId other than 0 becomes 0, and haMasterAddress on a master is dropped (WARNING); with",
            "  enableDLegerCommitLog=true, brokerRole and brokerId are ignored and the election decides",
            "  (INFO); mappedFileSizeConsumeQueue is rounded up to a multiple of 20 and diskMaxUsedSpaceRatio",
            "  is kept within 10..95 (WARNING).",
            "- What RocketMQ refuses is refused: a SLAVE with brokerId <= 0, and enableControllerMode together",
            "  with enableDLegerCommitLog. RocketMQ 5's controller runs as mqcontroller or inside a name",
            "  server (enableControllerInNamesrv, docs/controller.md); a broker in controller mode",
            "  (enableControllerMode) is not supported yet and is refused with that said.",
            "- Where RocketMQ takes a value it cannot parse as the default, or any boolean but `true` as",
            "  false, in silence, rmq refuses the value and stops with the key named.",
            "",
            "`mqbroker -p` prints every setting as `key=value` lines and `mqbroker -m` the ones RocketMQ marks",
            "important, with the values the broker would start with, and both exit 0 without starting;",
            "`mqnamesrv -p` does the same for the name server, whose `-n` is accepted and ignored as in",
            "RocketMQ. `-p` followed by a number is rmq's older spelling of `mqnamesrv --port`.",
            "",
            "## Broker (`mqbroker -c broker.conf`)",
            "",
            _table(broker, "key"),
            "",
            "Where the broker differs from RocketMQ:",
            "",
            _differences([k for k, _, _ in broker], rocketmq_keys.BROKER, BROKER_DIFFERS),
            "",
            "## Name server (`mqnamesrv -c namesrv.properties`)",
            "",
            _table(namesrv, "key"),
            "",
            "Where the name server differs from RocketMQ:",
            "",
            _differences([k for k, _, _ in namesrv], rocketmq_keys.NAMESRV, NAMESRV_DIFFERS),
            "",
            "## Clients (keyword arguments of `Producer`, `PushConsumer`, `PullConsumer`)",
            "",
            "Every client:",
            "",
            _table(_client_rows(ClientConfig, set()), "option"),
            "",
            "Producers:",
            "",
            _table(_client_rows(ProducerConfig, common), "option"),
            "",
            "Consumers:",
            "",
            _table(_client_rows(ConsumerConfig, common), "option"),
            "",
        ]
    )


if __name__ == "__main__":
    sys.stdout.write(render())
