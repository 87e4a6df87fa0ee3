"""ACLs with the semantics of Kafka's StandardAuthorizer (KRaft's ``authorizer.class.name``).

An ACL binding is a resource pattern (resource type, name, LITERAL or PREFIXED)
and an entry (principal, host, operation, ALLOW or DENY). Deciding whether a
principal connected from a host may perform an operation on one resource:

- a principal listed in ``super.users`` may do anything;
- the ACLs that concern the resource are those of its type whose pattern is the
  LITERAL name, the LITERAL wildcard ``*``, or a PREFIXED name the resource's
  name starts with;
- of those, the ones that apply are the ones for the principal or ``User:*``,
  for the host or ``*``, and for the operation: ALL, the operation itself, or
  (ALLOW only) an operation that implies it (READ, WRITE, DELETE and ALTER imply
  DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS). A DENY for ALL or for the
  operation itself denies, whatever allows;
- otherwise an applying ALLOW allows; otherwise, if any ACL concerns the
  resource (for anyone), the answer is no; if none does, the answer is
  ``allow.everyone.if.no.acl.found`` (false by default).

``authorize_by_resource_type`` is Kafka's Authorizer.authorizeByResourceType:
may the principal do the operation on some resource of a type (used for
idempotent producers: WRITE on any topic).

Filters (DescribeAcls, DeleteAcls) follow Kafka's AclBindingFilter: ANY
matches every value of a field, a null name/principal/host every one, and
pattern type MATCH every pattern that would apply to the named resource.

``AclStore`` keeps the bindings in ``<data-dir>/acls.json`` (temp file, fsync,
rename, the version replaced kept as ``acls.json.prev``, as the SCRAM credentials
are kept) and is read at start (``scram.read_kept_file``: a missing file is
replaced by its previous version, an unreadable one stops the start).
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import json
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path

from ..logs import get_logger

log = get_logger("security")

CLASS_NAME = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
CLUSTER_NAME = "kafka-cluster"
WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"
FILE = "acls.json"


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class Operation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class Permission(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


def _code(enum, value: int):
    """A wire code as its enum member; codes Kafka does not know are UNKNOWN (as fromCode)."""
    try:
        return enum(value)
    except ValueError:
        return enum.UNKNOWN


_IMPLIES_DESCRIBE = frozenset({Operation.DESCRIBE, Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER})
_IMPLIES_DESCRIBE_CONFIGS = frozenset({Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS})

# the operations whose bits authorized-operations fields carry, per resource type (Kafka's AclEntry)
SUPPORTED_OPERATIONS = {
    ResourceType.TOPIC: (Operation.READ, Operation.WRITE, Operation.CREATE, Operation.DESCRIBE, Operation.DELETE, Operation.ALTER, Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS),
    ResourceType.GROUP: (Operation.READ, Operation.DESCRIBE, Operation.DELETE, Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS),
    ResourceType.CLUSTER: (Operation.CREATE, Operation.CLUSTER_ACTION, Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS, Operation.IDEMPOTENT_WRITE, Operation.ALTER, Operation.DESCRIBE),
    ResourceType.TRANSACTIONAL_ID: (Operation.DESCRIBE, Operation.WRITE),
    ResourceType.DELEGATION_TOKEN: (Operation.DESCRIBE,),
    ResourceType.USER: (Operation.CREATE_TOKENS, Operation.DESCRIBE_TOKENS),
}


class AuthorizerConfigError(ValueError):
    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key


def parse_principal(text: str) -> tuple[str, str]:
    """``Type:name`` -> (type, name), as Kafka's SecurityUtils.parseKafkaPrincipal (split at the first colon)."""
    kind, sep, name = text.partition(":")
    if not sep or not kind:
        raise ValueError(f"invalid principal {text!r}: expected Type:name, such as User:alice")
    return kind, name


def parse_super_users(value: str | None) -> frozenset[str]:
    """``super.users``: principals separated by semicolons, blanks ignored."""
    users = set()
    for part in (value or "").split(";"):
        part = part.strip()
        if part:
            parse_principal(part)
            users.add(part)
    return frozenset(users)


@dataclass(frozen=True, slots=True, order=True)
class AclBinding:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: Operation
    permission: Permission

    def to_json(self) -> dict:
        return {
            "resource_type": self.resource_type.name, "name": self.name, "pattern_type": self.pattern_type.name,
            "principal": self.principal, "host": self.host, "operation": self.operation.name, "permission": self.permission.name,
        }

    @classmethod
    def from_json(cls, d: dict) -> AclBinding:
        return cls(
            ResourceType[d["resource_type"]], str(d["name"]), PatternType[d["pattern_type"]],
            str(d["principal"]), str(d["host"]), Operation[d["operation"]], Permission[d["permission"]],
        )


def validate_new(b: AclBinding) -> str | None:
    """Why an ACL cannot be created (INVALID_REQUEST), or None: Kafka's AclApis and AclControlManager checks."""
    # the broker's checks (AclApis) come before the controller's (AclControlManager.validateNewAcl)
    if b.resource_type == ResourceType.CLUSTER and b.name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if not b.name:
        return "Invalid empty resource name"
    if b.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        return f"Invalid resourceType {b.resource_type.name}"
    if b.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"Invalid patternType {b.pattern_type.name}"
    if b.operation in (Operation.UNKNOWN, Operation.ANY):
        return f"Invalid operation {b.operation.name}"
    if b.permission not in (Permission.ALLOW, Permission.DENY):
        return f"Invalid permissionType {b.permission.name}"
    return None


@dataclass(frozen=True, slots=True)
class AclFilter:
    resource_type: ResourceType
    name: str | None
    pattern_type: PatternType
    principal: str | None
    host: str | None
    operation: Operation
    permission: Permission

    def unknown(self) -> str | None:
        if self.resource_type == ResourceType.UNKNOWN or self.pattern_type == PatternType.UNKNOWN:
            return "Unknown patternFilter."
        if self.operation == Operation.UNKNOWN or self.permission == Permission.UNKNOWN:
            return "Unknown entryFilter."
        return None

    def matches(self, b: AclBinding) -> bool:
        if self.resource_type != ResourceType.ANY and self.resource_type != b.resource_type:
            return False
        pt = self.pattern_type
        if pt not in (PatternType.ANY, PatternType.MATCH) and pt != b.pattern_type:
            return False
        if self.name is not None:
            if pt in (PatternType.ANY, b.pattern_type):
                if self.name != b.name:
                    return False
            elif b.pattern_type == PatternType.LITERAL:  # MATCH
                if self.name != b.name and b.name != WILDCARD:
                    return False
            elif not self.name.startswith(b.name):  # MATCH against PREFIXED
                return False
        if self.principal is not None and self.principal != b.principal:
            return False
        if self.host is not None and self.host != b.host:
            return False
        if self.operation != Operation.ANY and self.operation != b.operation:
            return False
        return self.permission == Permission.ANY or self.permission == b.permission


def _applies(b: AclBinding, principals: tuple[str, str], host: str, op: Operation) -> Permission | None:
    """ALLOW or DENY when ``b`` applies to the action, None when it does not (Kafka's findResult)."""
    if b.principal not in principals:
        return None
    if b.host != WILDCARD and b.host != host:
        return None
    if b.operation != Operation.ALL:
        if b.permission == Permission.ALLOW:
            if op == Operation.DESCRIBE:
                if b.operation not in _IMPLIES_DESCRIBE:
                    return None
            elif op == Operation.DESCRIBE_CONFIGS:
                if b.operation not in _IMPLIES_DESCRIBE_CONFIGS:
                    return None
            elif op != b.operation:
                return None
        elif op != b.operation:
            return None
    return b.permission


def _matching(b: AclBinding) -> str:
    return (f"MatchingAcl(acl=StandardAcl(resourceType={b.resource_type.name}, resourceName={b.name}, patternType={b.pattern_type.name}, "
            f"principal={b.principal}, host={b.host}, operation={b.operation.name}, permissionType={b.permission.name}))")


# Kafka's SecurityUtils.resourceTypeName, as its audit log writes resources
_RESOURCE_NAMES = {"TOPIC": "Topic", "GROUP": "Group", "CLUSTER": "Cluster", "TRANSACTIONAL_ID": "TransactionalId", "DELEGATION_TOKEN": "DelegationToken", "USER": "User"}


def audit_resource(rtype: ResourceType, name: str) -> str:
    """``Topic:LITERAL:orders``: how Kafka's audit log names the resource of a check."""
    return f"{_RESOURCE_NAMES.get(rtype.name, rtype.name)}:LITERAL:{name}"


class Authorizer:
    """The bindings in memory, indexed by resource type and literal name, and the decisions."""

    def __init__(self, super_users: frozenset[str] = frozenset(), allow_if_no_acl: bool = False) -> None:
        self.super_users = super_users
        self.allow_if_no_acl = allow_if_no_acl
        self.bindings: set[AclBinding] = set()
        # resource type -> literal name -> bindings; resource type -> [(prefix, bindings)]
        self._literal: dict[ResourceType, dict[str, list[AclBinding]]] = {}
        self._prefixed: dict[ResourceType, dict[str, list[AclBinding]]] = {}

    # -- the bindings ---------------------------------------------------------------
    def _index(self) -> None:
        literal: dict = {}
        prefixed: dict = {}
        for b in sorted(self.bindings):
            table = literal if b.pattern_type == PatternType.LITERAL else prefixed
            table.setdefault(b.resource_type, {}).setdefault(b.name, []).append(b)
        self._literal, self._prefixed = literal, prefixed

    def replace(self, bindings) -> None:
        self.bindings = set(bindings)
        self._index()

    def acls(self, flt: AclFilter) -> list[AclBinding]:
        return [b for b in sorted(self.bindings) if flt.matches(b)]

    # -- decisions ----------------------------------------------------------------
    def _concerning(self, rtype: ResourceType, name: str):
        literal = self._literal.get(rtype)
        if literal:
            yield from literal.get(name, ())
            if name != WILDCARD:
                yield from literal.get(WILDCARD, ())
        prefixed = self._prefixed.get(rtype)
        if prefixed:
            for prefix, bindings in prefixed.items():
                if name.startswith(prefix):
                    yield from bindings

    def authorize(self, principal: str, host: str, op: Operation, rtype: ResourceType, name: str) -> bool:
        if principal in self.super_users:
            return True
        principals = (principal, WILDCARD_PRINCIPAL)
        any_acl = allowed = False
        for b in self._concerning(rtype, name):
            any_acl = True
            result = _applies(b, principals, host, op)
            if result == Permission.DENY:
                return False
            if result == Permission.ALLOW:
                allowed = True
        if allowed:
            return True
        return False if any_acl else self.allow_if_no_acl

    def rule(self, principal: str, host: str, op: Operation, rtype: ResourceType, name: str) -> tuple[bool, str]:
        """``authorize``'s decision and the rule that made it, as Kafka's audit log names it
        (``SuperUser``, ``MatchingAcl(acl=StandardAcl(...))``, ``DefaultAllow``, ``DefaultDeny``).
        Only for the audit log: it walks the bindings again."""
        if principal in self.super_users:
            return True, "SuperUser"
        principals = (principal, WILDCARD_PRINCIPAL)
        any_acl, allow = False, None
        for b in self._concerning(rtype, name):
            any_acl = True
            result = _applies(b, principals, host, op)
            if result == Permission.DENY:
                return False, _matching(b)
            if result == Permission.ALLOW and allow is None:
                allow = b
        if allow is not None:
            return True, _matching(allow)
        ok = False if any_acl else self.allow_if_no_acl
        return ok, "DefaultAllow" if ok else "DefaultDeny"

    def authorized_operations(self, principal: str, host: str, rtype: ResourceType, name: str) -> int:
        """The bit field of authorized-operations fields: bit ``op`` set for each supported operation allowed."""
        bits = 0
        for op in SUPPORTED_OPERATIONS[rtype]:
            if self.authorize(principal, host, op, rtype, name):
                bits |= 1 << op
        return bits

    def authorize_by_resource_type(self, principal: str, host: str, op: Operation, rtype: ResourceType) -> bool:
        """May ``principal`` do ``op`` on some resource of type ``rtype``? (Kafka's Authorizer default method.)"""
        if self.authorize(principal, host, op, rtype, "hardcode"):
            return True
        deny_literal: set[str] = set()
        deny_prefixed: set[str] = set()
        allow: list[tuple[PatternType, str]] = []
        wildcard_allow = False
        for b in self.bindings:
            if b.resource_type != rtype:
                continue
            if b.host != host and b.host != WILDCARD:
                continue
            if b.principal != principal and b.principal != WILDCARD_PRINCIPAL:
                continue
            if b.operation != op and b.operation != Operation.ALL:
                continue
            if b.permission == Permission.DENY:
                if b.pattern_type == PatternType.LITERAL:
                    if b.name == WILDCARD:
                        return False
                    deny_literal.add(b.name)
                elif b.pattern_type == PatternType.PREFIXED:
                    deny_prefixed.add(b.name)
            elif b.permission == Permission.ALLOW:
                if b.pattern_type == PatternType.LITERAL and b.name == WILDCARD:
                    wildcard_allow = True
                else:
                    allow.append((b.pattern_type, b.name))
        if wildcard_allow:
            return True
        for ptype, name in allow:
            if ptype == PatternType.LITERAL and name in deny_literal:
                continue
            if not any(name[:i] in deny_prefixed for i in range(1, len(name) + 1)):
                return True
        return False


def from_config(config) -> Authorizer | None:
    """The authorizer ``authorizer.class.name`` asks for, or None (everything allowed)."""
    name = (config.authorizer_class_name or "").strip()
    if not name:
        return None
    if name != CLASS_NAME:
        raise AuthorizerConfigError(
            "authorizer_class_name", f"authorizer.class.name: {name!r} is not served; the only authorizer is {CLASS_NAME} (or leave it unset: no ACLs)"
        )
    try:
        supers = parse_super_users(config.super_users)
    except ValueError as exc:
        raise AuthorizerConfigError("super_users", f"super.users: {exc}") from None
    return Authorizer(supers, bool(config.allow_everyone_if_no_acl_found))


def _decode_bindings(data: bytes) -> list[AclBinding]:
    return [AclBinding.from_json(d) for d in json.loads(data)["acls"]]


class AclStoreError(RuntimeError):
    """The ACL file cannot be read (the broker does not start)."""


class AclStore:
    """The bindings of an Authorizer, kept in ``<data-dir>/acls.json``."""

    def __init__(self, authorizer: Authorizer, data_dir: Path | None) -> None:
        self.authorizer = authorizer
        self.path = Path(data_dir) / FILE if data_dir is not None else None
        self._lock: asyncio.Lock | None = None

    def load(self) -> None:
        if self.path is None:
            return
        from .scram import read_kept_file

        try:
            bindings = read_kept_file(self.path, _decode_bindings, "ACL")
        except (ValueError, OSError) as exc:
            raise AclStoreError(f"cannot read ACLs from {self.path}: {exc}") from None
        if bindings is not None:
            self.authorizer.replace(bindings)

    def _encode(self, bindings) -> bytes:
        return json.dumps({"version": 1, "acls": [b.to_json() for b in sorted(bindings)]}, indent=1).encode()

    async def _save(self, bindings: set[AclBinding]) -> None:
        if self.path is None:
            return
        from .scram import _write_credentials  # mode 0600 and the previous version kept, as the credentials

        self.path.parent.mkdir(parents=True, exist_ok=True)
        await asyncio.to_thread(_write_credentials, self.path, self._encode(bindings))

    def _lock_(self) -> asyncio.Lock:
        if self._lock is None:
            self._lock = asyncio.Lock()
        return self._lock

    async def create(self, bindings: list[AclBinding]) -> None:
        """Add the bindings (those already there are kept once): durable when this returns."""
        async with self._lock_():
            new = self.authorizer.bindings | set(bindings)
            if new != self.authorizer.bindings:
                await self._save(new)
                self.authorizer.replace(new)

    async def delete(self, filters: list[AclFilter]) -> list[list[AclBinding]]:
        """Remove what each filter matches; per filter, the bindings it removed (one binding may be in several)."""
        async with self._lock_():
            current = sorted(self.authorizer.bindings)
            matched = [[b for b in current if f.matches(b)] for f in filters]
            gone = {b for m in matched for b in m}
            if gone:
                new = self.authorizer.bindings - gone
                await self._save(new)
                self.authorizer.replace(new)
            return matched


@functools.lru_cache(maxsize=1024)
def java_host_address(ip: str) -> str:
    """A client address as Kafka's ACLs see it (Java's ``InetAddress.getHostAddress``): IPv4 as is, an
    IPv4-mapped IPv6 address as its IPv4 address, other IPv6 addresses as eight hex groups without
    leading zeros and without ``::`` (``::1`` is ``0:0:0:0:0:0:0:1``), the zone kept after ``%``. So an
    ACL written for a Kafka broker names the same clients here."""
    if ":" not in ip:
        return ip
    text, _, zone = ip.partition("%")
    try:
        addr = ipaddress.IPv6Address(text)
    except ValueError:
        return ip
    if addr.ipv4_mapped is not None:
        return str(addr.ipv4_mapped)
    out = ":".join(format(int(group, 16), "x") for group in addr.exploded.split(":"))
    return f"{out}%{zone}" if zone else out
