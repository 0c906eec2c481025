"""Tests of the flows.cli package (the ``stef`` command line)."""
