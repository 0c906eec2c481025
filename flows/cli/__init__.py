"""The ``stef`` command line (DESIGN.md §8): :mod:`flows.cli.main` builds the app from one module per command group."""
