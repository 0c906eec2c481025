"""Tests of the stef package."""
