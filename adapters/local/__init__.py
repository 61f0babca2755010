"""The ``local`` backend: interlock's own in-process runner (stdlib + the core).

It is the reference for what every backend must do, and the default for quick runs: each
step runs through the runtime shim, values cross step boundaries as files (exactly as on a
cluster, never as live objects), and the cache follows the core's keys. The backend is
``backend.LocalBackend`` (entry point ``local``).
"""
