"""The activity-stream demo (``odradek demo``): odradek as the pipe Kafka was built to be at
LinkedIn (Kafka 0.7's design documentation, 'Why we built this'), between a synthetic site's
activity stream, a PySpark streaming job and an offline warehouse loader.

Modules: ``pipeline`` (the steps, in order), ``activity`` (the events), ``produce``,
``embedded_broker``, ``streaming_job``, ``batch_loader``, ``report``.
"""
