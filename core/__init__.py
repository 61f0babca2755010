"""interlock core: the portable pipeline model and the runtime shim, as layers.

Each subpackage imports only the ones below it (docs/architecture.md; the contracts are in
pyproject.toml): cli > backend > report > record | dsl > run > checkpoint | failure > model
> base. It needs the standard library, xxhash and croniter, and never imports an adapter or a plugin.
"""

# From a checkout's root this folder is also reachable as a top-level `core`. Loading it
# under that name would make a second copy of every module (two StepFailed classes), so
# only the installed name is allowed.
if __name__ != "interlock.core":
    raise ImportError(
        f"{__name__!r} is the folder of the package 'interlock.core': import interlock.core "
        "(install the project first: pip install -e .)"
    )
