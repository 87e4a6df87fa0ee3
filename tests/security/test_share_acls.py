"""ShareGroupHeartbeat and ShareGroupDescribe under ACLs, against kafkalite and the reference Kafka 4.4
alike (the ``acl_target`` brokers of test_acls.py): READ on the group, then DESCRIBE on each subscribed
topic, as Kafka's KafkaApis checks them."""

from __future__ import annotations

from protocol.errors import ErrorCode
from tests.wait import wait_until

from .raw import Raw, plain_token
from .test_acls import USERS, _acl, _name, acl_target  # noqa: F401 - the fixture

E = ErrorCode


def _alice(target) -> Raw:
    c = Raw(target.sasl)
    c.handshake("PLAIN")
    assert c.authenticate(plain_token("alice", USERS["alice"])).error_code == E.none
    return c


def _heartbeat(c: Raw, body: dict):
    """One heartbeat after FindCoordinator (which makes Kafka create __consumer_offsets), retried while the
    coordinator is not ready yet."""

    def answered():
        c.request(10, 4, {"key_type": 0, "coordinator_keys": [body["group_id"]]})
        r = c.request(76, 1, body)
        return None if r.error_code in (E.not_coordinator, E.coordinator_not_available, E.coordinator_load_in_progress) else r

    return wait_until(answered, what=f"the coordinator of {body['group_id']} to answer a share group heartbeat")


def test_share_heartbeat_needs_read_on_group_and_describe_on_topics(acl_target):  # noqa: F811 - the imported fixture
    topic, group = _name("share-topic"), _name("share-group")
    acl_target.create_topics(topic)
    body = {"group_id": group, "member_id": "alice-member-1", "member_epoch": 0, "rack_id": None, "subscribed_topic_names": [topic]}
    with _alice(acl_target) as c:
        r = c.request(76, 1, body)
        assert (r.error_code, r.error_message) == (E.group_authorization_failed, None)
        acl_target.add_acls(_acl(group, "READ", rtype="GROUP"))
        r = c.request(76, 1, body)
        assert (r.error_code, r.error_message) == (E.topic_authorization_failed, None)
        bad = c.request(76, 1, {**body, "member_id": ""})  # the member id is checked between the two
        assert (bad.error_code, bad.error_message) == (E.invalid_request, None)
        acl_target.add_acls(_acl(topic, "DESCRIBE"))
        r = _heartbeat(c, body)
        assert (r.error_code, r.member_id) == (E.none, "alice-member-1")
        d = c.request(77, 1, {"group_ids": [group], "include_authorized_operations": True}).groups[0]
        assert (d.error_code, d.group_state, [m.member_id for m in d.members]) == (E.none, "Stable", ["alice-member-1"])
        assert d.authorized_operations > 0
        d = c.request(77, 1, {"group_ids": [_name("other")], "include_authorized_operations": False}).groups[0]
        assert d.error_code == E.group_authorization_failed
