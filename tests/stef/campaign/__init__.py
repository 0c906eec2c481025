"""Tests of :mod:`stef.campaign`, one module per module of the package."""
