"""The STEF method (DESIGN.md §3): cleaning and parsing, the rule files (R_app), the features of S
and of Q (and the enriched question), filter alignment, normalisation, the schema and observed-catalog
checks, the symbolic judge (:mod:`stef.pipeline.judge`) and the score Φ; :mod:`stef.pipeline.evaluate`
runs them (``prepare`` -> judge -> ``finish``).

Imports nothing from :mod:`stef.llm`, :mod:`stef.campaign` or :mod:`stef.monitor`.
"""
