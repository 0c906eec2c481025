"""Monitoring: drift between agent versions (:mod:`.drift`) and the benchmark readers (:mod:`.benchmark`)."""
