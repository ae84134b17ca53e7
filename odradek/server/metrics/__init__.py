"""The broker's metrics, under the names Kafka users chart through the Prometheus JMX exporter.

Counting is plain integer arithmetic on objects the hot paths already hold
(``broker_topic_metrics``: per topic; ``request_metrics``: per API); everything else is
read from the broker's state when ``/metrics`` is scraped (``collector``). The HTTP listener
(``http_listener``, ``http.listeners``) serves the Prometheus text format and the health
checks; ``broker_metrics`` ties these to the broker's lifecycle.
"""
