"""From the security settings (Kafka's names) to one ``ListenerSecurity`` per listener.

Every ``ssl.*``/``sasl.*`` setting and ``connections.max.reauth.ms`` may be
given broker-wide or for one listener (``listener.name.<listener>.<name>``,
which wins), as in Kafka; ``ssl.client.auth`` applies to a SASL_SSL listener
only when given with its prefix (Kafka's rule). Per listener and mechanism:
``listener.name.<l>.<mechanism>.sasl.jaas.config`` and
``listener.name.<l>.<mechanism>.connections.max.reauth.ms``.

JAAS lines, by mechanism:

- PLAIN: ``PlainLoginModule`` with ``user_<name>="<password>"`` options, the
  users who may log in (``username``/``password``, Kafka's own inter-broker
  login, are accepted and unused). Passwords are kept only as HMACs.
- SCRAM-SHA-256/512: ``ScramLoginModule``; kafkalite also reads
  ``user_<name>="<password>"`` options there (Kafka does not: its SCRAM users
  come from ``kafka-storage format --add-scram`` or kafka-configs), derived
  into salted credentials (4096 iterations) at start. The line is optional.
- OAUTHBEARER: ``OAuthBearerLoginModule``; the unsecured validator's options
  (``unsecuredValidatorPrincipalClaimName``, ``...ScopeClaimName``,
  ``...RequiredScope``, ``...AllowableClockSkewMs``). The line is optional.

Errors name the setting (``SecurityConfigError.key``, a config key) and never
quote a secret.
"""

from __future__ import annotations

import secrets
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..javahash import java_string_hash
from ..javahash import JavaHashTable
from . import MECHANISMS, SCRAM_MECHANISMS, jaas, mechanisms, scram
from .tls import TlsError, server_context

LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "OAUTHBEARER": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule",
}
_OAUTH_OPTIONS = ("unsecuredValidatorPrincipalClaimName", "unsecuredValidatorScopeClaimName", "unsecuredValidatorRequiredScope", "unsecuredValidatorAllowableClockSkewMs")


class SecurityConfigError(ValueError):
    def __init__(self, key: str | None, message: str) -> None:
        super().__init__(message)
        self.key = key


@dataclass
class ListenerSecurity:
    name: str
    protocol: str
    ssl_context: ssl.SSLContext | None = None
    client_auth: str = "none"
    mechanisms: tuple[str, ...] = ()
    handshake_mechanisms: list[str] = field(default_factory=list)  # in the order Kafka lists them
    plain_users: dict[str, bytes] = field(default_factory=dict, repr=False)
    plain_key: bytes = field(default=b"", repr=False)
    oauth_options: dict[str, str] = field(default_factory=dict)
    reauth_ms: dict[str, int] = field(default_factory=dict)
    max_receive: int = 524_288

    @property
    def sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    def server(self, mechanism: str, store: scram.ScramStore) -> mechanisms.MechanismServer:
        if mechanism == "PLAIN":
            return mechanisms.PlainServer(self.plain_users, self.plain_key)
        if mechanism in SCRAM_MECHANISMS:
            return mechanisms.ScramServer(mechanism, store)
        return mechanisms.OAuthBearerServer(self.oauth_options)


@dataclass
class Security:
    listeners: dict[str, ListenerSecurity]
    scram_users: dict[str, dict[str, scram.ScramCredential]] = field(default_factory=dict, repr=False)
    handshake_timeout_s: float = 10.0


def handshake_order(mechs) -> list[str]:
    """``new ArrayList<>(new HashSet<>(enabledMechanisms))``: the order Kafka's SaslHandshake answer lists them."""
    table = JavaHashTable.for_mappings(max(len(mechs), 12))
    for m in mechs:
        table.put(m, java_string_hash(m))
    return table.keys()


def _listener_key(listener: str, setting: str, names: Mapping[str, str]) -> str:
    return f"listener.name.{listener.lower()}.{names.get(setting, setting)}"


def build_security(cfg, specs, per_listener: Mapping[str, str]) -> Security:
    """One ``ListenerSecurity`` per listener of ``specs``, from the broker's settings ``cfg``.
    ``per_listener`` maps each setting a listener may have of its own (config key) to the
    name messages give it (``broker/config.py`` knows them; this module does not import it)."""
    names = {s.name for s in specs}
    for listener in cfg.listener_settings:
        if listener not in names:
            some = next(iter(cfg.listener_settings[listener]))
            raise SecurityConfigError(_listener_key(listener, some, per_listener), f"listener {listener} is not one of the listeners ({', '.join(sorted(names))})")
    out = Security({}, handshake_timeout_s=cfg.ssl_handshake_timeout_ms / 1000)
    scram_passwords: dict[tuple[str, str], tuple[bytes, str]] = {}
    check_key = secrets.token_bytes(16)
    for spec in specs:
        own = cfg.listener_settings.get(spec.name, {})

        def value(key: str, own=own):
            return own[key] if key in own else getattr(cfg, key)

        def where(key: str, own=own, spec=spec) -> str:
            return _listener_key(spec.name, key, per_listener) if key in own else key

        sec = ListenerSecurity(spec.name, spec.protocol)
        out.listeners[spec.name] = sec
        if spec.tls:
            settings = {k: value(k) for k in per_listener if k.startswith("ssl_")}
            if spec.protocol == "SASL_SSL":  # Kafka: broker-wide ssl.client.auth is for SSL listeners only
                sec.client_auth = own.get("ssl_client_auth", "none")
            else:
                sec.client_auth = value("ssl_client_auth")
            try:
                sec.ssl_context = server_context(settings, sec.client_auth)
            except TlsError as exc:
                raise SecurityConfigError(where(exc.key), f"listener {spec.name} ({spec.protocol}): {exc}") from None
        if not spec.sasl:
            continue
        sec.max_receive = value("sasl_server_max_receive_size")
        mechs = [m.strip().upper() for m in value("sasl_enabled_mechanisms") or () if m.strip()]
        if not mechs:
            raise SecurityConfigError(
                where("sasl_enabled_mechanisms"),
                f"listener {spec.name} ({spec.protocol}) needs sasl.enabled.mechanisms: one or more of {', '.join(MECHANISMS)}",
            )
        for m in mechs:
            if m not in MECHANISMS:
                raise SecurityConfigError(where("sasl_enabled_mechanisms"), f"SASL mechanism {m} is not served (kafkalite serves {', '.join(MECHANISMS)})")
        sec.mechanisms = tuple(dict.fromkeys(mechs))
        sec.handshake_mechanisms = handshake_order(sec.mechanisms)
        sec.plain_key = secrets.token_bytes(32)
        default_reauth = value("connections_max_reauth_ms")
        for m in sec.mechanisms:
            sec.reauth_ms[m] = own.get(f"{m.lower()}.connections.max.reauth.ms", default_reauth)
            jaas_key = f"{m.lower()}.sasl.jaas.config"
            text = own.get(jaas_key)
            full_key = f"listener.name.{spec.name.lower()}.{jaas_key}"
            if text is None:
                if m == "PLAIN":
                    raise SecurityConfigError(
                        None,
                        f"listener {spec.name}: PLAIN needs its users in {full_key} "
                        f'(org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";)',
                    )
                continue
            try:
                modules = jaas.parse(text)
            except jaas.JaasError as exc:
                raise SecurityConfigError(full_key, f"not a JAAS configuration: {exc}") from None
            if len(modules) != 1:
                raise SecurityConfigError(full_key, f"expected exactly one login module, got {len(modules)}")
            module = modules[0]
            if module.name != LOGIN_MODULES[m]:
                raise SecurityConfigError(full_key, f"{m} takes {LOGIN_MODULES[m]}, not {module.name}")
            users = {k[5:]: v for k, v in module.options.items() if k.startswith("user_") and len(k) > 5}
            if m == "PLAIN":
                if not users:
                    raise SecurityConfigError(full_key, 'no user_<name>="<password>" options: nobody could log in')
                sec.plain_users = {u: mechanisms.plain_password_hash(sec.plain_key, p) for u, p in users.items()}
            elif m in SCRAM_MECHANISMS:
                for u, p in users.items():
                    check = mechanisms.plain_password_hash(check_key, p)
                    seen = scram_passwords.get((u, m))
                    if seen is not None and seen[0] != check:
                        raise SecurityConfigError(full_key, f"{m} user {u} has another password in {seen[1]}; SCRAM users are broker-wide")
                    if seen is None:
                        scram_passwords[(u, m)] = (check, full_key)
                        out.scram_users.setdefault(u, {})[m] = scram.from_password(m, p)
            else:
                opts = {k: v for k, v in module.options.items() if k in _OAUTH_OPTIONS}
                skew = opts.get("unsecuredValidatorAllowableClockSkewMs", "0").strip() or "0"
                if not skew.isdigit():
                    raise SecurityConfigError(full_key, "unsecuredValidatorAllowableClockSkewMs must be a number of milliseconds, 0 or more")
                sec.oauth_options = opts
    return out
