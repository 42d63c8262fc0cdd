"""Client options are typed keywords: one declaration per kind (config.py's *Options), kept
in step with the configs, and a misspelled one is a TypeError in every flavour."""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable
from typing import Any

import pytest

from rmq.client import aio, blocking
from rmq.client import config as C
from rmq.client.consumer import PushConsumer
from rmq.client.producer import Producer
from rmq.client.pull_consumer import PullConsumer
from rmq.client.transaction import TransactionProducer

NS = "127.0.0.1:9876"  # parsed, never dialled: construction connects to nothing


@pytest.mark.parametrize(
    ("options", "config"),
    [(C.ClientOptions, C.ClientConfig), (C.ProducerOptions, C.ProducerConfig), (C.ConsumerOptions, C.ConsumerConfig)],
)
def test_the_options_are_the_configs_fields(options: type, config: type) -> None:
    hints = typing.get_type_hints(config, vars(C))
    fields = {f.name: hints[f.name] for f in dataclasses.fields(config) if f.name != "namesrv"}
    assert typing.get_type_hints(options, vars(C)) == fields


CLIENTS: dict[str, Callable[..., Any]] = {
    "Producer": lambda **kw: Producer("g", NS, **kw),
    "TransactionProducer": lambda **kw: TransactionProducer("g", NS, **kw),
    "PushConsumer": lambda **kw: PushConsumer("g", NS, **kw),
    "PullConsumer": lambda **kw: PullConsumer("g", NS, **kw),
    "aio.Producer": lambda **kw: aio.Producer("g", NS, **kw),
    "aio.TransactionProducer": lambda **kw: aio.TransactionProducer("g", NS, **kw),
    "aio.PushConsumer": lambda **kw: aio.PushConsumer("g", NS, **kw),
    "aio.PullConsumer": lambda **kw: aio.PullConsumer("g", NS, **kw),
    "blocking.Producer": lambda **kw: blocking.Producer("g", NS, **kw),
    "blocking.TransactionProducer": lambda **kw: blocking.TransactionProducer("g", NS, **kw),
    "blocking.PushConsumer": lambda **kw: blocking.PushConsumer("g", NS, handler=print, **kw),
    "blocking.PullConsumer": lambda **kw: blocking.PullConsumer("g", NS, **kw),
}


@pytest.mark.parametrize("name", list(CLIENTS))
def test_a_misspelled_option_is_a_type_error(name: str) -> None:
    make = CLIENTS[name]
    good, typo = ("send_timeout", "send_timout") if "Producer" in name else ("pull_batch_size", "pull_batchsize")
    client = make(**{good: 7})
    assert getattr(getattr(client, "_obj", client).config, good) == 7  # the right spelling is taken
    with pytest.raises(TypeError, match=f"unexpected keyword argument '{typo}'; did you mean '{good}'"):
        make(**{typo: 7})
