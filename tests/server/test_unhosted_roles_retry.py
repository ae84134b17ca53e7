"""A role LeaderAndIsr gave whose log could not be created (a full disk) waits in
``ReplicaManager.unhosted_roles``: the partition is not led and answers NOT_LEADER_OR_FOLLOWER
meanwhile (CreateTopics does not wait for it), and the background retry
(``state_change.retry_unhosted_roles``) takes the role once the log can be created."""

import errno
import os

from kafka.admin import KafkaAdminClient, NewTopic

from odradek.protocol.generated.error_codes import ErrorCode
from odradek.server import background
from odradek.storage.log_manager import LogManager
from odradek.testing.broker import InProcessBroker
from tests.server.clients import wait_until
from tests.server.wire import WireClient, produce_body, simple_batch


def test_partitions_are_led_once_their_log_can_be_created(tmp_path, monkeypatch):
    monkeypatch.setattr(background, "UNHOSTED_ROLES_RETRY_MS", 50)
    create_log = LogManager.get_or_create_log
    disk_full = [True]

    def refused_while_full(self, topic, *args, **kwargs):
        if disk_full[0] and topic == "t":
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return create_log(self, topic, *args, **kwargs)

    monkeypatch.setattr(LogManager, "get_or_create_log", refused_while_full)
    with InProcessBroker(tmp_path / "data") as b:
        admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
        admin.create_topics([NewTopic("t", 2, 1)])
        admin.close()

        def led():
            return b.call(lambda: sorted(i for t, i in b.broker.replica_manager.partitions if t == "t"))

        assert led() == []
        # (wait_until: a retry pass under way holds the roles aside for a moment)
        wait_until(lambda: b.call(lambda: sorted(i for t, i in b.broker.replica_manager.unhosted_roles
                                                 if t == "t")) == [0, 1], what="both roles waiting")
        client = WireClient(b.bootstrap)
        _, response = client.request("Produce", 8, produce_body("t", 0, simple_batch([b"x"])))
        assert response.responses[0].partition_responses[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        disk_full[0] = False
        wait_until(lambda: led() == [0, 1], what="both partitions led")
        _, response = client.request("Produce", 8, produce_body("t", 0, simple_batch([b"x"])))
        assert response.responses[0].partition_responses[0].error_code == ErrorCode.NONE
        client.close()
