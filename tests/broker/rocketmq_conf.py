"""The broker configuration files RocketMQ 4.9.8 and 5.x ship under distribution/conf/, as
their keys and values (facts about RocketMQ; each entry names the file it comes from), and
the variants users write of them. 4.9.8 and 5.x ship the same broker.conf, 2m-noslave/,
2m-2s-async/, 2m-2s-sync/ and dledger/ files; container/ and controller/ are 5.x's.

`adjusted` fits a file to one test machine, changing only where a broker listens and stores:
ports, DLedger peer ports, storePathRootDir / storePathCommitLog, brokerIP1 and bindAddress.
"""

from __future__ import annotations

from pathlib import Path


def _master_slave(name: str, broker_id: int, role: str) -> dict[str, str]:
    return {
        "brokerClusterName": "DefaultCluster",
        "brokerName": name,
        "brokerId": str(broker_id),
        "deleteWhen": "04",
        "fileReservedTime": "48",
        "brokerRole": role,
        "flushDiskType": "ASYNC_FLUSH",
    }


def _dledger(k: int) -> dict[str, str]:
    # distribution/conf/dledger/broker-n<k>.conf
    return {
        "brokerClusterName": "RaftCluster",
        "brokerName": "RaftNode00",
        "listenPort": str(30911 + 10 * k),
        "namesrvAddr": "127.0.0.1:9876",
        "storePathRootDir": f"/tmp/rmqstore/node0{k}",
        "storePathCommitLog": f"/tmp/rmqstore/node0{k}/commitlog",
        "enableDLegerCommitLog": "true",
        "dLegerGroup": "RaftNode00",
        "dLegerPeers": "n0-127.0.0.1:40911;n1-127.0.0.1:40912;n2-127.0.0.1:40913",
        "dLegerSelfId": f"n{k}",
        "sendMessageThreadPoolNums": "16",
    }


def _in_container(name: str, broker_id: int, role: str, port: int) -> dict[str, str]:
    # distribution/conf/container/2container-2m-2s/broker-<a|b>-in-container<1|2>.conf (5.x)
    return {
        "brokerClusterName": "DefaultCluster",
        "brokerName": name,
        "brokerId": str(broker_id),
        "brokerRole": role,
        "flushDiskType": "ASYNC_FLUSH",
        "storePathRootDir": f"/root/{name}/store",
        "storePathCommitLog": f"/root/{name}/store/commitlog",
        "listenPort": str(port),
        "haListenPort": str(port + 1),
        "totalReplicas": "2",
        "inSyncReplicas": "2",
        "minInSyncReplicas": "1",
        "enableAutoInSyncReplicas": "true",
        "slaveReadEnable": "true",
        "brokerHeartbeatInterval": "1000",
        "brokerNotActiveTimeoutMillis": "5000",
        "sendHeartbeatTimeoutMillis": "1000",
        "enableSlaveActingMaster": "true",
    }


def _controller_member(k: int) -> dict[str, str]:
    # distribution/conf/controller/quick-start/broker-n<k>.conf (5.x)
    return {
        "brokerClusterName": "DefaultCluster",
        "brokerName": "broker-a",
        "brokerId": "-1",
        "brokerRole": "SLAVE",
        "deleteWhen": "04",
        "fileReservedTime": "48",
        "enableControllerMode": "true",
        "controllerAddr": "127.0.0.1:9878",
        "namesrvAddr": "127.0.0.1:9876",
        "allAckInSyncStateSet": "true",
        "listenPort": str(30911 + 10 * k),
        "storePathRootDir": f"/tmp/rmqstore/node0{k}",
        "storePathCommitLog": f"/tmp/rmqstore/node0{k}/commitlog",
    }


# Each deployment: its files (distribution/conf/<folder>/<name>), started together.
DEPLOYMENTS: dict[str, dict[str, dict[str, str]]] = {
    "broker.conf": {
        # distribution/conf/broker.conf
        "broker.conf": _master_slave("broker-a", 0, "ASYNC_MASTER"),
    },
    "2m-noslave": {
        "broker-a.properties": _master_slave("broker-a", 0, "ASYNC_MASTER"),
        "broker-b.properties": _master_slave("broker-b", 0, "ASYNC_MASTER"),
        "broker-trace.properties": _master_slave("broker-trace", 0, "ASYNC_MASTER"),
    },
    **{
        f"2m-2s-{kind}": {
            "broker-a.properties": _master_slave("broker-a", 0, role),
            "broker-a-s.properties": _master_slave("broker-a", 1, "SLAVE"),
            "broker-b.properties": _master_slave("broker-b", 0, role),
            "broker-b-s.properties": _master_slave("broker-b", 1, "SLAVE"),
        }
        for kind, role in (("async", "ASYNC_MASTER"), ("sync", "SYNC_MASTER"))
    },
    "container/2container-2m-2s": {
        "broker-a-in-container1.conf": _in_container("broker-a", 0, "SYNC_MASTER", 10911),
        "broker-a-in-container2.conf": _in_container("broker-a", 1, "SLAVE", 10911),
        "broker-b-in-container1.conf": _in_container("broker-b", 1, "SLAVE", 20911),
        "broker-b-in-container2.conf": _in_container("broker-b", 0, "SYNC_MASTER", 20911),
    },
}

DLEDGER = {f"broker-n{k}.conf": _dledger(k) for k in range(3)}

CONTROLLER = {f"broker-n{k}.conf": _controller_member(k) for k in range(2)}


def adjusted(props: dict[str, str], store: Path, port: int, dledger_ports: list[int] | None = None) -> dict[str, str]:
    """`props` listening on 127.0.0.1:`port` (haListenPort port + 1 if the file sets one) and
    storing under `store`; a DLedger member's peers on `dledger_ports`, in order."""
    out = {**props, "brokerIP1": "127.0.0.1", "bindAddress": "127.0.0.1", "listenPort": str(port)}
    out["storePathRootDir"] = str(store)
    if "storePathCommitLog" in props:
        out["storePathCommitLog"] = str(store / "commitlog")
    if "haListenPort" in props:
        out["haListenPort"] = str(port + 1)
    if dledger_ports is not None:
        ids = [part.split("-", 1)[0] for part in props["dLegerPeers"].split(";")]
        out["dLegerPeers"] = ";".join(f"{i}-127.0.0.1:{p}" for i, p in zip(ids, dledger_ports, strict=True))
    return out


def write(path: Path, props: dict[str, str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return path
