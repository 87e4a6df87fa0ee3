"""Named listeners, as Kafka's ``listeners`` / ``advertised.listeners``.

A listener is a name and an address the broker binds (``CLIENT://0.0.0.0:9092``).
Its advertised address is what the broker gives back, in Metadata,
FindCoordinator and DescribeCluster, to a client that connected through that
listener; it defaults to the bound address (``0.0.0.0`` and ``::`` become
``127.0.0.1``). Each listener has a security protocol, as Kafka's
``listener.security.protocol.map`` gives it: PLAINTEXT, SSL, SASL_PLAINTEXT or
SASL_SSL. Without the map, a listener named after a protocol has that
protocol (Kafka's default map) and any other name is PLAINTEXT; with it,
every listener must be in it.

This module only parses and checks; ``broker.security`` builds what each
protocol needs (TLS contexts, SASL mechanisms) and ``broker.server`` binds
the sockets.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DEFAULT_LISTENER = "PLAINTEXT"
PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_NAME = re.compile(r"^[A-Za-z0-9_]+$")
_WILDCARD = ("0.0.0.0", "::", "")


class ListenerError(ValueError):
    """A listener definition that cannot be used."""


@dataclass
class ListenerSpec:
    """One listener as configured: where to bind and what to advertise."""

    name: str
    host: str
    port: int
    advertised_host: str | None = None
    advertised_port: int | None = None
    protocol: str = "PLAINTEXT"  # PLAINTEXT | SSL | SASL_PLAINTEXT | SASL_SSL

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    def bind_address(self) -> tuple[str, int]:
        return (self.host or "0.0.0.0", self.port)

    def advertised(self, bound_port: int | None = None) -> tuple[str, int]:
        """The address clients of this listener are given (``bound_port`` resolves port 0)."""
        host = self.advertised_host or self.host
        if host in _WILDCARD:
            host = "127.0.0.1"
        port = self.advertised_port or bound_port or self.port
        return host, port

    def kafka(self) -> str:
        return f"{self.name}://{_fmt_host(self.host)}:{self.port}"

    def kafka_advertised(self, bound_port: int | None = None) -> str:
        host, port = self.advertised(bound_port)
        return f"{self.name}://{_fmt_host(host)}:{port}"


@dataclass
class Listener:
    """A bound listener: its spec, the port it got, the asyncio server, and its
    ``broker.security.settings.ListenerSecurity`` (None: PLAINTEXT)."""

    spec: ListenerSpec
    port: int
    server: object = None
    security: object = None

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def host(self) -> str:
        return self.spec.host

    @property
    def advertised(self) -> tuple[str, int]:
        return self.spec.advertised(self.port)

    @property
    def protocol(self) -> str:
        return self.spec.protocol


def advertised_for(ctx) -> tuple[str, int]:
    """The address to give the client of ``ctx``: its listener's advertised one."""
    listener = getattr(ctx.conn, "listener", None)
    if listener is not None:
        return listener.advertised
    return ctx.broker.advertised


def listener_name(ctx) -> str | None:
    """The name of the listener the client of ``ctx`` connected to (None: the broker's only one)."""
    return getattr(getattr(ctx.conn, "listener", None), "name", None)


def _fmt_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def parse_endpoint(text: str, *, what: str = "listener") -> tuple[str, str, int]:
    """``NAME://host:port`` -> (NAME, host, port). IPv6 hosts go in brackets."""
    raw = text.strip()
    name, sep, rest = raw.partition("://")
    if not sep:
        raise ListenerError(f"{what} {raw!r}: expected NAME://host:port, for example PLAINTEXT://127.0.0.1:9092")
    if not _NAME.match(name):
        raise ListenerError(f"{what} {raw!r}: the name may only hold letters, digits and '_'")
    if rest.startswith("["):
        host, bracket, tail = rest[1:].partition("]")
        if not bracket or not tail.startswith(":"):
            raise ListenerError(f"{what} {raw!r}: expected [ipv6]:port")
        port_text = tail[1:]
    else:
        host, colon, port_text = rest.rpartition(":")
        if not colon or ":" in host:
            raise ListenerError(f"{what} {raw!r}: expected host:port (put IPv6 addresses in brackets)")
    try:
        port = int(port_text)
    except ValueError:
        raise ListenerError(f"{what} {raw!r}: port {port_text!r} is not a number") from None
    if not 0 <= port <= 65535:
        raise ListenerError(f"{what} {raw!r}: port {port} is out of range")
    return name.upper(), host, port


def split_list(value) -> list[str]:
    """A Kafka list setting: a comma-separated string or a list of strings."""
    if isinstance(value, (list, tuple)):
        items = [str(v) for v in value]
    else:
        items = str(value).split(",")
    return [i.strip() for i in items if i.strip()]


def parse_protocol_map(value) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in split_list(value):
        name, colon, proto = item.partition(":")
        if not colon or not name.strip() or not proto.strip():
            raise ListenerError(f"listener.security.protocol.map entry {item!r}: expected NAME:PROTOCOL")
        out[name.strip().upper()] = proto.strip().upper()
    return out


def build_specs(listeners, advertised=None, protocol_map=None) -> list[ListenerSpec]:
    """Listener specs from Kafka-style lists; raises ListenerError on any inconsistency."""
    specs: list[ListenerSpec] = []
    seen: dict[str, ListenerSpec] = {}
    bound: set[tuple[str, int]] = set()
    for item in split_list(listeners):
        name, host, port = parse_endpoint(item)
        if name in seen:
            raise ListenerError(f"listener {name} is defined twice")
        if port and (host, port) in bound:
            raise ListenerError(f"listeners {name} and another one both bind {_fmt_host(host)}:{port}")
        bound.add((host, port))
        spec = ListenerSpec(name, host, port)
        seen[name] = spec
        specs.append(spec)
    if not specs:
        raise ListenerError("listeners: at least one listener is needed")
    for item in split_list(advertised or []):
        name, host, port = parse_endpoint(item, what="advertised listener")
        spec = seen.get(name)
        if spec is None:
            raise ListenerError(f"advertised listener {name} is not one of the listeners ({', '.join(seen)})")
        if spec.advertised_host is not None:
            raise ListenerError(f"advertised listener {name} is given twice")
        if host in _WILDCARD:
            raise ListenerError(f"advertised listener {name}: {host or 'an empty host'} cannot be advertised to clients")
        spec.advertised_host, spec.advertised_port = host, port or None
    check_protocols(specs, protocol_map)
    return specs


def check_protocols(specs: list[ListenerSpec], protocol_map) -> None:
    """Give each listener its security protocol (``spec.protocol``); ListenerError if one cannot have one."""
    mapping = parse_protocol_map(protocol_map) if protocol_map else None
    if mapping is not None:
        for name, proto in mapping.items():
            if proto not in PROTOCOLS:
                raise ListenerError(
                    f"listener.security.protocol.map: {name}:{proto}: unknown security protocol (expected one of {', '.join(PROTOCOLS)})"
                )
    for spec in specs:
        if mapping is None:
            spec.protocol = spec.name if spec.name in PROTOCOLS else "PLAINTEXT"
            continue
        proto = mapping.get(spec.name)
        if proto is None:
            raise ListenerError(f"listener {spec.name} is missing from listener.security.protocol.map")
        spec.protocol = proto
