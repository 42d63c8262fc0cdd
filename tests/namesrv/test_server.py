"""NamesrvServer end to end over real 127.0.0.1 sockets."""

from __future__ import annotations

import json
import ssl
import struct
import zlib
from typing import TYPE_CHECKING

import pytest
import trio
import trio.testing
import trustme

from rmq.namesrv import NamesrvServer
from rmq.namesrv.config import ConfigError
from rmq.protocol import RemotingCommand, RequestCode, ResponseCode
from rmq.protocol import body as json_body
from rmq.protocol.bodies import DataVersion, TopicConfig
from rmq.protocol.bodies.register import RegisterBrokerBody as RegisterBody
from rmq.protocol.bodies.register import encode_compressed, encode_register_body
from rmq.remoting import ClientConfig, RemotingClient, RemotingError

from .helpers import BROKER_ADDR, loopback_config, register_request, route_request

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

EXPECTED_ROUTE = (
    b'{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:30911"},"brokerName":"broker-a","cluster":"DefaultCluster"}],'
    b'"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,'
    b'"writeQueueNums":4}]}'
)


async def wait_until(predicate: Callable[[], bool]) -> None:
    """Poll state that the server changes from its connection-closed hook."""
    with trio.fail_after(5):
        while not predicate():  # noqa: ASYNC110 - no event to wait on from the outside
            await trio.sleep(0.01)


async def test_register_query_unregister(namesrv: NamesrvServer, client: RemotingClient) -> None:
    response = await client.invoke(namesrv.address, register_request(), 3)
    assert response.code == ResponseCode.SUCCESS
    route = await client.invoke(namesrv.address, route_request("TopicTest", version=63), 3)
    assert (route.code, route.body) == (ResponseCode.SUCCESS, EXPECTED_ROUTE)
    unregister = RemotingCommand.request(
        RequestCode.UNREGISTER_BROKER,
        {"brokerName": "broker-a", "brokerAddr": BROKER_ADDR, "clusterName": "DefaultCluster", "brokerId": "0"},
    )
    assert (await client.invoke(namesrv.address, unregister, 3)).code == ResponseCode.SUCCESS
    gone = await client.invoke(namesrv.address, route_request("TopicTest"), 3)
    assert gone.code == ResponseCode.TOPIC_NOT_EXIST
    assert gone.remark == "No topic route info in name server for the topic: TopicTest"


@pytest.mark.parametrize(("version", "key"), [(63, b"{0:"), (317, b"{0:"), (401, b'{"0":'), (409, b'{"0":')])
async def test_route_dialects(namesrv: NamesrvServer, client: RemotingClient, version: int, key: bytes) -> None:
    await client.invoke(namesrv.address, register_request(), 3)
    slave = register_request(broker_addr="127.0.0.1:40911", broker_id=1)
    await client.invoke(namesrv.address, slave, 3)
    body = (await client.invoke(namesrv.address, route_request("TopicTest", version=version), 3)).body
    assert key in body
    assert not any(c in body for c in b" \t\r\n")
    route = json_body.loads(body)
    addrs = route["brokerDatas"][0]["brokerAddrs"]
    assert {int(k): v for k, v in addrs.items()} == {0: BROKER_ADDR, 1: "127.0.0.1:40911"}
    if key.startswith(b'{"'):
        assert json.loads(body) == route  # standard JSON for 4.9.4+ clients


async def test_cpp_client_route_request_gets_the_captured_shape(
    namesrv: NamesrvServer, client: RemotingClient, vectors_dir: Path
) -> None:
    """Replay the C++ client's own GET_ROUTEINFO_BY_TOPIC frame on a raw socket."""
    await client.invoke(namesrv.address, register_request(), 3)
    frame = (vectors_dir / "a_producer_send_sync/frames/0001-c2s-namesrv-GET_ROUTEINFO_BY_TOPIC.bin").read_bytes()
    stream = await trio.open_tcp_stream("127.0.0.1", namesrv.port)
    async with stream:
        await stream.send_all(frame)
        data = b""
        with trio.fail_after(5):
            while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
                chunk = await stream.receive_some(65536)
                assert chunk, "server closed the connection"
                data += chunk
    response = RemotingCommand.decode(data[4:])
    assert data[4] == 0  # JSON header, as the C++ client requires
    assert (response.code, response.opaque, response.is_response) == (0, 0, True)
    assert response.body == EXPECTED_ROUTE
    # the captured reply differs only in the pre-4.9.0 spelling of the flag key
    frames = vectors_dir / "a_producer_send_sync/frames"
    captured = (frames / "0002-s2c-namesrv-resp-GET_ROUTEINFO_BY_TOPIC.bin").read_bytes()
    assert captured.endswith(EXPECTED_ROUTE.replace(b"topicSysFlag", b"topicSynFlag"))


async def test_compressed_registration(namesrv: NamesrvServer, client: RemotingClient) -> None:
    body = RegisterBody(DataVersion(1, 1), {"Zipped": TopicConfig("Zipped", 2, 2, 6)}, [])
    request = register_request(encode_compressed(body), compressed="true")
    assert (await client.invoke(namesrv.address, request, 3)).code == ResponseCode.SUCCESS
    route = json_body.loads((await client.invoke(namesrv.address, route_request("Zipped"), 3)).body)
    assert route["queueDatas"][0]["readQueueNums"] == 2


async def test_crc_mismatch(namesrv: NamesrvServer, client: RemotingClient) -> None:
    request = register_request()
    request.ext_fields = {**request.ext_fields, "bodyCrc32": str(int(request.ext_fields["bodyCrc32"]) ^ 1)}
    response = await client.invoke(namesrv.address, request, 3)
    assert (response.code, response.remark) == (ResponseCode.SYSTEM_ERROR, "crc32 not match")
    assert namesrv.routes.brokers == {}


async def test_malformed_requests_are_answered_and_the_server_keeps_serving(
    namesrv: NamesrvServer, client: RemotingClient
) -> None:
    no_topic = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {})
    response = await client.invoke(namesrv.address, no_topic, 3)
    assert response.code == ResponseCode.SYSTEM_ERROR
    assert "'topic'" in (response.remark or "")
    garbage = await client.invoke(namesrv.address, register_request(b"\x00garbage", bodyCrc32="0"), 3)
    assert garbage.code == ResponseCode.SYSTEM_ERROR
    assert "RegisterBrokerBody" in (garbage.remark or "")
    bad_zip = await client.invoke(namesrv.address, register_request(b"xx", compressed="true", bodyCrc32="0"), 3)
    assert bad_zip.code == ResponseCode.SYSTEM_ERROR
    assert "inflate" in (bad_zip.remark or "")
    # the same connection still works
    assert (await client.invoke(namesrv.address, register_request(), 3)).code == ResponseCode.SUCCESS
    assert len(client.connections) == 1


async def test_bad_frame_closes_only_that_connection(namesrv: NamesrvServer, client: RemotingClient) -> None:
    stream = await trio.open_tcp_stream("127.0.0.1", namesrv.port)
    async with stream:
        await stream.send_all(struct.pack(">ii", 8, 0x000000FF) + b"\x00" * 4)  # header length beyond the frame
        with trio.fail_after(5):
            assert await stream.receive_some(100) == b""
    assert (await client.invoke(namesrv.address, register_request(), 3)).code == ResponseCode.SUCCESS


async def test_unknown_code_is_not_supported(namesrv: NamesrvServer, client: RemotingClient) -> None:
    response = await client.invoke(namesrv.address, RemotingCommand.request(RequestCode.SEND_MESSAGE), 3)
    assert (response.code, response.remark) == (3, " request type 10 not supported")


async def test_connection_close_drops_the_broker_at_once(namesrv: NamesrvServer, client: RemotingClient) -> None:
    await client.invoke(namesrv.address, register_request(), 3)
    async with RemotingClient() as other:
        slave = register_request(broker_addr="127.0.0.1:40911", broker_id=1)
        await other.invoke(namesrv.address, slave, 3)
        assert set(namesrv.routes.live) == {BROKER_ADDR, "127.0.0.1:40911"}
    await wait_until(lambda: "127.0.0.1:40911" not in namesrv.routes.live)
    assert namesrv.routes.brokers["broker-a"].broker_addrs == {0: BROKER_ADDR}
    client.close_connection(namesrv.address)
    await wait_until(lambda: not namesrv.routes.live)
    assert (namesrv.routes.brokers, namesrv.routes.topics) == ({}, {})


async def test_a_deposed_masters_late_registration_is_refused(namesrv: NamesrvServer, client: RemotingClient) -> None:
    """A DLedger group: A led in term 4, B was elected in term 5 while A was paused. A's
    registration as brokerId 0, written in term 4, reaches the name server after B's: it is
    answered SYSTEM_ERROR and the route keeps B as the master, also once A registers as a slave."""
    a, b = "127.0.0.1:40911", "127.0.0.1:40921"

    def registration(addr: str, broker_id: int, term: int | None, counter: int) -> RemotingCommand:
        version = DataVersion(timestamp=1700000000000, counter=counter, state_version=term)
        body = encode_register_body(RegisterBody(version, {"TopicTest": TopicConfig("TopicTest", 4, 4, 6)}, []))
        return register_request(body, broker_addr=addr, broker_id=broker_id)

    async def master() -> str:
        response = await client.invoke(namesrv.address, route_request("TopicTest"), 3)
        addrs = json_body.loads(response.body)["brokerDatas"][0]["brokerAddrs"]
        return str(addrs.get("0") or addrs.get(0))

    late = registration(a, 0, 4, 7)  # written while A still led
    async with RemotingClient() as from_b:
        assert (await client.invoke(namesrv.address, registration(a, 0, 4, 6), 3)).code == ResponseCode.SUCCESS
        assert (await from_b.invoke(namesrv.address, registration(b, 2, 4, 1), 3)).code == ResponseCode.SUCCESS
        assert (await from_b.invoke(namesrv.address, registration(b, 0, 5, 2), 3)).code == ResponseCode.SUCCESS
        assert await master() == b
        refused = await client.invoke(namesrv.address, late, 3)
        assert refused.code == ResponseCode.SYSTEM_ERROR
        assert f"held by {b} at stateVersion 5" in (refused.remark or "")
        assert await master() == b
        as_slave = await client.invoke(namesrv.address, registration(a, 1, 5, 8), 3)
        assert as_slave.code == ResponseCode.SUCCESS
        assert as_slave.ext_fields["masterAddr"] == b
        assert namesrv.routes.brokers["broker-a"].broker_addrs == {0: b, 1: a}
        # a broker without stateVersion (4.x) takes a master's id only once that one is gone
        refused = await client.invoke(namesrv.address, register_request(broker_addr=a), 3)
        assert refused.code == ResponseCode.SYSTEM_ERROR
    await wait_until(lambda: b not in namesrv.routes.live)
    assert (await client.invoke(namesrv.address, register_request(broker_addr=a), 3)).code == ResponseCode.SUCCESS
    assert await master() == a


async def test_expiry_after_120_s_of_silence(
    tmp_path: Path, client: RemotingClient, autojump_clock: trio.testing.MockClock
) -> None:
    # connection idle timeout above the expiry, so only the scan can remove the broker
    async with (
        NamesrvServer(loopback_config(tmp_path, idle_timeout=1000.0)) as namesrv,
        RemotingClient(ClientConfig(idle_timeout=None)) as other,
    ):
        start = trio.current_time()
        b = register_request(broker_name="broker-b", broker_addr="127.0.0.1:50911")
        c = register_request(broker_name="broker-c", broker_addr="127.0.0.1:60911")
        await client.invoke(namesrv.address, register_request(), 3)
        await other.invoke(namesrv.address, b, 3)
        await other.invoke(namesrv.address, c, 3)  # shares broker-b's connection
        conn_a, conn_bc = namesrv.remoting.connections
        await trio.sleep_until(start + 100)
        await other.invoke(namesrv.address, b, 3)  # broker-b keeps registering; a and c fall silent
        await trio.sleep_until(start + 124)  # scans at 5, 15, ... 115: not yet 120 s
        assert set(namesrv.routes.live) == {BROKER_ADDR, "127.0.0.1:50911", "127.0.0.1:60911"}
        await trio.sleep_until(start + 126)  # the scan at 125 s drops a and c
        assert set(namesrv.routes.live) == {"127.0.0.1:50911"}
        assert list(namesrv.routes.brokers) == ["broker-b"]
        # RocketMQ closes an expired broker's channel too, but not one a live broker uses
        assert (conn_a.closed, conn_a.close_reason) == (True, f"broker {BROKER_ADDR} expired")
        assert not conn_bc.closed
        await trio.sleep_until(start + 226)
        assert namesrv.routes.live == {}
        assert conn_bc.closed


async def test_two_name_servers_stay_independent(tmp_path: Path, client: RemotingClient) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    async with NamesrvServer(loopback_config(tmp_path / "a")) as a, NamesrvServer(loopback_config(tmp_path / "b")) as b:
        assert a.address != b.address
        await client.invoke(a.address, register_request(), 3)
        put = RemotingCommand.request(RequestCode.PUT_KV_CONFIG, {"namespace": "ns", "key": "k", "value": "a"})
        await client.invoke(a.address, put, 3)
        assert (await client.invoke(a.address, route_request("TopicTest"), 3)).code == ResponseCode.SUCCESS
        assert (await client.invoke(b.address, route_request("TopicTest"), 3)).code == ResponseCode.TOPIC_NOT_EXIST
        get = RemotingCommand.request(RequestCode.GET_KV_CONFIG, {"namespace": "ns", "key": "k"})
        assert (await client.invoke(b.address, get, 3)).code == ResponseCode.QUERY_NOT_FOUND
        client.close_connection(a.address)
        await wait_until(lambda: not a.routes.live)
        assert b.routes.live == {}


async def test_kv_config_survives_a_restart(tmp_path: Path, client: RemotingClient) -> None:
    config = loopback_config(tmp_path)
    put = RemotingCommand.request(RequestCode.PUT_KV_CONFIG, {"namespace": "ns", "key": "k", "value": "v1"})
    async with NamesrvServer(config) as first:
        assert (await client.invoke(first.address, put, 3)).code == ResponseCode.SUCCESS
    async with NamesrvServer(config) as second:
        get = RemotingCommand.request(RequestCode.GET_KV_CONFIG, {"namespace": "ns", "key": "k"})
        response = await client.invoke(second.address, get, 3)
        assert (response.code, response.ext_fields) == (ResponseCode.SUCCESS, {"value": "v1"})
        listing = RemotingCommand.request(RequestCode.GET_KVLIST_BY_NAMESPACE, {"namespace": "ns"})
        assert (await client.invoke(second.address, listing, 3)).body == b'{"table":{"k":"v1"}}'


async def test_registration_body_is_the_order_topic_namespace(namesrv: NamesrvServer, client: RemotingClient) -> None:
    put = RemotingCommand.request(
        RequestCode.PUT_KV_CONFIG, {"namespace": "ORDER_TOPIC_CONFIG", "key": "TopicTest", "value": "broker-a:4"}
    )
    await client.invoke(namesrv.address, put, 3)
    response = await client.invoke(namesrv.address, register_request(), 3)
    assert response.body == b'{"table":{"TopicTest":"broker-a:4"}}'


async def test_serve_in_a_callers_nursery(tmp_path: Path, client: RemotingClient) -> None:
    server = NamesrvServer(loopback_config(tmp_path))
    async with trio.open_nursery() as nursery:
        address = await nursery.start(server.serve)
        assert address == server.address == f"127.0.0.1:{server.port}"
        assert server.listen_address == address
        assert (await client.invoke(address, register_request(), 3)).code == ResponseCode.SUCCESS
        await server.aclose()
    # shutting down closed the broker's connection, and with it its registration
    assert server.remoting.connections == []
    assert server.routes.live == {}


async def test_tls_and_websocket_settings_reach_the_listener(tmp_path: Path) -> None:
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    cert.configure_cert(server_ctx)
    client_ctx = ssl.create_default_context()
    ca.configure_trust(client_ctx)
    config = loopback_config(tmp_path, tls_mode="enforcing", websocket_port=0)
    async with NamesrvServer(config, ssl_context=server_ctx) as namesrv:
        ws_url = namesrv.remoting.ws_url
        assert ws_url is not None
        assert ws_url.startswith("wss://127.0.0.1:")
        async with RemotingClient(ClientConfig(tls=True, ssl_context=client_ctx)) as tls_client:
            response = await tls_client.invoke(namesrv.address, register_request(), 3)
            assert response.code == ResponseCode.SUCCESS
            route = await tls_client.invoke(ws_url, route_request("TopicTest", version=63), 3)
            assert route.body == EXPECTED_ROUTE


async def test_tls_from_cert_and_key_files(tmp_path: Path) -> None:
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    cert.cert_chain_pems[0].write_to_path(str(tmp_path / "cert.pem"))
    cert.private_key_pem.write_to_path(str(tmp_path / "key.pem"))
    config = loopback_config(
        tmp_path,
        tls_mode="permissive",
        tls_cert_path=str(tmp_path / "cert.pem"),
        tls_key_path=str(tmp_path / "key.pem"),
    )
    client_ctx = ssl.create_default_context()
    ca.configure_trust(client_ctx)
    async with (
        NamesrvServer(config) as namesrv,
        RemotingClient(ClientConfig(tls=True, ssl_context=client_ctx)) as tls_client,
        RemotingClient() as plain_client,
    ):
        assert (await tls_client.invoke(namesrv.address, register_request(), 3)).code == ResponseCode.SUCCESS
        # permissive: plain connections are served on the same port
        assert (await plain_client.invoke(namesrv.address, route_request("TopicTest"), 3)).code == 0


@pytest.mark.parametrize(
    ("overrides", "words"),
    [
        ({"tls_mode": "enforcing"}, "needs tls_cert_path"),
        ({"tls_mode": "enforcing", "tls_cert_path": "/nonexistent", "tls_key_path": "/nonexistent"}, "cannot load"),
    ],
)
def test_tls_without_usable_certificate_is_refused(tmp_path: Path, overrides: dict[str, str], words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        NamesrvServer(loopback_config(tmp_path, **overrides))


async def test_port_in_use_raises(namesrv: NamesrvServer, tmp_path: Path) -> None:
    clash = NamesrvServer(loopback_config(tmp_path, listen_port=namesrv.port or 0))
    with pytest.raises(OSError, match="in use"):
        async with clash:
            pass


async def test_crc_of_a_known_body() -> None:
    # what bodyCrc32 means: CRC32 of the body masked to 31 bits (UtilAll.crc32)
    request = register_request(b"abc")
    assert request.ext_fields["bodyCrc32"] == str(zlib.crc32(b"abc") & 0x7FFFFFFF)


async def test_connections_past_the_limit_are_refused(tmp_path: Path) -> None:
    config, unknown = loopback_config(tmp_path).with_properties(
        {"serverMaxConnections": "2", "serverMaxConnectionsPerAddress": "2"}
    )
    assert unknown == [] and (config.max_connections, config.max_connections_per_address) == (2, 2)
    async with NamesrvServer(config) as namesrv:
        request = RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO)
        async with RemotingClient() as a, RemotingClient() as b:
            for client in (a, b):
                assert (await client.invoke(namesrv.address, request, 5)).code == ResponseCode.SUCCESS
            async with RemotingClient() as third:
                with pytest.raises(RemotingError):
                    await third.invoke(namesrv.address, request, 5)
            assert namesrv.remoting.refused["server_limit"] == 1
        await wait_until(lambda: namesrv.remoting.connection_count == 0)
        async with RemotingClient() as later:  # the others closed: room again
            assert (await later.invoke(namesrv.address, request, 5)).code == ResponseCode.SUCCESS
