"""The workloads of issue 8, one module per family. Each workload is a function taking the
``Session``; it appends its ``Comparison`` objects (``comparison.py``) to
``session.comparisons``. ``session.WORKLOADS`` maps the names of ``--workloads`` to them."""
