"""NamesrvConfig: everything a name server is started with, validated once.

Built from keyword arguments, or from RocketMQ-style properties (a `-c` file or an
UPDATE_NAMESRV_CONFIG body) with RocketMQ's key names. Durations are seconds here and
milliseconds in properties, as in RocketMQ. A file RocketMQ's mqnamesrv starts with starts
this one: RocketMQ's keys that rmq does not act on are named in one INFO line
(`report_unused`). With enableControllerInNamesrv=true the process also runs a controller
member from the same file (`rmq namesrv` assembles the two, rmq/tools/namesrv.py); its keys
are the controller's to judge, so the name server leaves them out of its report.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rmq import rocketmq_keys
from rmq.remoting.tlsconfig import ALL_KEYS as TLS_KEYS
from rmq.remoting.tlsconfig import NEED_CLIENT_AUTH, TlsConfigError, with_tls_config_file
from rmq.rocketmq_keys import ConfigError, parse_bool, show_bool

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping

log = logging.getLogger("rmq.namesrv.config")

DEFAULT_PORT = 9876
DEFAULT_KV_CONFIG_PATH = "~/namesrv/kvConfig.json"
TLS_MODES = ("disabled", "permissive", "enforcing")


@dataclass(frozen=True, slots=True)
class NamesrvConfig:
    """Settings of one name server.

    Attributes:
      listen_host: address to bind (`bindAddress`).
      listen_port: TCP port (`listenPort`); 0 picks a free port.
      kv_config_path: the KV config file (`kvConfigPath`); None keeps KV config in memory.
      scan_interval: seconds between liveness scans (`scanNotActiveBrokerInterval`, ms).
      first_scan_delay: seconds before the first scan.
      broker_expiry: a broker silent this long is dropped (`brokerChannelExpiredTime`, ms).
      order_message_enable: answer routes with `orderTopicConf` from the
        ORDER_TOPIC_CONFIG KV namespace (`orderMessageEnable`; off by default as in RocketMQ).
      idle_timeout: close connections idle this long (`serverChannelMaxIdleTimeSeconds`).
      max_connections: connections held at once (`serverMaxConnections`; 0: no limit).
      max_connections_per_address: connections held at once from one IP address
        (`serverMaxConnectionsPerAddress`; 0: no limit).
      tls_mode: "disabled", "permissive" or "enforcing" (`tls.server.mode`).
      tls_cert_path, tls_key_path: PEM files for TLS (`tls.server.certPath`,
        `tls.server.keyPath`); needed unless NamesrvServer gets an ssl_context.
      tls_key_password: password of an encrypted key (`tls.server.keyPassword`).
      tls_need_client_auth: "none", "optional" or "require" a client certificate
        (`tls.server.need.client.auth`), verified against `tls_trust_cert_path`
        (`tls.server.trustCertPath`; None: the system's CAs).
      tls_config_file: a tls.properties file the `tls.*` keys are also read from
        (`tls.config.file`); keys given directly win.
      websocket_port: also serve RocketMQ frames over WebSocket on this port
        (`websocketPort`); None for no WebSocket listener, 0 for a free port.
      metrics_exporter_type: "PROM" serves Prometheus metrics (`metricsExporterType`).
      metrics_prom_exporter_host, metrics_prom_exporter_port: where (`metricsPromExporterHost`,
        "" = listen_host; `metricsPromExporterPort`, 0 for a free port).
      enable_controller_in_namesrv: run a controller member in the name server's process
        (`enableControllerInNamesrv`); the name server itself does nothing with it.
    """

    listen_host: str = "0.0.0.0"
    listen_port: int = DEFAULT_PORT
    kv_config_path: str | None = DEFAULT_KV_CONFIG_PATH
    scan_interval: float = 10.0
    first_scan_delay: float = 5.0
    broker_expiry: float = 120.0
    order_message_enable: bool = False
    idle_timeout: float = 120.0
    max_connections: int = 10_000
    max_connections_per_address: int = 0
    tls_mode: str = "disabled"
    tls_cert_path: str | None = None
    tls_key_path: str | None = None
    tls_key_password: str | None = None
    tls_need_client_auth: str = "none"
    tls_trust_cert_path: str | None = None
    tls_config_file: str | None = None
    websocket_port: int | None = None
    metrics_exporter_type: str = "DISABLE"
    metrics_prom_exporter_host: str = ""
    metrics_prom_exporter_port: int = 5558
    enable_controller_in_namesrv: bool = False

    def __post_init__(self) -> None:
        for name in ("listen_port", "websocket_port", "metrics_prom_exporter_port"):
            port = getattr(self, name)
            if port is not None and not 0 <= port <= 65535:
                raise ConfigError(name, f"port {port} is outside 0..65535")
        for name in ("scan_interval", "broker_expiry", "idle_timeout"):
            if getattr(self, name) <= 0:
                raise ConfigError(name, f"must be positive, got {getattr(self, name)}")
        for name in ("max_connections", "max_connections_per_address"):
            if getattr(self, name) < 0:
                raise ConfigError(name, f"must be >= 0 (0: no limit), got {getattr(self, name)}")
        if self.first_scan_delay < 0:
            raise ConfigError("first_scan_delay", f"must not be negative, got {self.first_scan_delay}")
        if self.metrics_exporter_type not in ("DISABLE", "PROM"):
            raise ConfigError("metrics_exporter_type", f"must be DISABLE or PROM, got {self.metrics_exporter_type!r}")
        if self.tls_mode not in TLS_MODES:
            raise ConfigError("tls_mode", f"must be one of {', '.join(TLS_MODES)}, got {self.tls_mode!r}")
        if self.tls_need_client_auth not in NEED_CLIENT_AUTH:
            raise ConfigError(
                "tls_need_client_auth",
                f"must be one of {', '.join(NEED_CLIENT_AUTH)}, got {self.tls_need_client_auth!r}",
            )

    def with_properties(
        self, props: Mapping[str, str], *, runtime_only: bool = False
    ) -> tuple[NamesrvConfig, list[str]]:
        """A copy with RocketMQ-named properties applied, and the keys it did not know.

        Raises ConfigError naming the key for a bad value, and with `runtime_only` for
        a key that only takes effect at startup.
        """
        changes: dict[str, Any] = {}
        unknown: list[str] = []
        if not runtime_only:
            try:
                props = with_tls_config_file(props, _KEYS)
            except TlsConfigError as exc:
                raise ConfigError(exc.key, exc.message) from None
        for key, text in props.items():
            if key in TLS_KEYS and key not in _KEYS:
                continue  # tls.client.* and the like: a name server makes no TLS connections
            entry = _KEYS.get(key)
            if entry is None:
                unknown.append(key)
                continue
            field_name, parse, _, runtime = entry
            if runtime_only and not runtime:
                raise ConfigError(key, "can only be set at startup")
            try:
                changes[field_name] = parse(text.strip())
            except ValueError as exc:
                raise ConfigError(key, f"bad value {text!r} ({exc})") from None
        try:
            return dataclasses.replace(self, **changes), unknown
        except ConfigError as exc:
            raise ConfigError(_PROPERTY_OF.get(exc.key, exc.key), exc.message) from None

    def to_properties(self) -> dict[str, str]:
        """The settings under RocketMQ's key names, sorted (GET_NAMESRV_CONFIG)."""
        out = {}
        for key, (field_name, _, show, _) in sorted(_KEYS.items()):
            value = getattr(self, field_name)
            out[key] = "" if value is None else show(value)
        return out


def report_unused(keys: Iterable[str], source: str, *, controller_beside: bool = False) -> None:
    """Log the keys `with_properties` did not know: RocketMQ's own (the name server's and
    its controller's) in one INFO line, any other key in a WARNING naming the closest one.
    With `controller_beside` (enableControllerInNamesrv) the controller's keys are left to
    the controller's own report."""
    if controller_beside:
        keys = [k for k in keys if k not in rocketmq_keys.CONTROLLER]
    rocketmq_keys.report_unused(
        keys,
        honoured=_KEYS,
        accepted=rocketmq_keys.NAMESRV | rocketmq_keys.CONTROLLER,
        source=source,
        logger=log,
    )


def _millis(text: str) -> float:
    return int(text) / 1000


def _optional(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    return lambda text: parse(text) if text else None


def _show_millis(value: float) -> str:
    return str(round(value * 1000))


def _metrics_type(text: str) -> str:
    """RocketMQ's names or numbers: DISABLE (0) and PROM (2); OTLP_GRPC and LOG are not served."""
    value = {"0": "DISABLE", "2": "PROM"}.get(text, text.upper())
    if value not in ("DISABLE", "PROM"):
        raise ValueError("must be DISABLE or PROM")
    return value


def _show_seconds(value: float) -> str:
    return str(round(value))


# property → (field, parse, format, may change at runtime)
_KEYS: dict[str, tuple[str, Callable[[str], Any], Callable[[Any], str], bool]] = {
    "bindAddress": ("listen_host", str, str, False),
    "listenPort": ("listen_port", int, str, False),
    "kvConfigPath": ("kv_config_path", _optional(str), str, False),
    "scanNotActiveBrokerInterval": ("scan_interval", _millis, _show_millis, True),
    "brokerChannelExpiredTime": ("broker_expiry", _millis, _show_millis, True),
    "orderMessageEnable": ("order_message_enable", parse_bool, show_bool, True),
    "serverChannelMaxIdleTimeSeconds": ("idle_timeout", lambda t: float(int(t)), _show_seconds, False),
    "serverMaxConnections": ("max_connections", int, str, False),
    "serverMaxConnectionsPerAddress": ("max_connections_per_address", int, str, False),
    "tls.server.mode": ("tls_mode", str.lower, str, False),
    "tls.server.certPath": ("tls_cert_path", _optional(str), str, False),
    "tls.server.keyPath": ("tls_key_path", _optional(str), str, False),
    "tls.server.keyPassword": ("tls_key_password", _optional(str), lambda v: "******" if v else "", False),
    "tls.server.need.client.auth": ("tls_need_client_auth", lambda t: t.lower() or "none", str, False),
    "tls.server.trustCertPath": ("tls_trust_cert_path", _optional(str), str, False),
    "tls.config.file": ("tls_config_file", _optional(str), str, False),
    "websocketPort": ("websocket_port", _optional(int), str, False),
    "metricsExporterType": ("metrics_exporter_type", _metrics_type, str, False),
    "metricsPromExporterHost": ("metrics_prom_exporter_host", str, str, False),
    "metricsPromExporterPort": ("metrics_prom_exporter_port", int, str, False),
    "enableControllerInNamesrv": ("enable_controller_in_namesrv", parse_bool, show_bool, False),
}
_PROPERTY_OF = {field_name: key for key, (field_name, *_) in _KEYS.items()}
KEYS = frozenset(_KEYS)  # the keys the name server acts on
