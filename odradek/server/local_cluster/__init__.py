"""A ZooKeeper-mode cluster on one machine, as child processes: what ``odradek cluster`` and
``odradek demo --brokers N`` run, and what odradek's pytest fixtures (odradek/testing/) build on.

- local_cluster.py: `LocalCluster`, a ZooKeeper and N brokers under one directory; start, clean
  stop, faults (kill -9, SIGSTOP, controlled shutdown, restart) and ZooKeeper-read state.
- broker_node.py: `BrokerNode`, one ``odradek broker`` process with a fixed id, port and data.
- zookeeper_server.py: `ZooKeeperServer`, Debian's ZooKeeper as a standalone server.

Those processes are started by odradek/server/child_process.py's `popen_child` (output to a
file, killed with their parent, optionally out of the terminal's Ctrl-C).

Modules are imported by name (nothing is re-exported here), so that asking whether ZooKeeper is
installed does not load kazoo.
"""
