"""NamesrvConfig and the properties format it is read from."""

from __future__ import annotations

import pytest

from rmq.namesrv.config import ConfigError, NamesrvConfig
from rmq.protocol import javaprops as properties


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a=1\nb = 2\n", {"a": "1", "b": "2"}),
        ("a:1\nb 2\n", {"a": "1", "b": "2"}),
        ("# comment\n! also\n\n   \nk=v", {"k": "v"}),
        ("k=v1\nk=v2", {"k": "v2"}),
        ("k=a\\\n    b\\\n c", {"k": "abc"}),
        ("k=ends with backslash\\\\", {"k": "ends with backslash\\"}),
        ("k=\\u0041\\t\\x", {"k": "A\tx"}),
        ("key\\=x=v", {"key=x": "v"}),
        ("empty=", {"empty": ""}),
        ("alone", {"alone": ""}),
        ("k=v # not a comment", {"k": "v # not a comment"}),
        ("k=v\r\nj=w\r\n", {"k": "v", "j": "w"}),
    ],
)
def test_parse_properties(text: str, expected: dict[str, str]) -> None:
    assert properties.parse(text) == expected


def test_format_properties_round_trips() -> None:
    values = {"a": "1", "b": "x y"}
    assert properties.render(values) == "a=1\nb=x y\n"
    assert properties.parse(properties.render(values)) == values


def test_defaults() -> None:
    config = NamesrvConfig()
    assert (config.listen_host, config.listen_port) == ("0.0.0.0", 9876)
    assert config.kv_config_path == "~/namesrv/kvConfig.json"
    assert (config.first_scan_delay, config.scan_interval, config.broker_expiry) == (5.0, 10.0, 120.0)


def test_with_properties_maps_rocketmq_keys() -> None:
    config, unknown = NamesrvConfig().with_properties(
        {
            "listenPort": "19876",
            "bindAddress": "127.0.0.1",
            "kvConfigPath": "/tmp/kv.json",
            "scanNotActiveBrokerInterval": "5000",
            "brokerChannelExpiredTime": "30000",
            "orderMessageEnable": "TRUE",
            "rocketmqHome": "/opt/rocketmq",
        }
    )
    assert config == NamesrvConfig(
        listen_host="127.0.0.1",
        listen_port=19876,
        kv_config_path="/tmp/kv.json",
        scan_interval=5.0,
        broker_expiry=30.0,
        order_message_enable=True,
    )
    assert unknown == ["rocketmqHome"]


@pytest.mark.parametrize(
    ("props", "key"),
    [
        ({"listenPort": "abc"}, "listenPort"),
        ({"listenPort": "70000"}, "listenPort"),
        ({"orderMessageEnable": "yes"}, "orderMessageEnable"),
        ({"scanNotActiveBrokerInterval": "0"}, "scanNotActiveBrokerInterval"),
        ({"tls.server.mode": "sometimes"}, "tls.server.mode"),
    ],
)
def test_bad_values_name_the_key(props: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigError) as info:
        NamesrvConfig().with_properties(props)
    assert info.value.key == key
    assert key in str(info.value)


def test_runtime_only_refuses_startup_keys() -> None:
    with pytest.raises(ConfigError, match="listenPort: can only be set at startup"):
        NamesrvConfig().with_properties({"listenPort": "1"}, runtime_only=True)
    config, _ = NamesrvConfig().with_properties({"orderMessageEnable": "true"}, runtime_only=True)
    assert config.order_message_enable


def test_to_properties_round_trips() -> None:
    config = NamesrvConfig(listen_port=1234, kv_config_path=None, broker_expiry=30.5, order_message_enable=True)
    props = config.to_properties()
    assert props["listenPort"] == "1234"
    assert props["kvConfigPath"] == ""
    assert props["brokerChannelExpiredTime"] == "30500"
    assert list(props) == sorted(props)
    assert NamesrvConfig().with_properties(props)[0] == config


def test_constructor_validates() -> None:
    with pytest.raises(ConfigError, match="listen_port"):
        NamesrvConfig(listen_port=-1)
    with pytest.raises(ConfigError, match="tls_mode"):
        NamesrvConfig(tls_mode="sometimes")
