"""STEF test suite: one package per project package (see tests/README or the layout in README.md)."""
