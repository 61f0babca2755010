"""Backends ``flyte2`` (compile) and ``flyte2-local`` (run): the `flyte` SDK 2.x, flytekit's successor.

A pipeline compiles to one Python module a Flyte 2 user deploys as it is (``flyte deploy`` /
``flyte run``): a ``flyte.TaskEnvironment`` per group of steps with the same image, resources
and secrets, one task per step calling the runtime shim (``task.py``), and a driver task whose
body ``render.py`` writes from the lowered plan (``driver.py`` keeps its books). flyte2-local
imports that module and runs its driver in the SDK's local mode (``local.py``).
"""
