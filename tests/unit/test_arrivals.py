"""broker/coordinator/arrivals.py: what the coordinator's expiries ask about requests read but not handled."""

from types import SimpleNamespace

from broker.coordinator.arrivals import Arrivals


def req(api, group="g", member="m"):
    return SimpleNamespace(api_key=api, body=SimpleNamespace(group_id=group, member_id=member))


def test_a_request_waits_from_arrival_until_its_handler_starts_counting_each_one():
    now = [10.0]
    a = Arrivals(clock=lambda: now[0])
    a.arrived(req(12))
    a.arrived(req(12))
    assert a.waiting("g", "m") and not a.waiting("g", "other")
    a.started(req(12))
    assert a.waiting("g", "m")
    a.started(req(12))
    assert not a.waiting("g", "m") and len(a) == 0
    assert a.silent_ms("g", "m") is None  # handled: the coordinator judged it, it proves nothing more


def test_a_request_dropped_unhandled_is_a_sign_of_life_from_when_it_was_read():
    now = [10.0]
    a = Arrivals(clock=lambda: now[0])
    a.arrived(req(68))
    now[0] = 11.0
    a.dropped(req(68))  # its connection closed before the handler ran
    assert not a.waiting("g", "m")
    now[0] = 12.5
    assert a.silent_ms("g", "m") == 2500


def test_a_commit_is_waited_for_but_is_no_sign_of_life_and_requests_without_ids_are_ignored():
    a = Arrivals(clock=lambda: 0.0)
    a.arrived(req(8))
    assert a.waiting("g", "m")
    a.dropped(req(8))
    assert not a.waiting("g", "m") and a.silent_ms("g", "m") is None
    a.arrived(req(68, member=""))  # a new KIP-848 member: no id yet
    a.arrived(SimpleNamespace(api_key=12, body=SimpleNamespace(group_id=b"g", member_id=7)))  # not strings
    assert len(a) == 0


def test_member_ids_a_client_makes_up_are_remembered_up_to_the_capacity_oldest_forgotten_first():
    a = Arrivals(clock=lambda: 0.0, capacity=100)
    for i in range(1000):
        a.arrived(req(12, member=f"m{i}"))
        a.dropped(req(12, member=f"m{i}"))
    assert len(a._heard) == 100 and len(a) == 0
    assert a.silent_ms("g", "m999") == 0 and a.silent_ms("g", "m0") is None
