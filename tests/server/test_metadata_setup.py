"""Producer id blocks in the metadata store, shared by brokers: a compare-and-set per block."""

from __future__ import annotations

from odradek.metadata import layout
from odradek.metadata.cluster_metadata import ClusterMetadata
from odradek.metadata.embedded_store import EmbeddedStore
from odradek.server.metadata_setup import open_producer_ids


def test_brokers_sharing_the_store_never_take_the_same_block(tmp_path):
    metadata = ClusterMetadata(EmbeddedStore(tmp_path / "meta"))
    one, two = open_producer_ids(metadata, 1), open_producer_ids(metadata, 2)
    a = [one.next_producer_id() for _ in range(3)]
    b = [two.next_producer_id() for _ in range(1500)]
    c = [one.next_producer_id() for _ in range(1000)]
    assert a == [0, 1, 2] and b[0] == 1000 and c[-1] == 3002  # one used up its first block, then took 3000-3999
    assert len(set(a + b + c)) == len(a + b + c)
    assert layout.decode_producer_id_block(metadata.store.get(layout.LATEST_PRODUCER_ID_BLOCK)[0]) == (1, 3000, 3999)


def test_a_block_taken_between_read_and_write_makes_the_broker_take_the_next(tmp_path):
    metadata = ClusterMetadata(EmbeddedStore(tmp_path / "meta"))
    store = metadata.store
    rival = open_producer_ids(metadata, 2)
    rival.next_producer_id()  # block 0-999 is broker 2's
    real_get = store.get
    raced = []

    def get_then_lose_the_race(path):
        answer = real_get(path)
        if not raced:  # another broker writes right after our read
            raced.append(True)
            store.set(path, layout.encode_producer_id_block(2, 1000, 1999))
        return answer

    store.get = get_then_lose_the_race
    assert open_producer_ids(metadata, 1).next_producer_id() == 2000
