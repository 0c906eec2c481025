"""Tests of the warehouse package."""
