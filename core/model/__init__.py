"""The frozen description of a pipeline that a task reads: portable types and codecs, values
and artifacts, step and pipeline specs, policies, conditions as data, the graph checks.
Imports only ``base``.
"""
