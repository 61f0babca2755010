"""interlock core: the portable pipeline model and the runtime shim (stdlib only)."""
