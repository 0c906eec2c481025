"""The STEF method (DESIGN.md §2): stages A–E (clean, extract S, extract Q, align, enrichment), the
schema and observed-catalog checks, the symbolic judge (:mod:`stef.pipeline.judge`) and the score Φ.

Imports nothing from :mod:`stef.llm`, :mod:`stef.campaign` or :mod:`stef.monitor`.
"""
