"""Checkpoints: the manifest format, the store protocol and its verify scan, the local store,
the checkpointer behind ``ctx.checkpoint``, streamed I/O. Imports only ``base``.
"""
