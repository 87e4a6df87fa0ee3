"""TLS for SSL and SASL_SSL listeners: a server ``ssl.SSLContext`` from PEM, and client principals.

Key store: one PEM file holding the private key (PKCS#8, encrypted or not)
and the certificate chain (``ssl.keystore.location``), or both inline
(``ssl.keystore.key``, ``ssl.keystore.certificate.chain``), as Kafka's PEM key
store takes them. Inline PEM is handed to OpenSSL through an anonymous
in-memory file (``memfd_create``; a private temporary file elsewhere) that is
gone once loaded. Trust store: PEM CA certificates (``ssl.truststore.location``
or inline ``ssl.truststore.certificates``), needed for client certificates.
TLS 1.2 and 1.3 only (``ssl.enabled.protocols``).

The principal of an SSL client that presented a certificate is
``User:`` + its subject as ``X500Principal.getName()`` writes it (RFC 2253:
the most specific part first, ``CN=client,OU=eng,O=example,C=US``), which is
what Kafka's default principal builder uses with the default
``ssl.principal.mapping.rules``. The subject is read from the certificate's
DER by the small parser below (no dependency).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import ssl
import tempfile

_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_REFUSED_VERSIONS = ("TLSv1", "TLSv1.1", "SSLv3", "SSLv2", "SSL", "TLS")
CLIENT_AUTH = {"required": ssl.CERT_REQUIRED, "requested": ssl.CERT_OPTIONAL, "none": ssl.CERT_NONE}


class TlsError(ValueError):
    """A TLS setting that cannot be used; ``key`` names the setting."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key


@contextlib.contextmanager
def _pem_file(text: str):
    """A path OpenSSL can read ``text`` from, for as long as the block runs (secrets never touch a disk)."""
    data = text.encode()
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("kafkalite-pem", os.MFD_CLOEXEC)
        try:
            os.write(fd, data)
            yield f"/proc/self/fd/{fd}"
        finally:
            os.close(fd)
        return
    with tempfile.TemporaryDirectory(prefix="kafkalite-pem-") as d:  # 0700
        path = os.path.join(d, "pem")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        yield path


def server_context(s: dict, client_auth: str) -> ssl.SSLContext:
    """A server context from one listener's TLS settings (``s``: setting key -> value)."""
    protocols = [p.strip() for p in s.get("ssl_enabled_protocols") or ()]
    if not protocols:
        raise TlsError("ssl_enabled_protocols", "at least one of TLSv1.2 and TLSv1.3 is needed")
    for p in protocols:
        if p not in _VERSIONS:
            why = "is not served (TLS 1.2 and 1.3 only)" if p in _REFUSED_VERSIONS else "is not a TLS version (TLSv1.2, TLSv1.3)"
            raise TlsError("ssl_enabled_protocols", f"{p} {why}")
    versions = sorted(_VERSIONS[p] for p in protocols)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version, ctx.maximum_version = versions[0], versions[-1]
    ctx.options |= ssl.OP_NO_COMPRESSION

    for key in ("ssl_keystore_type", "ssl_truststore_type"):
        kind = str(s.get(key) or "PEM")
        if kind.upper() != "PEM":
            raise TlsError(key, f"{kind} stores are not read: kafkalite takes PEM only (keytool or openssl convert JKS and PKCS12 to PEM; see docs/security.md)")
    location, chain, key = s.get("ssl_keystore_location"), s.get("ssl_keystore_certificate_chain"), s.get("ssl_keystore_key")
    if location is not None and (chain or key):
        raise TlsError("ssl_keystore_location", "give either ssl.keystore.location or ssl.keystore.certificate.chain with ssl.keystore.key, not both")
    if location is None and not (chain and key):
        which = "ssl.keystore.key" if chain else "ssl.keystore.certificate.chain" if key else "ssl.keystore.location (or ssl.keystore.certificate.chain with ssl.keystore.key)"
        raise TlsError("ssl_keystore_certificate_chain" if key else "ssl_keystore_key" if chain else "ssl_keystore_location", f"a TLS listener needs {which}")
    password = s.get("ssl_key_password")

    def _password():  # never let OpenSSL prompt on the terminal for an encrypted key
        return password.encode() if password else b""

    try:
        if location is not None:
            ctx.load_cert_chain(str(location), password=_password)
        else:
            with _pem_file(chain) as chain_path, _pem_file(key) as key_path:
                ctx.load_cert_chain(chain_path, key_path, password=_password)
    except FileNotFoundError:
        raise TlsError("ssl_keystore_location", f"no such file: {location}") from None
    except (ssl.SSLError, OSError) as exc:
        what = f"the key store {location}" if location is not None else "the inline key store"
        hint = " (an encrypted key needs ssl.key.password)" if not password else " (is ssl.key.password right?)"
        raise TlsError("ssl_keystore_location" if location is not None else "ssl_keystore_key",
                       f"cannot load {what}: {getattr(exc, 'reason', None) or exc}; it must hold a PEM private key and certificate chain{hint}") from None

    trust_location, trust_inline = s.get("ssl_truststore_location"), s.get("ssl_truststore_certificates")
    if trust_location is not None and trust_inline:
        raise TlsError("ssl_truststore_location", "give either ssl.truststore.location or ssl.truststore.certificates, not both")
    try:
        if trust_location is not None:
            ctx.load_verify_locations(cafile=str(trust_location))
        elif trust_inline:
            ctx.load_verify_locations(cadata=trust_inline)
    except FileNotFoundError:
        raise TlsError("ssl_truststore_location", f"no such file: {trust_location}") from None
    except (ssl.SSLError, OSError, ValueError) as exc:
        raise TlsError("ssl_truststore_location" if trust_location is not None else "ssl_truststore_certificates",
                       f"cannot load the trust store: {getattr(exc, 'reason', None) or exc}") from None
    if client_auth != "none" and trust_location is None and not trust_inline:
        raise TlsError("ssl_client_auth", f"ssl.client.auth={client_auth} needs a trust store (ssl.truststore.location or ssl.truststore.certificates)")
    ctx.verify_mode = CLIENT_AUTH[client_auth]
    return ctx


# -- the client's subject, as Java's X500Principal.getName() (RFC 2253) -------------------------

# the attribute types RFC 2253 (and Java) write by keyword; any other is written as its OID
_KEYWORDS = {
    "2.5.4.3": "CN", "2.5.4.6": "C", "2.5.4.7": "L", "2.5.4.8": "ST", "2.5.4.10": "O",
    "2.5.4.11": "OU", "2.5.4.9": "STREET", "0.9.2342.19200300.100.1.25": "DC",
    "0.9.2342.19200300.100.1.1": "UID",
}
_STRING_TAGS = {0x0C: "utf-8", 0x13: "latin-1", 0x14: "latin-1", 0x16: "latin-1", 0x1A: "latin-1", 0x1E: "utf-16-be", 0x1C: "utf-32-be"}


class DerError(ValueError):
    pass


def _tlv(b: bytes, pos: int) -> tuple[int, int, int]:
    """(tag, start of content, end of content) of the element at ``pos``."""
    if pos + 2 > len(b):
        raise DerError("truncated")
    tag = b[pos]
    n = b[pos + 1]
    pos += 2
    if n & 0x80:
        k = n & 0x7F
        if k == 0 or k > 4 or pos + k > len(b):
            raise DerError("bad length")
        n = int.from_bytes(b[pos : pos + k], "big")
        pos += k
    if pos + n > len(b):
        raise DerError("truncated")
    return tag, pos, pos + n


def _children(b: bytes, start: int, end: int):
    pos = start
    while pos < end:
        tag, s, e = _tlv(b, pos)
        yield tag, s, e, pos
        pos = e


def _oid(b: bytes) -> str:
    if not b:
        raise DerError("empty OID")
    parts = [min(b[0] // 40, 2), b[0] - 40 * min(b[0] // 40, 2)]
    v = 0
    for x in b[1:]:
        v = (v << 7) | (x & 0x7F)
        if not x & 0x80:
            parts.append(v)
            v = 0
    return ".".join(map(str, parts))


def _escape(value: str) -> str:
    out = []
    for i, c in enumerate(value):
        if c in ',+"\\<>;' or (c == "#" and i == 0) or (c == " " and (i == 0 or i == len(value) - 1)):
            out.append("\\" + c)
        else:
            out.append(c)
    return "".join(out)


def subject_dn(der: bytes) -> str:
    """The subject of a DER certificate in RFC 2253 form, as Java writes it; DerError if malformed."""
    tag, s, e = _tlv(der, 0)  # Certificate
    if tag != 0x30:
        raise DerError("not a certificate")
    tag, s, e = _tlv(der, s)  # TBSCertificate
    fields = [(t, cs, ce, at) for t, cs, ce, at in _children(der, s, e)]
    if fields and fields[0][0] == 0xA0:  # [0] version
        fields = fields[1:]
    if len(fields) < 5:
        raise DerError("short TBSCertificate")
    _, ns, ne, _ = fields[4]  # serial, signature, issuer, validity, subject
    rdns = []
    for t, rs, re_, _ in _children(der, ns, ne):
        if t != 0x31:
            raise DerError("RDN is not a SET")
        avas = []
        for t2, as_, ae, _ in _children(der, rs, re_):
            kids = list(_children(der, as_, ae))
            if t2 != 0x30 or len(kids) != 2 or kids[0][0] != 0x06:
                raise DerError("bad attribute")
            oid = _oid(der[kids[0][1] : kids[0][2]])
            vtag, vs, ve, vat = kids[1]
            keyword = _KEYWORDS.get(oid)
            encoding = _STRING_TAGS.get(vtag)
            if keyword is not None and encoding is not None:
                avas.append(f"{keyword}={_escape(der[vs:ve].decode(encoding, 'replace'))}")
            else:
                avas.append(f"{keyword or oid}=#{der[vat:ve].hex()}")
        rdns.append("+".join(avas))
    return ",".join(reversed(rdns))


def peer_principal(transport) -> str | None:
    """``User:<subject>`` of the client certificate of a TLS transport, or None if it sent none."""
    sslobj = transport.get_extra_info("ssl_object")
    der = sslobj.getpeercert(binary_form=True) if sslobj is not None else None
    if not der:
        return None
    try:
        return "User:" + subject_dn(der)
    except DerError:
        return None


# -- the handshake -------------------------------------------------------------------------------


def failure_reason(exc: BaseException) -> str:
    """A failed handshake's kind, for the metric's label (a small fixed set)."""
    if isinstance(exc, TimeoutError) or (isinstance(exc, ConnectionAbortedError) and "timeout" in str(exc).lower()):
        return "timeout"  # ssl.handshake.timeout.ms (asyncio says ConnectionAbortedError)
    if isinstance(exc, ssl.SSLCertVerificationError):
        return "certificate"  # the client's certificate, refused by the trust store
    if isinstance(exc, ssl.SSLError):
        reason = getattr(exc, "reason", "") or ""
        if "ALERT" in reason:
            return "alert"  # the client gave up with an alert: it did not trust us (unknown CA), no common version...
        if isinstance(exc, (ssl.SSLEOFError, ssl.SSLZeroReturnError)):
            return "closed"
        return "protocol"  # not TLS (a plaintext client, garbage), or no cipher in common
    if isinstance(exc, (ConnectionError, EOFError, OSError)):
        return "closed"
    return "other"


def failure_detail(exc: BaseException) -> str:
    """One short line about the failure: OpenSSL's reason, never data the client sent."""
    if isinstance(exc, ssl.SSLError):
        return getattr(exc, "reason", None) or getattr(exc, "verify_message", None) or type(exc).__name__
    return type(exc).__name__


class TlsAccept:
    """A TLS listener's connection from accept until its handshake is done.

    The listener's server is a plain one whose protocol is this: at accept it
    counts the connection in (``Broker.admit``: ``max.connections`` and
    ``max.connections.per.ip`` see connections still in their handshake, which
    an ``ssl=`` server would create only after it), then upgrades the socket
    with ``loop.start_tls``. Handshake done: the KafkaConnection takes the TLS
    transport. Failed (not TLS, refused certificate, an alert from the client,
    closed, ``ssl.handshake.timeout.ms``): ``Broker.tls_failed`` logs and counts
    it.

    ``start_tls`` is driven by hand from ``connection_made`` rather than by a
    task: its first step (the TLS protocol takes the socket) must happen before
    anything is read, and uvloop starts reading right after ``connection_made``
    whatever it did (a task's first step would come too late, and a ClientHello
    read by this object would be lost). Between the end of the handshake and the
    connection taking over, the TLS transport may deliver data already
    received: kept here and replayed.
    """

    __slots__ = ("broker", "listener", "conn", "transport", "ip", "step", "early", "eof", "lost", "_peer")

    def __init__(self, broker, listener, conn) -> None:
        self.broker = broker
        self.listener = listener
        self.conn = conn
        self.transport = None
        self.ip: str | None = None  # as Broker.admit counted it
        self.step = None  # the start_tls coroutine while the handshake runs
        self.early: list[bytes] | None = None
        self.eof = False
        self.lost: tuple[BaseException | None] | None = None
        self._peer: str | None = None

    @property
    def peer(self) -> str:
        if self._peer is None:
            try:
                addr = self.transport.get_extra_info("peername")
            except Exception:  # noqa: BLE001 - closed already
                addr = None
            self._peer = f"{addr[0]}:{addr[1]}" if addr else "?"
        return self._peer

    # asyncio.Protocol: of the plain transport until start_tls takes it, then of the TLS one until the connection does
    def connection_made(self, transport) -> None:
        self.transport = transport
        broker = self.broker
        if not broker.admit(self, transport):
            transport.close()
            return
        self.peer  # noqa: B018 - while the socket is open
        broker.handshaking.add(self)
        self.step = broker.loop.start_tls(
            transport, self, self.listener.security.ssl_context, server_side=True, ssl_handshake_timeout=broker.security.handshake_timeout_s
        )
        self._advance(None)

    def data_received(self, data: bytes) -> None:
        if self.early is None:
            self.early = []
        self.early.append(data)

    def eof_received(self) -> bool:
        self.eof = True
        return False

    def connection_lost(self, exc) -> None:
        self.lost = (exc,)

    def _advance(self, _waited) -> None:
        """One step of start_tls (a task's work): on to the next future, or the end."""
        try:
            waiting = self.step.send(None)
        except StopIteration as done:
            self._established(done.value)
            return
        except (Exception, asyncio.CancelledError) as exc:  # every way a handshake fails is the client's
            self._release()
            self.transport.abort()
            if not isinstance(exc, asyncio.CancelledError):
                self.broker.tls_failed(self, exc)
            return
        waiting._asyncio_future_blocking = False
        waiting.add_done_callback(self._advance)

    def _established(self, tls) -> None:
        self.broker.handshaking.discard(self)
        self.step = None
        conn = self.conn
        conn.ip = self.ip  # counted at accept, under this address
        tls.set_protocol(conn)
        conn.connection_made(tls, admitted=True)
        for data in self.early or ():
            conn.data_received(data)
        self.early = None
        if self.eof and not conn.eof_received():
            tls.close()
        if self.lost is not None:
            conn.connection_lost(self.lost[0])

    def _release(self) -> None:
        """Count out a connection whose handshake did not finish."""
        broker = self.broker
        broker.handshaking.discard(self)
        self.step = None
        if self.ip is not None:
            broker._forget_ip(self.ip)
            self.ip = None

    def abort(self) -> None:
        """The broker stops: a handshake in progress ends."""
        step = self.step
        if step is not None:
            self._release()
            step.close()  # start_tls closes the transport on its way out
            self.transport.abort()
