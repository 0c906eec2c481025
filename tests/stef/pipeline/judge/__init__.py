"""Tests of ``stef.pipeline.judge``: the symbolic judge and the calibration."""
