"""Secured test brokers: generated certificates and users, and the client settings to match.

    from broker.testing import BrokerThread, secured

    sec = secured("SASL_SSL", mechanisms=("SCRAM-SHA-512",), tmp_dir=tmp_path)
    with BrokerThread(settings=sec.settings) as broker:
        Producer({"bootstrap.servers": broker.bootstrap_servers, **sec.librdkafka()})
        KafkaProducer(bootstrap_servers=broker.bootstrap_servers, **sec.kafka_python())
        AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers, **sec.aiokafka())
        sec.java()  # kafka-clients properties

``secured(protocol)`` gives one listener of that protocol (named after it);
for SSL protocols a fresh CA and broker certificate (``broker.security.certs``,
which needs the ``cryptography`` package) and with ``client_auth`` a client
certificate per user; for SASL protocols the enabled mechanisms with one
generated user (``alice``, a random password) or ``users`` for PLAIN and
SCRAM (kafkalite's ``user_<name>`` JAAS options), and OAUTHBEARER's unsecured
tokens, whose principal is the user's name. ``plaintext=True`` adds a
PLAINTEXT listener after it (``broker.listeners["PLAINTEXT"]``), for admin
tools that should not need credentials. ``hostnames`` adds names to the
broker certificate's (it always has localhost, 127.0.0.1 and ::1).

ACLs: ``acls=[...]`` and/or ``super_users=[...]`` turn Kafka's
StandardAuthorizer on (``authorizer.class.name``, ``super.users``), and the
broker starts with those bindings (``BrokerThread(settings=sec.settings,
acls=sec.acls)``; the pytest plugin does that). A binding is a
``broker.security.authorizer.AclBinding``, or a dict by its field names with
Kafka's words, where only ``resource_type``, ``name`` and ``operation`` are
needed (``pattern_type`` LITERAL, ``principal`` the first user's, ``host``
``*``, ``permission`` ALLOW)::

    secured("SASL_PLAINTEXT", acls=[{"resource_type": "TOPIC", "name": "orders-", "pattern_type": "PREFIXED", "operation": "WRITE"}],
            super_users=["User:admin"], plaintext=True)

With ACLs on, the PLAINTEXT listener's anonymous clients (``plaintext=True``)
are super users, as the admin tools it is for need.
"""

from __future__ import annotations

import base64
import json
import math
import secrets
import ssl
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import MECHANISMS

_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "OAUTHBEARER": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule",
}


def jaas_line(module: str, options: dict[str, str]) -> str:
    quoted = " ".join(f'{k}="{v.replace(chr(92), chr(92) * 2).replace(chr(34), chr(92) + chr(34))}"' for k, v in options.items())
    return f"{module} required {quoted};".replace(" required ;", " required;")


def unsecured_jwt(subject: str, *, lifetime_s: float = 3600, issued_at: float | None = None, claims: dict | None = None) -> str:
    """An unsecured JWS (``alg: none``) as Kafka's OAuthBearerUnsecuredLoginCallbackHandler makes them.

    Its Base64URL text never holds ``-`` or ``_``: Kafka 4.1's validator decodes
    with the plain Base64 alphabet and refuses those (kafkalite does not), so
    the JSON is padded with spaces until neither appears; any broker takes it."""
    iat = math.floor((time.time() if issued_at is None else issued_at) * 1000) / 1000  # never in the future, even by a rounding

    def b64(obj) -> str:
        text = json.dumps(obj, separators=(",", ":"))
        for pad in range(8):
            out = base64.urlsafe_b64encode(("{" + " " * pad + text[1:]).encode()).decode().rstrip("=")
            if "-" not in out and "_" not in out:
                return out
        return out

    body = {"sub": subject, "iat": iat, "exp": round(iat + lifetime_s, 3), **(claims or {})}
    return f"{b64({'alg': 'none'})}.{b64(body)}."


@dataclass
class Secured:
    """A secured broker's settings and what clients need to connect to it."""

    protocol: str
    mechanisms: tuple[str, ...]
    users: dict[str, str]
    settings: dict[str, object]
    certs: object = None  # broker.security.certs.Certs for SSL protocols
    client_auth: str = "none"
    extra: dict = field(default_factory=dict)
    acls: list = field(default_factory=list)  # AclBindings the broker starts with (ACLs on when given)

    @property
    def user(self) -> str:
        return next(iter(self.users))

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    def _pick(self, user, mechanism):
        user = user or self.user
        mechanism = mechanism or (self.mechanisms[0] if self.mechanisms else None)
        return user, self.users.get(user, ""), mechanism

    def librdkafka(self, user: str | None = None, mechanism: str | None = None) -> dict:
        """confluent-kafka (librdkafka) settings."""
        conf: dict = {"security.protocol": self.protocol}
        user, password, mechanism = self._pick(user, mechanism)
        if self.tls:
            conf["ssl.ca.location"] = str(self.certs.ca)
            if self.client_auth != "none" and user in self.certs.clients:
                _, key, cert = self.certs.clients[user]
                conf.update({"ssl.certificate.location": str(cert), "ssl.key.location": str(key)})
        if self.sasl:
            conf["sasl.mechanism"] = mechanism
            if mechanism == "OAUTHBEARER":  # librdkafka's own unsecured tokens may hold '-' or '_', which Kafka refuses
                conf["oauth_cb"] = lambda _config, user=user: (unsecured_jwt(user), time.time() + 3600, user)
            else:
                conf.update({"sasl.username": user, "sasl.password": password})
        return conf

    def ssl_context(self, user: str | None = None) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.certs.ca))
        user = user or self.user
        if self.client_auth != "none" and user in self.certs.clients:
            _, key, cert = self.certs.clients[user]
            ctx.load_cert_chain(str(cert), str(key))
        return ctx

    def _python(self, user, mechanism, token_provider) -> dict:
        conf: dict = {"security_protocol": self.protocol}
        user, password, mechanism = self._pick(user, mechanism)
        if self.tls:
            conf["ssl_context"] = self.ssl_context(user)
        if self.sasl:
            conf["sasl_mechanism"] = mechanism
            if mechanism == "OAUTHBEARER":
                conf["sasl_oauth_token_provider"] = token_provider(user)
            else:
                conf.update({"sasl_plain_username": user, "sasl_plain_password": password})
        return conf

    def kafka_python(self, user: str | None = None, mechanism: str | None = None) -> dict:
        """kafka-python keyword arguments."""
        from kafka.net.sasl.oauth import AbstractTokenProvider

        class _Tokens(AbstractTokenProvider):
            def __init__(self, sub):
                self.sub = sub

            def token(self):
                return unsecured_jwt(self.sub)

        return self._python(user, mechanism, _Tokens)

    def aiokafka(self, user: str | None = None, mechanism: str | None = None) -> dict:
        """aiokafka keyword arguments."""
        from aiokafka.abc import AbstractTokenProvider

        class _Tokens(AbstractTokenProvider):
            def __init__(self, sub):
                self.sub = sub

            async def token(self):
                return unsecured_jwt(self.sub)

        return self._python(user, mechanism, _Tokens)

    def java(self, user: str | None = None, mechanism: str | None = None) -> dict[str, str]:
        """kafka-clients properties (Kafka's own Java client and tools)."""
        props = {"security.protocol": self.protocol}
        user, password, mechanism = self._pick(user, mechanism)
        if self.tls:
            props.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": str(self.certs.ca)})
            if self.client_auth != "none" and user in self.certs.clients:
                props.update({"ssl.keystore.type": "PEM", "ssl.keystore.location": str(self.certs.clients[user][0])})
        if self.sasl:
            props["sasl.mechanism"] = mechanism
            if mechanism == "OAUTHBEARER":
                props["sasl.jaas.config"] = jaas_line(_MODULES["OAUTHBEARER"], {"unsecuredLoginStringClaim_sub": user})
            else:
                module = _MODULES["PLAIN"] if mechanism == "PLAIN" else _MODULES["SCRAM"]
                props["sasl.jaas.config"] = jaas_line(module, {"username": user, "password": password})
        return props


def secured(
    protocol: str = "SASL_SSL",
    *,
    mechanisms=("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"),
    users: dict[str, str] | None = None,
    client_auth: str = "none",
    tmp_dir: str | Path | None = None,
    plaintext: bool = False,
    host: str = "127.0.0.1",
    hostnames=(),
    acls=None,
    super_users=None,
) -> Secured:
    """Settings for a broker with one ``protocol`` listener and generated credentials (see the module docstring)."""
    protocol = protocol.upper()
    if protocol not in ("SSL", "SASL_PLAINTEXT", "SASL_SSL"):
        raise ValueError(f"protocol {protocol!r}: expected SSL, SASL_PLAINTEXT or SASL_SSL")
    users = dict(users) if users else {"alice": secrets.token_urlsafe(12)}
    listeners = f"{protocol}://{host}:0" + (f",PLAINTEXT://{host}:0" if plaintext else "")
    settings: dict[str, object] = {"listeners": listeners}
    certs = None
    if protocol in ("SSL", "SASL_SSL"):
        from .certs import generate

        d = Path(tmp_dir) if tmp_dir is not None else Path(tempfile.mkdtemp(prefix="kafkalite-certs-"))
        certs = generate(d / "certs", hostnames=hostnames, clients=list(users) if client_auth != "none" else ())
        settings.update({"ssl.keystore.location": str(certs.broker), "ssl.truststore.location": str(certs.ca)})
        if client_auth != "none":
            key = "ssl.client.auth" if protocol == "SSL" else f"listener.name.{protocol.lower()}.ssl.client.auth"
            settings[key] = client_auth
    mechs: tuple[str, ...] = ()
    if protocol.startswith("SASL_"):
        mechs = tuple(m.upper() for m in mechanisms)
        for m in mechs:
            if m not in MECHANISMS:
                raise ValueError(f"mechanism {m!r}: expected one of {', '.join(MECHANISMS)}")
        settings["sasl.enabled.mechanisms"] = ",".join(mechs)
        prefix = f"listener.name.{protocol.lower()}"
        for m in mechs:
            if m == "OAUTHBEARER":
                continue
            module = _MODULES["PLAIN"] if m == "PLAIN" else _MODULES["SCRAM"]
            settings[f"{prefix}.{m.lower()}.sasl.jaas.config"] = jaas_line(module, {f"user_{u}": p for u, p in users.items()})
    bindings: list = []
    if acls is not None or super_users is not None:
        from .authorizer import CLASS_NAME

        bindings = [acl_binding(a, f"User:{next(iter(users))}") for a in acls or ()]
        supers = list(super_users or ()) + (["User:ANONYMOUS"] if plaintext else [])
        settings["authorizer.class.name"] = CLASS_NAME
        if supers:
            settings["super.users"] = ";".join(supers)
    return Secured(protocol, mechs, users, settings, certs, client_auth, acls=bindings)


def acl_binding(spec, principal: str = "User:ANONYMOUS"):
    """An AclBinding from one (returned as is) or from a dict of its fields by name (Kafka's words:
    ``TOPIC``, ``PREFIXED``, ``WRITE``, ``DENY``); ``principal`` when the dict names none."""
    from .authorizer import AclBinding

    if isinstance(spec, AclBinding):
        return spec
    d = {"pattern_type": "LITERAL", "principal": principal, "host": "*", "permission": "ALLOW", **spec}
    return AclBinding.from_json({k: v.upper() if k in ("resource_type", "pattern_type", "operation", "permission") else v for k, v in d.items()})
