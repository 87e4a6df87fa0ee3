"""What CreateAcls, DescribeAcls and DeleteAcls share: wire fields to bindings and filters."""

from __future__ import annotations

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
