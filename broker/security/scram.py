"""SCRAM credentials (RFC 5802, RFC 7677): the arithmetic, and where they are kept.

A credential is what the server keeps of a password: a salt, an iteration
count, ``StoredKey = H(HMAC(SaltedPassword, "Client Key"))`` and ``ServerKey =
HMAC(SaltedPassword, "Server Key")``, where ``SaltedPassword`` is PBKDF2 of
the password (Kafka's ScramFormatter: the password's UTF-8 bytes, no
SASLprep). Passwords are never kept. PBKDF2 is the costly step (4096
iterations at least, as Kafka requires): it runs when a credential is made
(at start for users in the configuration; by the client for
AlterUserScramCredentials, which sends the salted password), never per login.
A login is two HMACs and a hash.

``ScramStore`` holds the credentials: those from the configuration (kafkalite's
own ``user_<name>="<password>"`` options on a ScramLoginModule JAAS line),
read-only, and those from AlterUserScramCredentials, which win over them and
are kept in ``<data-dir>/scram-credentials.json`` (written to a temporary
file, fsynced, renamed over the old one, whose version is kept as
``scram-credentials.json.prev``, and the directory fsynced, on a worker
thread: the event loop never waits on the disk; ``read_kept_file`` says how
a missing or unreadable file is read).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass
from pathlib import Path

from protocol.errors import ErrorCode
from storage.atomic import previous_path, read_with_fallback, write_atomically

from ..javahash import java_string_hash
from ..logs import get_logger
from ..javahash import JavaHashTable

log = get_logger("security")

HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
# the mechanism numbers of DescribeUserScramCredentials and AlterUserScramCredentials
TYPES = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
BY_TYPE = {v: k for k, v in TYPES.items()}
MIN_ITERATIONS = 4096  # Kafka's ScramMechanism.minIterations, both mechanisms
MAX_ITERATIONS = 16384  # Kafka's controller refuses more (ScramControlManager)
CONFIG_ITERATIONS = 4096  # what kafka-configs uses when not told
FILE = "scram-credentials.json"


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def __repr__(self) -> str:  # nothing in it may reach a log
        return f"ScramCredential(iterations={self.iterations}, [hidden])"


def hmac_(mechanism: str, key: bytes, msg: bytes) -> bytes:
    return hmac.new(key, msg, HASHES[mechanism]).digest()


def h(mechanism: str, data: bytes) -> bytes:
    return hashlib.new(HASHES[mechanism], data).digest()


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(HASHES[mechanism], password.encode("utf-8"), salt, iterations)


def from_salted_password(mechanism: str, salt: bytes, salted: bytes, iterations: int) -> ScramCredential:
    client_key = hmac_(mechanism, salted, b"Client Key")
    return ScramCredential(salt, h(mechanism, client_key), hmac_(mechanism, salted, b"Server Key"), iterations)


def from_password(mechanism: str, password: str, iterations: int = CONFIG_ITERATIONS, salt: bytes | None = None) -> ScramCredential:
    salt = secrets.token_bytes(32) if salt is None else salt
    return from_salted_password(mechanism, salt, salted_password(mechanism, password, salt, iterations), iterations)


def _b64(b: bytes) -> str:
    return base64.b64encode(b).decode("ascii")


def read_kept_file(path: Path, parse, what: str):
    """The parsed content of a security file (``acls.json``, ``scram-credentials.json``), or None
    when there is none. Written with ``write_atomically(..., keep_previous=True)``: when the file
    is missing (deleted, or a crash between the write's two renames) and ``<file>.prev`` is
    readable, that version is used, with a WARNING. A file that is there but unreadable is not
    passed over (its last change might have removed access): ``ValueError`` says so, and where
    the previous version is, for the operator to decide."""
    read = read_with_fallback(path, parse)
    if read.missing:
        return None
    current_reason = read.refused[0][1] if read.refused and read.refused[0][0] == path else None
    if current_reason is not None and current_reason != "missing":
        prev = previous_path(path)
        hint = f"; the version before its last change is {prev.name}: check it and rename it to {path.name} to use it" if prev.exists() else ""
        raise ValueError(f"{current_reason}{hint}")
    if read.source is None:
        raise ValueError("; ".join(f"{p.name}: {why}" for p, why in read.refused))
    log.warning(f"{what} file missing, its previous version is used", file=str(path), used=str(read.source),
                note="the last change may be missing")
    return read.value


def _decode(data: bytes) -> dict[str, dict[str, ScramCredential]]:
    doc = json.loads(data)
    return {
        user: {
            mech: ScramCredential(base64.b64decode(c["salt"]), base64.b64decode(c["stored_key"]), base64.b64decode(c["server_key"]), int(c["iterations"]))
            for mech, c in mechs.items()
            if mech in HASHES
        }
        for user, mechs in doc["users"].items()
    }


def _write_credentials(path: Path, data: bytes) -> None:
    """Temp file (mode 0600), fsync, rename, fsync the directory; the version replaced is kept as ``.prev``."""
    write_atomically(path, data, keep_previous=True, mode=0o600)


class ScramStoreError(RuntimeError):
    """The credentials file cannot be read (the broker does not start)."""


class ScramStore:
    """user -> mechanism -> credential, from the configuration and from AlterUserScramCredentials."""

    def __init__(self, data_dir: Path | None, configured: dict[str, dict[str, ScramCredential]] | None = None) -> None:
        self.path = Path(data_dir) / FILE if data_dir is not None else None
        self.configured = configured or {}
        self.stored: dict[str, dict[str, ScramCredential]] = {}
        self._lock: asyncio.Lock | None = None

    # -- reading ------------------------------------------------------------
    def load(self) -> None:
        if self.path is None:
            return
        try:
            stored = read_kept_file(self.path, _decode, "SCRAM credentials")
        except (ValueError, OSError) as exc:
            raise ScramStoreError(f"cannot read SCRAM credentials from {self.path}: {exc}") from None
        if stored is not None:
            self.stored = stored

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        cred = self.stored.get(user, {}).get(mechanism)
        return cred if cred is not None else self.configured.get(user, {}).get(mechanism)

    def mechanisms_of(self, user: str) -> dict[str, ScramCredential]:
        return {**self.configured.get(user, {}), **self.stored.get(user, {})}

    def users(self) -> list[str]:
        return list(dict.fromkeys([*self.configured, *self.stored]))

    # -- DescribeUserScramCredentials ----------------------------------------------
    def describe(self, names: list[str] | None) -> list[dict]:
        """Kafka's ScramImage.describe: every user when ``names`` is null or empty; a user named
        twice gets DUPLICATE_RESOURCE, an unknown one RESOURCE_NOT_FOUND. The order is that of
        Kafka's HashMap of user names."""
        table = JavaHashTable()
        duplicate: set[str] = set()
        for name in names or self.users():
            if not table.put(name, java_string_hash(name)):
                duplicate.add(name)
        results = []
        for name in table.keys():
            if name in duplicate:
                results.append({"user": name, "error_code": ErrorCode.duplicate_resource, "error_message": f"Cannot describe SCRAM credentials for the same user twice in a single request: {name}", "credential_infos": []})
                continue
            mechs = self.mechanisms_of(name)
            if not mechs:
                results.append({"user": name, "error_code": ErrorCode.resource_not_found, "error_message": f"Attempt to describe a user credential that does not exist: {name}", "credential_infos": []})
                continue
            infos = [{"mechanism": TYPES[m], "iterations": mechs[m].iterations} for m in TYPES if m in mechs]
            results.append({"user": name, "error_code": ErrorCode.none, "error_message": "", "credential_infos": infos})
        return results

    # -- AlterUserScramCredentials ---------------------------------------------------
    async def alter(self, deletions, upsertions) -> list[dict]:
        """Validate as Kafka's ScramControlManager does, apply what is valid, keep it durably;
        the results, one per user, in Kafka's order (deletions, upsertions, then errors)."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:  # one alteration at a time: each writes the whole file
            return await self._alter(deletions, upsertions)

    async def _alter(self, deletions, upsertions) -> list[dict]:
        to_delete: dict[str, tuple[str, str]] = {}  # user -> (mechanism, user)
        to_upsert: dict[str, tuple] = {}
        errors: dict[str, tuple[int, str]] = {}
        dup = (ErrorCode.duplicate_resource, "A user credential cannot be altered twice in the same request")
        for d in deletions or ():
            if d.name in errors:
                continue
            if to_delete.pop(d.name, None) is not None:
                errors[d.name] = dup
                continue
            err = _check_name_and_mechanism(d.name, d.mechanism)
            if err is None:
                mech = BY_TYPE[d.mechanism]
                if mech not in self.stored.get(d.name, {}):
                    if mech in self.configured.get(d.name, {}):
                        err = (ErrorCode.resource_not_found, "Attempt to delete a user credential that comes from the broker configuration (sasl.jaas.config); remove it there")
                    else:
                        err = (ErrorCode.resource_not_found, "Attempt to delete a user credential that does not exist")
            if err is not None:
                errors[d.name] = err
            else:
                to_delete[d.name] = (BY_TYPE[d.mechanism], d.name)
        for u in upsertions or ():
            if u.name in errors:
                continue
            if to_delete.pop(u.name, None) is not None or to_upsert.pop(u.name, None) is not None:
                errors[u.name] = dup
                continue
            err = _check_name_and_mechanism(u.name, u.mechanism)
            if err is None:
                if u.iterations < MIN_ITERATIONS:
                    err = (ErrorCode.unacceptable_credential, "Too few iterations")
                elif u.iterations > MAX_ITERATIONS:
                    err = (ErrorCode.unacceptable_credential, "Too many iterations")
            if err is not None:
                errors[u.name] = err
            else:
                to_upsert[u.name] = (BY_TYPE[u.mechanism], u)
        stored = {user: dict(mechs) for user, mechs in self.stored.items()}
        for user, (mech, _) in to_delete.items():
            del stored[user][mech]
            if not stored[user]:
                del stored[user]
        for user, (mech, u) in to_upsert.items():
            stored.setdefault(user, {})[mech] = from_salted_password(mech, bytes(u.salt), bytes(u.salted_password), u.iterations)
        if to_delete or to_upsert:
            if self.path is not None:
                data = _encode(stored)
                await asyncio.get_running_loop().run_in_executor(None, _write_credentials, self.path, data)
            self.stored = stored
            log.info("SCRAM credentials altered", upserted=sorted(to_upsert), deleted=sorted(to_delete))
        results = [{"user": u, "error_code": ErrorCode.none, "error_message": None} for u in _java_order(to_delete)]
        results += [{"user": u, "error_code": ErrorCode.none, "error_message": None} for u in _java_order(to_upsert)]
        results += [{"user": u, "error_code": errors[u][0], "error_message": errors[u][1]} for u in _java_order(errors)]
        return results


def _check_name_and_mechanism(name: str, mechanism: int) -> tuple[int, str] | None:
    if not name:
        return ErrorCode.unacceptable_credential, "Username must not be empty"
    if mechanism not in BY_TYPE:
        return ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"
    return None


def _java_order(names) -> list[str]:
    table = JavaHashTable()
    for name in names:
        table.put(name, java_string_hash(name))
    return table.keys()


def _encode(stored: dict[str, dict[str, ScramCredential]]) -> bytes:
    users = {
        user: {mech: {"salt": _b64(c.salt), "stored_key": _b64(c.stored_key), "server_key": _b64(c.server_key), "iterations": c.iterations} for mech, c in mechs.items()}
        for user, mechs in sorted(stored.items())
    }
    return json.dumps({"version": 1, "users": users}, indent=1, sort_keys=True).encode()
