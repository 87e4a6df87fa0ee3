"""Coordinator timers (``common.Timers``): a timer pushed back at every heartbeat keeps one heap entry."""

from broker.coordinator.common import Timers


def test_a_timer_pushed_back_many_times_keeps_one_heap_entry_and_fires_at_its_last_deadline():
    now = [0]
    fired = []
    t = Timers(lambda: now[0])
    for i in range(10_000):  # a member heartbeating every 5 ms with a 45 s session timeout
        now[0] = i * 5
        t.schedule("session", 45_000, lambda: fired.append(now[0]))
    assert len(t._heap) == 1
    last = 9_999 * 5 + 45_000
    now[0] = 45_000  # the first deadline: long since pushed back
    assert t.fire_due() == [] and fired == []
    assert t.next_deadline() == last
    now[0] = last - 1
    t.fire_due()
    assert fired == []
    now[0] = last
    t.fire_due()
    assert fired == [last]
    assert not t.is_scheduled("session")


def test_a_timer_brought_forward_fires_at_the_earlier_deadline():
    now = [0]
    fired = []
    t = Timers(lambda: now[0])
    t.schedule("k", 1_000, lambda: fired.append("late"))
    t.schedule("k", 100, lambda: fired.append("early"))
    now[0] = 100
    t.fire_due()
    assert fired == ["early"]
    now[0] = 1_000
    t.fire_due()
    assert fired == ["early"]  # replaced, never fires
