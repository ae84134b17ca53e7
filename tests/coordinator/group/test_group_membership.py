"""The classic rebalance protocol on one shard, without a network: joins, syncs, heartbeats,
leaves, timeouts, static members."""

from __future__ import annotations

from dataclasses import replace

from odradek.coordinator.group.group_requests import LeavingMember
from odradek.protocol.generated.error_codes import ErrorCode
from tests.coordinator.group.harness import CONFIG, ShardHarness

E = ErrorCode


def test_single_member_joins_syncs_and_is_stable():
    h = ShardHarness()
    join = h.join("g")
    assert not join.done  # waits for the (zero) initial delay
    assert h.state("g") == "PreparingRebalance"
    h.tick()
    r = join.result
    assert r.error == E.NONE and r.generation_id == 1 and r.leader_id == r.member_id
    assert r.protocol_name == "range" and r.member_id.startswith("c-")
    assert [m.member_id for m in r.members] == [r.member_id]
    assert h.state("g") == "CompletingRebalance"
    sync = h.sync("g", r.member_id, 1, [(r.member_id, b"mine")])
    assert sync.result.error == E.NONE and sync.result.assignment == b"mine"
    assert h.state("g") == "Stable"
    assert h.heartbeat("g", r.member_id, 1) == E.NONE
    # the generation was stored, with the assignment
    assert h.log[-1].value.generation == 1 and h.log[-1].value.members[0].assignment == b"mine"


def test_member_id_required_from_v4():
    h = ShardHarness()
    first = h.join("g", require_known=True)
    r = first.result
    assert r.error == E.MEMBER_ID_REQUIRED and r.member_id
    assert h.state("g") == "Empty"
    second = h.join("g", member_id=r.member_id, require_known=True)
    h.tick()
    assert second.result.error == E.NONE and second.result.member_id == r.member_id


def test_pending_member_that_never_joins_is_forgotten():
    h = ShardHarness()
    r = h.join("g", require_known=True, session_ms=500).result
    h.tick(600)
    late = h.join("g", member_id=r.member_id)
    assert late.result.error == E.UNKNOWN_MEMBER_ID


def test_followers_get_no_member_list_and_assignments_are_disjoint():
    h = ShardHarness()
    answers = [h.join("g", client_id=f"c{i}") for i in range(3)]
    h.tick()
    results = [a.result for a in answers]
    assert len({r.generation_id for r in results}) == 1
    leaders = [r for r in results if r.leader_id == r.member_id]
    assert len(leaders) == 1 and len(leaders[0].members) == 3
    assert all(not r.members for r in results if r is not leaders[0])
    syncs = {r.member_id: h.sync("g", r.member_id, r.generation_id) for r in results if r is not leaders[0]}
    assert not any(s.done for s in syncs.values())  # followers wait for the leader
    plan = [(r.member_id, r.member_id.encode()) for r in results]
    syncs[leaders[0].member_id] = h.sync("g", leaders[0].member_id, 1, plan)
    assert {m: s.result.assignment for m, s in syncs.items()} == {m: m.encode() for m in syncs}
    assert h.state("g") == "Stable"


def test_new_member_triggers_rebalance_and_old_members_learn_by_heartbeat():
    h = ShardHarness()
    [a] = h.joined_group("g")
    newcomer = h.join("g", client_id="new")
    assert h.state("g") == "PreparingRebalance"
    assert h.heartbeat("g", a, 1) == E.REBALANCE_IN_PROGRESS
    rejoin = h.join("g", member_id=a)  # everyone is back: completes at once
    assert rejoin.result.generation_id == 2 and newcomer.result.generation_id == 2


def test_member_that_does_not_rejoin_is_dropped_after_rebalance_timeout():
    h = ShardHarness()
    a, b = h.joined_group("g", n=2, rebalance_ms=1000, session_ms=5000)
    again = h.join("g", member_id=a, rebalance_ms=1000, session_ms=5000)
    assert not again.done
    h.tick(999)
    assert not again.done
    h.tick(1)
    assert again.result.generation_id == 2 and [m.member_id for m in again.result.members] == [a]
    assert h.heartbeat("g", b, 1) == E.UNKNOWN_MEMBER_ID


def test_leave_rebalances_at_once():
    h = ShardHarness()
    a, b = h.joined_group("g", n=2)
    response = h.apply(h.shard.leave_group("g", [LeavingMember(b)]))
    assert response == (E.NONE, [E.NONE])
    assert h.state("g") == "PreparingRebalance"
    rejoin = h.join("g", member_id=a)
    assert rejoin.result.generation_id == 2 and len(rejoin.result.members) == 1


def test_batched_leave_and_unknown_members():
    h = ShardHarness()
    a, b = h.joined_group("g", n=2)
    response = h.apply(h.shard.leave_group("g", [LeavingMember(a), LeavingMember("nope"), LeavingMember(b)]))
    assert response == (E.NONE, [E.NONE, E.UNKNOWN_MEMBER_ID, E.NONE])
    h.tick()
    assert h.state("g") == "Empty"
    assert h.log[-1].value.members == [] and h.log[-1].value.generation == 2


def test_session_timeout_removes_silent_member():
    h = ShardHarness()
    a, b = h.joined_group("g", n=2, session_ms=1000)
    h.tick(500)
    assert h.heartbeat("g", a, 1) == E.NONE
    h.tick(499)
    assert h.state("g") == "Stable"
    h.tick(1)  # b has been silent for its whole session timeout
    assert h.state("g") == "PreparingRebalance"
    assert h.heartbeat("g", a, 1) == E.REBALANCE_IN_PROGRESS
    assert h.heartbeat("g", b, 1) == E.UNKNOWN_MEMBER_ID


def test_member_waiting_in_join_is_not_expired_by_its_session():
    h = ShardHarness()
    a, _ = h.joined_group("g", n=2, session_ms=500, rebalance_ms=3000)
    waiting = h.join("g", member_id=a, session_ms=500, rebalance_ms=3000)
    h.tick(2000)  # b's session ran out; a is waiting for the rebalance
    assert waiting.result.error == E.NONE and [m.member_id for m in waiting.result.members] == [a]


def test_sync_timeout_removes_members_that_never_sync():
    h = ShardHarness()
    answers = [h.join("g", client_id=f"c{i}", rebalance_ms=1000) for i in range(2)]
    h.tick()
    leader = next(a.result for a in answers if a.result.leader_id == a.result.member_id)
    follower = next(a.result for a in answers if a.result is not leader)
    h.sync("g", leader.member_id, 1, [(leader.member_id, b"x"), (follower.member_id, b"y")])
    h.tick(900)
    assert h.heartbeat("g", leader.member_id, 1) == E.NONE
    h.tick(100)
    assert h.state("g") == "PreparingRebalance"
    assert h.heartbeat("g", follower.member_id, 1) == E.UNKNOWN_MEMBER_ID


def test_sync_errors():
    h = ShardHarness()
    [a] = h.joined_group("g")
    assert h.sync("g", a, 7).result.error == E.ILLEGAL_GENERATION
    assert h.sync("g", "stranger", 1).result.error == E.UNKNOWN_MEMBER_ID
    assert h.sync("nogroup", a, 1).result.error == E.UNKNOWN_MEMBER_ID
    assert h.sync("", a, 1).result.error == E.INVALID_GROUP_ID
    assert h.sync("g", a, 1).result.assignment == b"a-0"  # stable: the current assignment


def test_rebalance_during_sync_answers_waiting_followers():
    h = ShardHarness()
    answers = [h.join("g", client_id=f"c{i}") for i in range(2)]
    h.tick()
    follower = next(a.result for a in answers if a.result.leader_id != a.result.member_id)
    waiting = h.sync("g", follower.member_id, 1)
    h.join("g", client_id="late")
    assert waiting.result.error == E.REBALANCE_IN_PROGRESS


def test_failed_assignment_write_fails_the_sync_and_rebalances():
    h = ShardHarness()
    r = (j := h.join("g")) and (h.tick() or j.result)
    h.write_error = E.NOT_LEADER_OR_FOLLOWER
    sync = h.sync("g", r.member_id, 1, [(r.member_id, b"x")])
    assert sync.result.error == E.NOT_COORDINATOR
    assert h.state("g") == "PreparingRebalance"


def test_join_validation():
    h = ShardHarness()
    assert h.join("", client_id="x").result.error == E.INVALID_GROUP_ID
    assert h.join("g", session_ms=10).result.error == E.INVALID_SESSION_TIMEOUT
    assert h.join("g", session_ms=10**9).result.error == E.INVALID_SESSION_TIMEOUT
    assert h.join("g", member_id="who").result.error == E.UNKNOWN_MEMBER_ID
    assert h.join("g", protocol_type="").result.error == E.INCONSISTENT_GROUP_PROTOCOL


def test_inconsistent_protocols_refused():
    h = ShardHarness()
    h.joined_group("g")
    other = h.join("g", protocols=[("roundrobin", b"")])
    assert other.result.error == E.INCONSISTENT_GROUP_PROTOCOL
    assert h.join("g", protocol_type="connect").result.error == E.INCONSISTENT_GROUP_PROTOCOL


def test_protocol_selection_takes_the_common_protocol_most_members_prefer():
    h = ShardHarness()
    a = h.join("g", client_id="a", protocols=[("range", b""), ("roundrobin", b""), ("sticky", b"")])
    b = h.join("g", client_id="b", protocols=[("roundrobin", b""), ("range", b"")])
    c = h.join("g", client_id="c", protocols=[("roundrobin", b""), ("sticky", b""), ("range", b"")])
    h.tick()
    assert {x.result.protocol_name for x in (a, b, c)} == {"roundrobin"}


def test_initial_rebalance_delay_collects_members():
    h = ShardHarness(replace(CONFIG, initial_rebalance_delay_ms=300))
    first = h.join("g", client_id="a", rebalance_ms=5000)
    h.tick(200)
    second = h.join("g", client_id="b", rebalance_ms=5000)
    h.tick(100)  # the first delay ends, but a member arrived: wait once more
    assert not first.done
    h.tick(300)
    assert first.result.generation_id == second.result.generation_id == 1
    assert len(next(x for x in (first, second) if x.result.members).result.members) == 2


def test_duplicate_join_answers_the_first_request():
    h = ShardHarness()
    a, b = h.joined_group("g", n=2)
    first = h.join("g", member_id=a)
    second = h.join("g", member_id=a)
    assert first.result.error == E.REBALANCE_IN_PROGRESS
    h.join("g", member_id=b)
    assert second.result.error == E.NONE


def test_static_member_restart_in_stable_group_causes_no_rebalance():
    h = ShardHarness()
    static = h.join("g", instance_id="i-1", client_id="s")
    other = h.join("g", client_id="d")
    h.tick()
    rs, rd = static.result, other.result
    leader = rs if rs.leader_id == rs.member_id else rd
    h.sync("g", rs.member_id, 1, [(rs.member_id, b"S"), (rd.member_id, b"D")] if leader is rs else ())
    h.sync("g", rd.member_id, 1, [(rs.member_id, b"S"), (rd.member_id, b"D")] if leader is rd else ())
    assert h.state("g") == "Stable"
    restarted = h.join("g", instance_id="i-1", client_id="s").result
    assert restarted.error == E.NONE and restarted.generation_id == 1 and restarted.member_id != rs.member_id
    assert h.state("g") == "Stable"
    assert h.heartbeat("g", rd.member_id, 1) == E.NONE
    assert h.heartbeat("g", rs.member_id, 1, instance_id="i-1") == E.FENCED_INSTANCE_ID
    assert h.sync("g", restarted.member_id, 1, instance_id="i-1").result.assignment == b"S"
    assert h.log[-1].value.members[0].member_id in (restarted.member_id, rd.member_id)


def test_static_leader_rejoining_with_skip_assignment_learns_it_leads():
    h = ShardHarness()
    j = h.join("g", instance_id="i", client_id="s")
    h.tick()
    h.sync("g", j.result.member_id, 1, [(j.result.member_id, b"A")])
    r = h.join("g", instance_id="i", client_id="s", skip_assignment=True).result
    assert r.skip_assignment and r.leader_id == r.member_id and len(r.members) == 1


def test_static_member_that_misses_a_rebalance_keeps_its_place_until_the_sync_deadline():
    h = ShardHarness()
    s = h.join("g", instance_id="i", client_id="s", session_ms=5000, rebalance_ms=1000)
    d = h.join("g", client_id="d", session_ms=5000, rebalance_ms=1000)
    h.tick()
    rs, rd = s.result, d.result
    leader = rs if rs.leader_id == rs.member_id else rd
    plan = [(rs.member_id, b"S"), (rd.member_id, b"D")]
    for r in (rs, rd):
        h.sync("g", r.member_id, 1, plan if r is leader else (), instance_id="i" if r is rs else None)
    again = h.join("g", member_id=rd.member_id, session_ms=5000, rebalance_ms=1000)
    h.tick(1000)  # the static member did not rejoin: unlike a dynamic one, it is kept
    assert again.result.generation_id == 2
    assert h.heartbeat("g", rs.member_id, 1, instance_id="i") == E.ILLEGAL_GENERATION  # still a member
    h.sync("g", rd.member_id, 2, [(rd.member_id, b"D"), (rs.member_id, b"S")] if again.result.members else ())
    h.tick(1000)  # ... until it misses the SyncGroup deadline of the new generation
    assert h.heartbeat("g", rs.member_id, 2, instance_id="i") == E.UNKNOWN_MEMBER_ID


def test_group_records_replay_into_a_stable_group():
    h = ShardHarness()
    members = h.joined_group("g", n=2)
    fresh = ShardHarness()
    for record in h.log:
        fresh.shard.replay(record)
    fresh.shard.on_loaded()
    d = fresh.shard.describe_group("g")
    assert d.state == "Stable" and {m.member_id for m in d.members} == set(members)
    assert {m.assignment for m in d.members} == {b"a-0", b"a-1"}
    assert fresh.heartbeat("g", members[0], 1) == E.NONE
    fresh.tick(5000)  # nobody heartbeats after the restart: sessions end, the group empties
    fresh.tick()
    assert fresh.state("g") == "Empty"


def test_describe_and_list():
    h = ShardHarness()
    [a] = h.joined_group("g")
    h.join("other")
    d = h.shard.describe_group("g")
    assert (d.state, d.protocol_type, d.protocol_data) == ("Stable", "consumer", "range")
    assert d.members[0].member_id == a and d.members[0].assignment == b"a-0"
    assert h.shard.describe_group("missing").state == "Dead"
    listed = {g.group_id: g.state for g in h.shard.list_groups()}
    assert listed == {"g": "Stable", "other": "PreparingRebalance"}
    from odradek.coordinator.group.group_state import GroupState
    assert [g.group_id for g in h.shard.list_groups({GroupState.STABLE})] == ["g"]
    assert h.shard.list_groups(types={"consumer"}) == []
    assert len(h.shard.list_groups(types={"Classic"})) == 2


def test_group_max_size_refuses_newcomers_to_a_full_group():
    h = ShardHarness(replace(CONFIG, max_size=2))
    a, b = h.joined_group("g", n=2)
    refused = h.join("g", client_id="third")
    assert refused.result.error == E.GROUP_MAX_SIZE_REACHED and refused.result.member_id == ""
    assert h.state("g") == "Stable" and set(h.shard.groups.group("g").members) == {a, b}


def test_group_max_size_while_rebalancing_leaves_out_the_last_to_rejoin():
    h = ShardHarness(replace(CONFIG, max_size=2))
    a, b = h.joined_group("g", n=2)
    rejoined_a = h.join("g", member_id=a, client_id="c0")  # starts a rebalance
    assert h.state("g") == "PreparingRebalance"
    newcomer = h.join("g", client_id="c2")  # one member waits: room for a second
    late_b = h.join("g", member_id=b, client_id="c1")
    assert late_b.result.error == E.GROUP_MAX_SIZE_REACHED
    h.tick()
    assert rejoined_a.result.error == newcomer.result.error == E.NONE
    members = set(h.shard.groups.group("g").members)
    assert a in members and b not in members and len(members) == 2
