"""Importable test pipelines for the KFP adapter: kfp-local's component subprocesses import
them by module name, the way a step image imports a team's pipeline package."""
