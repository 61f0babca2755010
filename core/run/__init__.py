"""The task side: the runtime shim that executes a step on every backend, the step context, run
state on disk, markers, live output, the cache, redaction. Imports ``checkpoint``,
``failure``, ``model`` and ``base``; never ``dsl``, ``record``, ``report`` or anything
above.
"""
