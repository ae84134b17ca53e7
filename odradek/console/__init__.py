"""``odradek console``: a web console for any Kafka-compatible cluster.

- ``app``: the aiohttp app (pages, JSON API, static files) and ``ConsoleConfig``;
  ``console_server``: running it in the foreground or on a thread of its own.
- ``cluster_view``, ``topics_view``, ``groups_view``, ``message_browser``: the JSON of each
  page, from odradek's admin client and consumer, over public Kafka APIs only.
- ``host_check``: the ``Host`` names the console serves (against DNS rebinding);
  ``console_auth``: HTTP Basic and bearer-token authentication. The console acts with its own
  Kafka credentials for everyone who reaches it: app.py's docstring has the checks in order.
- ``samples``: ring buffers of end offsets and lag, sampled every few seconds, behind the
  rates, sparklines and lag charts.
- ``static/``: the HTML shell, plain ES modules and CSS (no build step), and uPlot
  (``static/vendor/uplot``, MIT) for the charts.
"""
