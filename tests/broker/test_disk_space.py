"""The broker and its disk: DELETE_EXPIRED_COMMITLOG honours fileReservedTime, the disk levels
as metrics, and (test_full_disk_process.py) a broker process on a small filesystem."""

from __future__ import annotations

import os

import pytest
import trio

from rmq.client import Message, Producer
from rmq.protocol import RequestCode, ResponseCode
from tests.metrics.scrape import scrape, value

from .cluster import Cluster


async def _fill_commitlog(cluster: Cluster, files: int) -> list[str]:
    """Send until the CommitLog (1 MiB files) has ``files`` files; their names."""
    directory = cluster.store / "commitlog"
    async with Producer("disk-producer", cluster.namesrv.address) as producer:
        for _ in range(files * 20):
            if len(os.listdir(directory)) >= files:
                break
            await producer.send(Message("DiskTopic", os.urandom(60_000)))
    names = sorted(os.listdir(directory))
    assert len(names) >= files
    return names


@pytest.mark.parametrize(
    "broker_props", [{"fileReservedTime": "72"}, {"fileReservedTime": "0"}], ids=["not-expired", "expired"]
)
async def test_delete_expired_commitlog_deletes_only_expired_files(
    cluster: Cluster, broker_props: dict[str, str]
) -> None:
    """mqadmin deleteExpiredCommitLog asks for RocketMQ's manual delete: expired files go at any
    hour (not only at deleteWhen); files younger than fileReservedTime stay."""
    names = await _fill_commitlog(cluster, 4)
    with trio.fail_after(10):  # dispatched (retention never deletes what is not)
        await cluster.broker.store.wait_dispatched()
    response = await cluster.call(RequestCode.DELETE_EXPIRED_COMMITLOG)
    assert response.code == ResponseCode.SUCCESS
    left = sorted(os.listdir(cluster.store / "commitlog"))
    if broker_props["fileReservedTime"] == "72":
        assert left == names
    else:
        assert left == names[-1:]  # every file but the newest had expired (after 0 hours)


@pytest.mark.parametrize("broker_props", [{"metricsExporterType": "PROM", "metricsPromExporterPort": "0"}])
async def test_the_levels_of_disk_use_are_metrics(cluster: Cluster) -> None:
    await _fill_commitlog(cluster, 1)
    samples = await scrape(cluster.broker.metrics.port)
    ratio = value(samples, "rocketmq_storage_disk_used_ratio")
    assert 0 < ratio < 1
    assert ratio == pytest.approx(cluster.broker.message_store.last_disk_ratio)
    for level, threshold in (("clean_expired", 0.75), ("clean_forcibly", 0.85), ("refuse_writes", 0.90)):
        assert value(samples, "rocketmq_storage_disk_level_ratio", level=level) == threshold
        assert value(samples, "rocketmq_storage_disk_level_exceeded", level=level) == (1 if ratio > threshold else 0)
    assert value(samples, "rocketmq_storage_writes_refused") == 0
    assert value(samples, "rocketmq_storage_commitlog_files_deleted_total", expired="true") == 0
    assert value(samples, "rocketmq_storage_commitlog_files_deleted_total", expired="false") == 0
