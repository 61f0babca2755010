"""The ``interlock`` command."""
