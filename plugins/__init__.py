"""Integrations behind small protocols (pandera, MLflow, S3, PyTorch, MLMD, Airflow)."""

# From a checkout's root this folder is also reachable as a top-level `plugins`. Loading it
# under that name would make a second copy of every module (two StepFailed classes), so
# only the installed name is allowed.
if __name__ != "interlock.plugins":
    raise ImportError(
        f"{__name__!r} is the folder of the package 'interlock.plugins': import interlock.plugins "
        "(install the project first: pip install -e .)"
    )
