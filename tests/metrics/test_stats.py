"""BrokerStats (sans-IO, a fake clock) and RpcLatency, and the metrics config keys."""

from __future__ import annotations

import pytest

from rmq.broker.config import BrokerConfig, ConfigError
from rmq.broker.processors.admin import human_bytes
from rmq.broker.stats import TYPED_BUCKETS, BrokerStats
from rmq.metrics.latency import LATENCY_BUCKETS_MS, RpcLatency, cumulative
from rmq.namesrv.config import ConfigError as NamesrvConfigError
from rmq.namesrv.config import NamesrvConfig
from rmq.protocol import RPC_ONEWAY
from rmq.store.results import StoreStats


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_tps_over_three_windows() -> None:
    clock = FakeClock()
    stats = BrokerStats(clock)
    stats.sample()
    # 10 messages a second for 10 minutes, sampled every 10 s
    for _ in range(60):
        clock.now += 10
        stats.count_in("T", 100, 100 * 50)
        stats.sample()
    assert stats.tps("put") == "10.00 10.00 10.00"
    # then 10 s of 100 a second: the 10 s figure follows at once, the longer ones slowly
    clock.now += 10
    stats.count_in("T", 1000, 1000 * 50)
    figures = [float(x) for x in stats.tps(1).split()]
    assert figures[0] == 100.0
    assert figures[1] == pytest.approx((1000 + 5 * 100) / 60)
    assert figures[2] == pytest.approx((1000 + 59 * 100) / 600)
    assert stats.tps(2) == "0.00 0.00 0.00"


def test_young_broker_rates_from_its_first_sample() -> None:
    clock = FakeClock()
    stats = BrokerStats(clock)
    assert stats.tps("put") == "0.00 0.00 0.00"  # no sample yet
    stats.sample()
    clock.now += 2
    stats.count_out("g", "T", 0, 30, 3000, 30)
    assert stats.consume_tps("g") == 15.0
    assert stats.consume_tps("other") == 0.0
    assert stats.tps("get") == "15.00 15.00 15.00"


def test_consume_tps_per_group_over_a_minute() -> None:
    clock = FakeClock()
    stats = BrokerStats(clock)
    stats.sample()
    for _ in range(12):  # two minutes: group a pulls 50 every 10 s, b only in the first minute
        clock.now += 10
        stats.count_out("a", "T", 0, 50, 500, 0)
        if clock.now < 1060:
            stats.count_out("b", "T", 1, 50, 500, 0)
        stats.sample()
    assert stats.consume_tps("a") == 5.0
    assert stats.consume_tps("b") == 0.0


def test_found_and_miss_from_the_store_counters() -> None:
    class StoreStats:
        get_message_times_total_found = 0
        get_message_times_total_miss = 0

    clock = FakeClock()
    stats = BrokerStats(clock)
    stats.store_stats = StoreStats()
    stats.sample()
    clock.now += 10
    stats.store_stats.get_message_times_total_found = 40
    stats.store_stats.get_message_times_total_miss = 20
    assert stats.tps("found").split()[0] == "4.00"
    assert stats.tps("miss").split()[0] == "2.00"


def test_message_size_buckets_and_average() -> None:
    stats = BrokerStats(FakeClock())
    stats.count_in("T", 1, 1024)  # le 1 KiB
    stats.count_in("T", 1, 1025)  # le 4 KiB
    stats.count_in("T", 4, 4 * 600 * 1024)  # a batch of four 600 KiB messages: le 1 MiB
    stats.count_in("T", 1, 5 * 1024 * 1024)  # above 4 MiB
    buckets = stats.typed_in["T", "normal"][TYPED_BUCKETS:]
    assert buckets == [1, 1, 0, 4, 0, 0, 1]
    assert stats.put_total == 7
    assert stats.average_put_size() == pytest.approx((1024 + 1025 + 4 * 600 * 1024 + 5 * 1024 * 1024) / 7)


def test_rpc_latency_buckets() -> None:
    clock = FakeClock()
    latency = RpcLatency(clock)
    for ms in (0.5, 1.0, 2.0, 50.0, 5000.0):
        latency.record(310, 0, ms)
    latency.record(11, 19, 1.5)
    entry = latency.table[310, 0, False, False]
    assert entry[0] == 5 and entry[1] == pytest.approx(5053.5)
    pairs = cumulative(LATENCY_BUCKETS_MS, entry[2:])
    assert pairs[0] == ("1.0", 2) and pairs[1] == ("3.0", 3) and pairs[5] == ("100.0", 4)
    assert pairs[-1] == ("+Inf", 5)

    class Response:
        code = 0

    class Request:
        def __init__(self, code: int, flag: int = 0) -> None:
            self.code, self.flag = code, flag

    class Context:
        def __init__(self, received_at: float, suspended: bool = False) -> None:
            self.received_at, self.suspended = received_at, suspended

    latency.observe(Request(310), Response(), Context(clock.now - 0.002))  # arrived 2 ms ago
    latency.observe(Request(34, RPC_ONEWAY), Response(), Context(clock.now))  # a oneway request
    latency.observe(Request(11), Response(), Context(clock.now, suspended=True))  # a parked pull
    latency.observe(Request(34), None, Context(clock.now))  # answered with nothing: not recorded
    assert latency.table[310, 0, False, False][0] == 6
    assert latency.table[34, 0, False, True][0] == 1
    assert latency.table[11, 0, True, False][0] == 1
    assert len(latency.table) == 4


@pytest.mark.parametrize(
    ("props", "key"),
    [
        ({"metricsExporterType": "yes"}, "metricsExporterType"),
        ({"metricsPromExporterPort": "70000"}, "metricsPromExporterPort"),
        ({"metricsPromExporterPort": "-1"}, "metricsPromExporterPort"),
        ({"metricsPromExporterPort": "port"}, "metricsPromExporterPort"),
    ],
)
def test_bad_metrics_settings_name_the_key(props: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigError, match=key):
        BrokerConfig.from_properties({"brokerName": "b", **props}, environ={})
    with pytest.raises(NamesrvConfigError, match=key):
        NamesrvConfig().with_properties(props)


def test_metrics_settings() -> None:
    config = BrokerConfig.from_properties({"brokerName": "b"}, environ={})
    assert not config.prometheus_enabled and config.metrics_prom_exporter_port == 5557
    config = BrokerConfig.from_properties({"brokerName": "b", "metricsExporterType": "PROM"}, environ={})
    assert config.prometheus_enabled
    assert BrokerConfig.from_properties({"brokerName": "b", "metricsExporterType": "2"}, environ={}).prometheus_enabled
    # RocketMQ's other exporters start a broker that exports nothing, with a warning
    otlp = BrokerConfig.from_properties({"brokerName": "b", "metricsExporterType": "OTLP_GRPC"}, environ={})
    assert not otlp.prometheus_enabled
    with pytest.raises(NamesrvConfigError, match="metricsExporterType"):
        NamesrvConfig().with_properties({"metricsExporterType": "OTLP_GRPC"})  # rmq's own key on a name server
    namesrv, unknown = NamesrvConfig().with_properties({"metricsExporterType": "prom", "metricsPromExporterPort": "0"})
    assert namesrv.metrics_exporter_type == "PROM" and namesrv.metrics_prom_exporter_port == 0 and not unknown


def test_stats_data_minute_hour_day() -> None:
    """VIEW_BROKER_STATS_DATA's figures: sums over the last minute, hour and day, TPS and
    messages per call, from the 10 s samples and the coarser rings."""
    clock = FakeClock()
    stats = BrokerStats(clock)
    stats.sample()
    assert stats.stats_data("TOPIC_PUT_NUMS", "T", "C") is None  # never counted
    # 25 hours: one send of 10 messages every 10 s, pulled by group g in pulls of 20
    for step in range(25 * 360):
        clock.now += 10
        stats.count_in("T", 10, 10 * 100)
        if step % 2:
            stats.count_out("g", "T", 0, 20, 20 * 100, 0)
        stats.sample()
    put = stats.stats_data("TOPIC_PUT_NUMS", "T", "C")
    assert put is not None
    assert put["statsMinute"] == {"sum": 60, "tps": 1.0, "avgpt": 10.0}
    assert put["statsHour"] == {"sum": 3600, "tps": 1.0, "avgpt": 10.0}
    assert put["statsDay"]["sum"] == 86400 and put["statsDay"]["tps"] == 1.0
    size = stats.stats_data("TOPIC_PUT_SIZE", "T", "C")
    assert size is not None and size["statsMinute"]["sum"] == 6000
    got = stats.stats_data("GROUP_GET_NUMS", "T@g", "C")
    assert got is not None and got["statsMinute"] == {"sum": 60, "tps": 1.0, "avgpt": 20.0}
    assert stats.stats_data("GROUP_GET_NUMS", "T@other", "C") is None
    broker = stats.stats_data("BROKER_PUT_NUMS", "C", "C")
    assert broker is not None and broker["statsHour"]["sum"] == 3600
    assert stats.stats_data("BROKER_PUT_NUMS", "OtherCluster", "C") is None
    assert stats.stats_data("NO_SUCH_STATS", "T", "C") is None


def test_stats_data_on_a_young_broker() -> None:
    clock = FakeClock()
    stats = BrokerStats(clock)
    stats.sample()
    clock.now += 5
    stats.count_in("T", 3, 300)
    data = stats.stats_data("TOPIC_PUT_NUMS", "T", "C")
    assert data is not None
    for window in ("statsMinute", "statsHour", "statsDay"):  # everything since the start
        assert data[window] == {"sum": 3, "tps": 0.6, "avgpt": 3.0}


@pytest.mark.parametrize(
    ("count", "text"),
    [(0, "0 B"), (1023, "1023 B"), (1024, "1.0 KiB"), (1536, "1.5 KiB"), (20 * 1024**3, "20.0 GiB")],
)
def test_human_bytes_as_java_prints_them(count: int, text: str) -> None:
    assert human_bytes(count) == text  # MixAll.humanReadableByteCount(count, false)


def test_put_time_distribution_as_store_stats_service() -> None:
    stats = StoreStats()
    for ms in (0, 0, 1, 9, 10, 49, 10_000):
        stats.record_put_time(ms)
    assert stats.put_distribute_text() == (
        "[<=0ms]:2 [0~10ms]:2 [10~50ms]:2 [50~100ms]:0 [100~200ms]:0 [200~500ms]:0 [500ms~1s]:0 "
        "[1~2s]:0 [2~3s]:0 [3~4s]:0 [4~5s]:0 [5~10s]:0 [10s~]:1 "
    )
    assert stats.put_message_entire_time_max == 10_000
    assert stats.put_latency(0.5) == 10.0  # the 4th of 7 appends is in [0~10ms]
    assert stats.put_latency(0.99) == 10000.0
