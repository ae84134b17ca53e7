from odradek.coordinator.group.timer_queue import TimerQueue


def test_runs_due_functions_in_deadline_order():
    q = TimerQueue()
    q.schedule("b", 20, lambda: "b")
    q.schedule("a", 10, lambda: "a")
    q.schedule("c", 30, lambda: "c")
    assert q.next_deadline() == 10
    assert [f() for f in q.pop_due(25)] == ["a", "b"]
    assert q.next_deadline() == 30 and len(q) == 1


def test_rescheduling_replaces_and_cancel_removes():
    q = TimerQueue()
    q.schedule("hb", 10, lambda: 1)
    q.schedule("hb", 50, lambda: 2)
    assert q.pop_due(40) == [] and q.deadline("hb") == 50
    assert [f() for f in q.pop_due(50)] == [2]
    q.schedule("x:1", 5, lambda: 0)
    q.schedule("x:2", 5, lambda: 0)
    q.schedule("y:1", 5, lambda: 0)
    q.cancel("y:1")
    q.cancel_prefix("x:")
    assert q.pop_due(100) == [] and q.next_deadline() is None


def test_heartbeats_do_not_grow_the_heap_without_bound():
    q = TimerQueue()
    for t in range(100_000):
        q.schedule("member", t, lambda: None)
    assert len(q._heap) <= 200
