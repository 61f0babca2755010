"""Importable test pipelines for the Flyte adapter (a package so pyflyte-execute can import it)."""
