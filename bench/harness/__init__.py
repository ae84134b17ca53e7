"""odradek's benchmark harness (issue 8): odradek against a peer broker and the machine's limits.

``bench/run.py`` is the one command. A run (``session.Session``) starts odradek and Tansu side
by side on loopback, measures the machine's limits, then drives both brokers with the same
clients in alternating runs: kcat on librdkafka (``kcat``) for 100-byte records, and odradek's
own raw generators, which pipeline pre-built requests (``raw_produce``, ``raw_fetch``,
``latency``), so the broker is what is measured. Broker CPU and memory come from /proc
(``proc_stats``, ``measure``). Results go to ``bench/results/latest.json`` (``results``), the
terminal (``report``), PNG plots (``plots``) and the README section (``markdown``).
"""
