"""Backend adapters: one package per backend, found through the `interlock.backends` entry points."""
