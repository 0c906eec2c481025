"""Tests of the ``stef`` package, one subpackage per subsystem."""
