"""Prometheus metrics of every step and run: pushed to a Pushgateway or written for
node_exporter's textfile collector (docs/metrics.md).

Turned on by one setting, off by default (core/run/exporters.py)::

    INTERLOCK_PUSHGATEWAY=127.0.0.1:9091 interlock run pipeline.py
    INTERLOCK_METRICS_TEXTFILE=/var/lib/node_exporter/textfile interlock run pipeline.py

The metric families are in ``families.py``; what a push carries in ``samples.py``.
"""
