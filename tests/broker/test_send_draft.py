"""SendProcessor.draft_one's shortcut for plain sends: the message type it gives is the one
``message_type`` reads from the properties string, whichever path a send takes."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rmq.broker.processors.send import Refused, SendProcessor
from rmq.broker.stats import message_type
from rmq.protocol import RemotingCommand, RequestCode
from rmq.protocol import properties as P
from rmq.protocol.headers import SendMessageRequestHeader
from rmq.remoting.abc import RequestContext

from .parts import broker_parts

_NAMES = (P.TRAN_MSG, P.SHARDING_KEY, P.DELAY, *P.TIMER_KEYS, P.WAIT, P.UNIQ_KEY, P.TAGS, P.CLUSTER, "a")
_VALUES = ("true", "TRUE", "false", "3", "0", "", "x")


def _ctx() -> Any:
    return RequestContext(SimpleNamespace(remote_address="10.0.0.7:4242"), 0.0)  # type: ignore[arg-type]


@pytest.mark.parametrize("topic", ["PlainTopic", "%RETRY%G"])
def test_message_type_matches_the_properties_string(tmp_path: Path, topic: str) -> None:
    with broker_parts(tmp_path) as parts:
        parts.topics.create_if_absent(topic, 4, 6)
        processor = SendProcessor(parts)

        @settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
        @given(st.lists(st.tuples(st.sampled_from(_NAMES), st.sampled_from(_VALUES)), max_size=6))
        def check(pairs: list[tuple[str, str]]) -> None:
            text = P.PROPERTY_SEPARATOR.join(f"{k}{P.NAME_VALUE_SEPARATOR}{v}" for k, v in pairs)
            header = SendMessageRequestHeader(
                producer_group="G", topic=topic, default_topic="TBW102", default_topic_queue_nums=4, queue_id=1,
                sys_flag=0, born_timestamp=1, flag=0, properties=text, reconsume_times=0, unit_mode=False,
                batch=False,
            )  # fmt: skip
            request = RemotingCommand(code=RequestCode.SEND_MESSAGE_V2, body=b"b")
            try:
                queue_id, draft, kind = processor.draft_one(_ctx(), request, header)
            except Refused:
                return
            assert kind == message_type(text)
            assert queue_id == 1
            assert draft.born_host == ("10.0.0.7", 4242)
            props = P.decode_properties(text)
            props.pop(P.WAIT, None)
            props[P.CLUSTER] = parts.config.broker_cluster_name
            if draft.topic == topic:  # not rerouted: stored as it came, CLUSTER set, WAIT dropped
                assert draft.properties == props
                assert list(draft.properties) == list(props)  # type: ignore[arg-type]

        check()
