"""Metadata writes off the event loop: an operator's change is on disk when answered."""

from __future__ import annotations

from rmq.protocol import RequestCode, ResponseCode
from rmq.protocol import body as json_body

from .cluster import Cluster


async def test_an_operators_change_is_on_disk_when_answered(cluster: Cluster) -> None:
    ext = {"topic": "Ops", "readQueueNums": 2, "writeQueueNums": 2, "perm": 6, "topicFilterType": "SINGLE_TAG"}
    assert (await cluster.call(RequestCode.UPDATE_AND_CREATE_TOPIC, ext)).code == ResponseCode.SUCCESS
    on_disk = json_body.loads((cluster.store / "config" / "topics.json").read_bytes())
    assert "Ops" in on_disk["topicConfigTable"]
    group = json_body.dumps({"groupName": "OpsGroup", "retryMaxTimes": 3})
    assert (await cluster.call(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=group)).code == 0
    on_disk = json_body.loads((cluster.store / "config" / "subscriptionGroup.json").read_bytes())
    assert on_disk["subscriptionGroupTable"]["OpsGroup"]["retryMaxTimes"] == 3
