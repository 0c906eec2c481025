"""Tests of the warehouse package (one file per module)."""
