"""Small pipelines the core tests run; importable as ``core_pipelines`` (see ../conftest.py)."""
