"""Stage D, the symbolic judge: its data types (:mod:`.models`), the checks (:mod:`.requirement_checks`,
:mod:`.evidence_checks`), the verdict rules (:mod:`.symbolic`) and the calibrated probability
(:mod:`.calibrate`, artifacts in ``calibrators/``). STEF paper §2.D.
"""
