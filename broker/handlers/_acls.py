"""What CreateAcls, DescribeAcls and DeleteAcls share: their refusals, wire fields to bindings and filters."""

from __future__ import annotations

import functools

from protocol.errors import ErrorCode

from ..security.authorizer import AclBinding, AclFilter, Operation, PatternType, Permission, ResourceType, _code


def binding(c) -> AclBinding:
    return AclBinding(
        _code(ResourceType, c.resource_type), c.resource_name, _code(PatternType, c.resource_pattern_type),
        c.principal, c.host, _code(Operation, c.operation), _code(Permission, c.permission_type),
    )


def acl_filter(f) -> AclFilter:
    return AclFilter(
        _code(ResourceType, f.resource_type_filter), f.resource_name_filter, _code(PatternType, f.pattern_type_filter),
        f.principal_filter, f.host_filter, _code(Operation, f.operation), _code(Permission, f.permission_type),
    )


def unknown_code(items, fields: tuple[str, str, str, str]) -> bool:
    """Whether a creation or filter has UNKNOWN (0) as its resource type, pattern type, operation or
    permission: Kafka's CreateAcls/DescribeAcls/DeleteAclsRequest refuse that while parsing (their
    validate() compares the wire code with 0), so the connection is closed before any check. A code
    Kafka has no name for (99) passes there and is UNKNOWN to the handler."""
    return any(getattr(item, f) == 0 for item in items for f in fields)


CREATION_CODES = ("resource_type", "resource_pattern_type", "operation", "permission_type")
FILTER_CODES = ("resource_type_filter", "pattern_type_filter", "operation", "permission_type")


def refused(ctx, operation: Operation, no_authorizer: str) -> tuple[ErrorCode, str] | None:
    """The whole request's refusal, with Kafka's message: ``operation`` not allowed on the cluster,
    or no authorizer configured (``no_authorizer``, which Kafka words per API); None to go on."""
    if not ctx.allowed_on_cluster(operation):
        return ErrorCode.cluster_authorization_failed, "Cluster authorization failed."
    if ctx.broker.authorizer is None:
        return ErrorCode.security_disabled, no_authorizer
    return None



def screened(items: str, fields: tuple[str, str, str, str], invalid: str, operation: Operation, no_authorizer: str, fail_all):
    """A decorator for ``handle(ctx, req)`` of a request whose ``items`` (a field name) hold ACL codes:
    an UNKNOWN code closes the connection (``invalid``), a refusal (:func:`refused`) fails every item
    (``fail_all(req, code, message)``); the handler runs only past both."""

    def wrap(handle):
        @functools.wraps(handle)
        async def screened_handle(ctx, req):
            if unknown_code(getattr(req, items) or (), fields):
                ctx.close_invalid(invalid)
                return None
            refusal = refused(ctx, operation, no_authorizer)
            if refusal is not None:
                return fail_all(req, *refusal)
            return await handle(ctx, req)

        return screened_handle

    return wrap
