"""What an author writes: ``@il.step``, ``@il.pipeline``, ``il.when``/``elif_``/``otherwise``,
``il.map``, sub-pipeline calls, ``il.finally_``, the built-in gates, and finding a pipeline
by name. Records a body into ``model`` specs.
"""
