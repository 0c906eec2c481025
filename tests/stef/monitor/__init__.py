"""Tests of the stef/monitor package."""
