"""Triggers that run here, with no orchestrator: ``interlock watch`` and ``triggers check``.

``schedule`` (when a Cron or Every is due), ``listing`` (what is under a data location),
``drift`` (the statistic and the champion's training data, as plugins), ``state`` (what the
watcher remembers, in the work directory), ``decide`` (which runs to start: a pure function)
and ``watcher`` (the loop, starting runs through ``il.run``). Imports ``backend`` and below;
``cli`` imports it.
"""
