"""Backend adapters: one package per backend, found through the `interlock.backends` entry points."""

# From a checkout's root this folder is also reachable as a top-level `adapters`. Loading it
# under that name would make a second copy of every module (two StepFailed classes), so
# only the installed name is allowed.
if __name__ != "interlock.adapters":
    raise ImportError(
        f"{__name__!r} is the folder of the package 'interlock.adapters': import interlock.adapters "
        "(install the project first: pip install -e .)"
    )
