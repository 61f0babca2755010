"""Reference pipelines: complete, tested examples to copy.

``fraud_retrain`` is the classic retraining DAG (ingest, validate, transform, train,
evaluate, gate, register), run with ``interlock run reference_pipelines/fraud_retrain.py``.
See docs/walkthrough.md.
"""
