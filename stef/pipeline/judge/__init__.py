"""Stage D, the symbolic judge: verdict rules (:mod:`.symbolic`) and the calibrated probability
(:mod:`.calibrate`, artifacts in ``calibrators/``). STEF paper §2.D.
"""
