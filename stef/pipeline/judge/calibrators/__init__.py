"""Calibrator artifacts (JSON) for the symbolic judge; see stef.pipeline.judge.calibrate."""
