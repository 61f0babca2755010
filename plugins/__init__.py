"""Integrations behind small protocols (pandera, MLflow, S3, PyTorch, MLMD, Airflow)."""
