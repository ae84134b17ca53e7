"""`ZnodeWriter` at scale, on the embedded store and on a real ZooKeeper: a topic deletion's
znodes go in guarded multis of at most `MAX_OPS_PER_MULTI` ops (subtrees read level by level,
not znode by znode), and a multi that fails is replayed write by write (``znode_writer``)."""

from __future__ import annotations

import pytest

from odradek.controller import znode_writer as module
from odradek.controller.commands import CreateZnode, DeleteZnode, SetZnode
from odradek.controller.znode_writer import ZnodeWriter
from odradek.metadata import layout
from odradek.metadata.embedded_store import EmbeddedStore
from odradek.metadata.store import CheckOp, CreateOp, DeleteOp

TOPICS, PARTITIONS = ("t1", "t2"), 6


@pytest.fixture(params=["embedded", "zookeeper"])
def store(request):
    if request.param == "embedded":
        s = EmbeddedStore()
    else:
        from odradek.metadata.zookeeper_store import ZooKeeperStore

        zookeeper, chroot = request.getfixturevalue("zookeeper"), request.getfixturevalue("chroot")
        s = ZooKeeperStore(zookeeper.hosts, chroot)
    s.create(layout.CONTROLLER_EPOCH, layout.encode_controller_epoch(1))  # version 0
    for path in (layout.BROKER_TOPICS, "/config/topics", layout.DELETE_TOPICS):
        s.ensure_path(path)
    for topic in TOPICS:
        s.multi([CreateOp(layout.topic_path(topic), b"{}"),
                 CreateOp(layout.partitions_path(topic)),
                 CreateOp(layout.topic_config_path(topic), b"{}"),
                 CreateOp(layout.delete_topic_path(topic))]
                + [op for p in range(PARTITIONS)
                   for op in (CreateOp(layout.partition_path(topic, p)),
                              CreateOp(layout.partition_state_path(topic, p), b"s"))])
    yield s
    s.close()


def recording(store, sent=None):
    """Record every multi's ops (sent alone or in a `multi_many`, whose sizes go to
    ``sent``), and count the non-empty reads of children (one per znode, or one call for
    many)."""
    multis, reads, inside, batched = [], [], [], []
    real_multi, real_children, real_many = store.multi, store.children, store.children_many
    real_multi_many = store.multi_many

    def multi(ops):
        if not batched:  # the embedded store's multi_many sends them one by one
            multis.append(list(ops))
        return real_multi(ops)

    def multi_many(many):
        multis.extend(list(ops) for ops in many)
        if sent is not None:
            sent.append(len(many))
        batched.append(1)
        try:
            return real_multi_many(many)
        finally:
            batched.pop()

    def children(path):
        if not inside:  # the embedded store's children_many reads one by one, in memory
            reads.append(path)
        return real_children(path)

    def children_many(paths):
        if paths:
            reads.append(list(paths))
        inside.append(1)
        try:
            return real_many(paths)
        finally:
            inside.pop()

    store.multi, store.children, store.children_many = multi, children, children_many
    store.multi_many = multi_many
    return multis, reads


def deletion(topic: str, guard: int = 0) -> list[DeleteZnode]:
    """What `topic_deletion` writes once a topic's replicas are all deleted."""
    return [DeleteZnode(layout.topic_path(topic), guard, recursive=True),
            DeleteZnode(layout.topic_config_path(topic), guard),
            DeleteZnode(layout.delete_topic_path(topic), guard)]


def test_a_deletion_goes_in_guarded_multis_children_first(store, monkeypatch):
    monkeypatch.setattr(module, "MAX_OPS_PER_MULTI", 10)
    multis, reads = recording(store)
    writes = [w for t in TOPICS for w in deletion(t)]
    assert ZnodeWriter(lambda: store, 1).apply(writes) is None
    for topic in TOPICS:
        assert store.exists(layout.topic_path(topic)) is None
        assert store.exists(layout.topic_config_path(topic)) is None
        assert store.exists(layout.delete_topic_path(topic)) is None
    per_topic = 2 + 2 * PARTITIONS + 2  # topic, partitions, each partition and state; config, admin
    assert sum(len(m) - 1 for m in multis) == len(TOPICS) * per_topic
    assert len(multis) == -(-len(TOPICS) * per_topic // 10)  # full multis of 10
    for ops in multis:
        assert ops[0] == CheckOp(layout.CONTROLLER_EPOCH, 0) and len(ops) <= 11
        assert all(isinstance(op, DeleteOp) for op in ops[1:])
    order = [op.path for ops in multis for op in ops[1:]]
    for path in order:  # every znode goes after all its children
        assert all(not p.startswith(path + "/") for p in order[order.index(path) + 1:])
    # read level by level: the roots, then the children of partitions, of each p, of each
    # state, never per znode
    assert all(isinstance(r, list) for r in reads) and len(reads) == 4


def test_a_deletion_under_a_newer_controller_deletes_nothing(store):
    store.set(layout.CONTROLLER_EPOCH, layout.encode_controller_epoch(2))
    writes = deletion("t1")
    assert ZnodeWriter(lambda: store, 1).apply(writes) is writes[0]
    assert store.exists(layout.partition_state_path("t1", 0)) == 0
    assert store.exists(layout.delete_topic_path("t1")) == 0


def test_a_failed_multi_is_replayed_write_by_write(store, monkeypatch):
    """A znode deleted by someone else between the plan and its multi fails the multi
    (NoNode): the writes in it are replayed alone, each tolerating what is gone, and the
    rest is planned again."""
    monkeypatch.setattr(module, "MAX_OPS_PER_MULTI", 10)
    multis, _ = recording(store)
    real = store.multi
    sneaky = layout.partition_state_path("t2", 3)

    def multi(ops):
        if any(op.path == sneaky for op in ops) and store.exists(sneaky) is not None:
            store.delete(sneaky)  # another party deletes it now
        return real(ops)

    store.multi = multi
    writes = [w for t in TOPICS for w in deletion(t)]
    assert ZnodeWriter(lambda: store, 1).apply(writes) is None
    for topic in TOPICS:
        assert store.exists(layout.topic_path(topic)) is None
        assert store.exists(layout.delete_topic_path(topic)) is None


def test_a_failed_multi_returns_the_culprit_and_leaves_the_writes_after_it(store, monkeypatch):
    monkeypatch.setattr(module, "MAX_OPS_PER_MULTI", 3)
    writes = [CreateZnode("/x", 0, b"1"), CreateZnode("/y", 0, b"2"),
              SetZnode(layout.topic_path("t1"), 0, b"{}", 7),  # a stale version
              CreateZnode("/z", 0)] + deletion("t2")
    assert ZnodeWriter(lambda: store, 1).apply(writes) is writes[2]
    assert store.exists("/x") == 0 and store.exists("/y") == 0  # before it: done
    assert store.exists("/z") is None  # after it: not done
    assert store.exists(layout.partition_state_path("t2", 0)) == 0


def test_many_partition_states_are_created_in_few_multis(store):
    """A topic creation's writes (`partition_state_machine._initialize`), 1,500 partitions:
    two multis, the parents' existence read once."""
    multis, reads = recording(store)
    guard, writes = 0, []
    for p in range(1500):
        writes += [CreateZnode(layout.partitions_path("t3"), guard, exists_ok=True),
                   CreateZnode(layout.partition_path("t3", p), guard, exists_ok=True),
                   CreateZnode(layout.partition_state_path("t3", p), guard, b"s",
                               topic_partition=("t3", p))]
    store.create(layout.topic_path("t3"), b"{}")
    assert ZnodeWriter(lambda: store, 1).apply(writes) is None
    assert len(multis) == 4 and len(reads) == 1  # 1 + 3,000 ops, 1,000 a multi
    assert store.children(layout.partitions_path("t3")) == sorted(str(p) for p in range(1500))


def test_a_run_of_state_sets_sends_its_multis_together(store, monkeypatch):
    """A failover's state writes: the multis of a run of sets go in one `multi_many`; a
    stale version fails its multi alone, which is replayed write by write up to the culprit;
    the multi after it was applied on its own."""
    monkeypatch.setattr(module, "MAX_OPS_PER_MULTI", 4)
    sent = []
    real = store.multi_many
    store.multi_many = lambda multis: sent.append(len(multis)) or real(multis)
    states = [layout.partition_state_path(t, p) for t in TOPICS for p in range(PARTITIONS)]
    writes = [SetZnode(path, 0, b"new", 0) for path in states]  # 12 sets: 3 multis of 4
    writes[5] = SetZnode(states[5], 0, b"new", 7)  # stale: the second multi fails
    assert ZnodeWriter(lambda: store, 1).apply(writes) is writes[5]
    assert sent == [3]
    assert [store.get(path)[0] for path in states] == [b"new"] * 5 + [b"s"] * 3 + [b"new"] * 4


def named_deletion(topic: str, guard: int = 0, partitions=range(PARTITIONS)) -> list[DeleteZnode]:
    """`deletion` as `topic_deletion` writes it: the topic's partition znodes named."""
    subtree = tuple(path for p in partitions for path in (layout.partition_state_path(topic, p),
                                                          layout.partition_path(topic, p)))
    first, *rest = deletion(topic, guard)
    return [DeleteZnode(first.path, guard, recursive=True,
                        subtree=subtree + (layout.partitions_path(topic),))] + rest


def test_a_deletion_naming_its_subtree_reads_only_its_roots(store, monkeypatch):
    """A topic deletion whose partitions the controller names (``DeleteZnode.subtree``)
    reads the existence of its roots once, not the subtree level by level, and its multis go
    together in one `multi_many`, each still guarded and children first."""
    monkeypatch.setattr(module, "MAX_OPS_PER_MULTI", 10)
    sent = []
    multis, reads = recording(store, sent)
    writes = [w for t in TOPICS for w in named_deletion(t)]
    assert ZnodeWriter(lambda: store, 1).apply(writes) is None
    for topic in TOPICS:
        for path in (layout.topic_path(topic), layout.topic_config_path(topic), layout.delete_topic_path(topic)):
            assert store.exists(path) is None
    per_topic = 2 + 2 * PARTITIONS + 2
    assert len(reads) == 1  # the roots' existence
    assert sent == [-(-len(TOPICS) * per_topic // 10)]  # every multi in one multi_many
    order = [op.path for ops in multis for op in ops[1:]]
    assert len(order) == len(TOPICS) * per_topic
    for ops in multis:
        assert ops[0] == CheckOp(layout.CONTROLLER_EPOCH, 0)
    for path in order:  # every znode goes after all its children
        assert all(not p.startswith(path + "/") for p in order[order.index(path) + 1:])


@pytest.mark.parametrize("surprise", ["unnamed child", "named but gone"])
def test_a_named_subtree_that_differs_from_the_store_is_deleted_all_the_same(store, monkeypatch, surprise):
    """A znode the controller did not name fails its multi (NotEmpty), as does one named but
    already gone (NoNode): the write is replayed alone, reading its subtree, and everything
    goes (the multis around it too)."""
    monkeypatch.setattr(module, "MAX_OPS_PER_MULTI", 10)
    if surprise == "unnamed child":
        store.create(layout.partition_path("t1", PARTITIONS))  # a partition the controller never knew
        store.create(layout.partition_state_path("t1", PARTITIONS), b"s")
        writes = [w for t in TOPICS for w in named_deletion(t)]
    else:
        store.delete(layout.partition_state_path("t1", 2))
        store.delete(layout.partition_path("t1", 2))
        writes = [w for t in TOPICS for w in named_deletion(t)]
    assert ZnodeWriter(lambda: store, 1).apply(writes) is None
    for topic in TOPICS:
        for path in (layout.topic_path(topic), layout.topic_config_path(topic), layout.delete_topic_path(topic)):
            assert store.exists(path) is None, path
