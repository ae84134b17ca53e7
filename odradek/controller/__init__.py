"""The controller: replica assignment, partition and replica state machines, election.

Modules, in Kafka's vocabulary (``core/src/main/scala/kafka/controller/``):

* `assignment`: where replicas go (``AdminUtils.assignReplicasToBrokers``);
* `controller_context`: what the controller knows (``ControllerContext``);
* `leader_election`: the election strategies (``Election``, ``PartitionLeaderElectionAlgorithms``);
* `partition_state_machine`, `replica_state_machine`: the two state machines;
* `topic_deletion`: ``TopicDeletionManager``;
* `request_batch`: ``ControllerBrokerRequestBatch``;
* `commands`: what the controller asks of the store and brokers (conditional writes,
  LeaderAndIsr, UpdateMetadata, StopReplica, replies), as values;
* `events`, `controller`: the events and ``KafkaController``'s handling of them;
* `snapshot`: reading the store for a newly elected controller.

The edge, which does the I/O:

* `controller_service`: ``ControllerService``, the event thread (Kafka's
  ``ControllerEventManager``), election, watches, executing commands;
* `znode_writer`: the writes applied, grouped into guarded ``multi``s;
* `watched_events`: what the watches stand for, read from the store;
* `leader_imbalance`: the auto leader rebalance's choice;
* `channel_manager`: ``ControllerChannelManager``, requests to brokers (in-process to this one);
* `request_encoding`: the request values as wire requests of any version, and back.

Everything but `snapshot`, the writes' ``apply`` and the edge is plain code without I/O.
"""
