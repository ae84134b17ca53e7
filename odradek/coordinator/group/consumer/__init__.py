"""The consumer group protocol of KIP-848 (ConsumerGroupHeartbeat, ConsumerGroupDescribe).

The coordinator computes assignments itself with a server-side assignor
(``uniform_assignor``, ``range_assignor``, chosen through ``assignors``, on the value types
of ``assignment``), and drives each member's reconciliation from its state machine.
"""
