"""Tests of ``stef.pipeline``: one module per pipeline module, the per-stage golden files, shared helpers."""
