"""TLS and SASL for kafkalite's listeners (docs/security.md).

- ``settings``: the security settings (Kafka's names) turned into one
  ``ListenerSecurity`` per listener: its TLS context, its SASL mechanisms and
  the users each one knows. Built when the configuration is checked, so a bad
  key file or JAAS line stops the broker before it starts.
- ``tls``: ``ssl.SSLContext`` from PEM key and trust stores, and the client
  certificate's subject as Kafka's default principal builder names it.
- ``jaas``: the ``sasl.jaas.config`` syntax.
- ``scram``: RFC 5802 arithmetic, and the SCRAM credentials kept in the data
  directory (AlterUserScramCredentials).
- ``mechanisms``: the server side of PLAIN, SCRAM-SHA-256/512 and
  OAUTHBEARER (unsecured JWS tokens), sans-IO.
- ``authenticator``: a SASL connection's state before it has authenticated
  (Kafka's SaslServerAuthenticator: ApiVersions, SaslHandshake,
  SaslAuthenticate or v0 raw tokens) and its session after (KIP-368).
- ``certs``: ``kafkalite certs``, a development CA and certificates.

A connection's principal (``KafkaConnection.principal``, ``ctx.principal``)
is ``User:<name>`` after SASL, ``User:<subject DN>`` for an SSL client that
presented a certificate, and ``User:ANONYMOUS`` otherwise, as Kafka's
``DefaultKafkaPrincipalBuilder`` gives it.
"""

from __future__ import annotations

ANONYMOUS = "User:ANONYMOUS"
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
