"""The share coordinator on a real broker: state written through ``broker.share_persister``
lands in ``__share_group_state`` and is read back after a restart (replayed by the loader);
FindCoordinator key type 2 and the state RPCs on the wire."""

from __future__ import annotations

from uuid import UUID

from odradek.coordinator.share.persister import PersisterStateBatch as B
from odradek.coordinator.share.share_partition_key import SHARE_GROUP_STATE_TOPIC, format_key
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.generated.error_codes import ErrorCode as E
from odradek.protocol.generated.find_coordinator_request import FindCoordinatorRequest
from odradek.testing.broker import InProcessBroker

TOPIC_ID = UUID(int=42)


def _broker(path):
    return InProcessBroker(path, share_coordinator_state_topic_num_partitions=3)


def test_state_survives_a_restart(tmp_path):
    data = tmp_path / "data"
    with _broker(data) as b:
        p = b.broker.share_persister
        assert b.call(p.initialize_state, "g", TOPIC_ID, 0, 1, 100) == E.NONE
        assert b.call(p.write_state, "g", TOPIC_ID, 0, 1, 2, 100, [B(100, 109, 2, 1), B(110, 119, 0, 2)]) == E.NONE
        assert b.call(p.write_state, "g", TOPIC_ID, 0, 1, 2, 105, [B(108, 112, 4, 5)]) == E.NONE
        assert b.call(p.initialize_state, "g", TOPIC_ID, 1, 1, 0) == E.NONE
        assert b.call(p.delete_state, "g", TOPIC_ID, 1) == E.NONE
        topic = b.broker.metadata_image().topic(SHARE_GROUP_STATE_TOPIC)
        assert topic is not None and len(topic.partitions) == 3
        assert b.broker.metadata_image().topic_config(SHARE_GROUP_STATE_TOPIC)["cleanup.policy"] == "compact"
    with _broker(data) as b:
        p = b.broker.share_persister
        state = b.call(p.read_state, "g", TOPIC_ID, 0, 2)
        assert state.error == E.NONE and (state.state_epoch, state.start_offset) == (1, 105)
        assert state.batches == (B(105, 107, 2, 1), B(108, 112, 4, 5), B(113, 119, 0, 2))
        assert b.call(p.read_state, "g", TOPIC_ID, 0, 1).error == E.FENCED_LEADER_EPOCH
        assert b.call(p.write_state, "g", TOPIC_ID, 0, 0, 2, 105, []) == E.FENCED_STATE_EPOCH
        assert b.call(p.read_summary, "g", TOPIC_ID, 1, 0) == (E.NONE, 0, -1)  # deleted


def test_find_coordinator_share_key_and_state_rpcs_on_the_wire(broker):
    from odradek.client.connection import BrokerConnection
    from odradek.coordinator.share import state_rpc

    async def talk():
        conn = BrokerConnection("127.0.0.1", broker.port)
        await conn.connect(10)
        try:
            key = format_key("g", TOPIC_ID, 3)
            found = await conn.send(ApiKey.FIND_COORDINATOR, FindCoordinatorRequest(
                key_type=2, coordinator_keys=[key, "not-a-key"]), version=6)
            api_key, body, parse = state_rpc.REQUESTS["write_state"]("g", TOPIC_ID, 3, 1, 0, 0, (B(0, 4, 2, 1),))
            written = None
            for _ in range(50):  # the partition may still be loading right after creation
                written = parse(await conn.send(api_key, body, version=state_rpc.version_for(conn, api_key)))
                if written not in (E.COORDINATOR_LOAD_IN_PROGRESS, E.NOT_COORDINATOR):
                    break
            api_key, body, parse = state_rpc.REQUESTS["read_state"]("g", TOPIC_ID, 3, 0)
            return found, written, parse(await conn.send(api_key, body, version=state_rpc.version_for(conn, api_key)))
        finally:
            conn.abort()

    found, written, state = broker.call(talk)
    assert [(c.error_code, c.node_id) for c in found.coordinators] == [(E.NONE, 1), (E.INVALID_REQUEST, -1)]
    assert written == E.NONE
    assert state.error == E.NONE and state.batches == (B(0, 4, 2, 1),)
