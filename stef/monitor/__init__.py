"""Monitoring: drift between agent versions (:mod:`.drift`, its data types in :mod:`.models`, :mod:`.statistics`,
:mod:`.windows`, alert texts in :mod:`.alerts`), the weekly report (:mod:`.report`, :mod:`.charts`, :mod:`.rendering`)
and the benchmark readers (:mod:`.benchmark`)."""
