"""STEF: schema-agnostic, reference-free evaluation of Text-to-SQL answers.

The method runs in five stages (STEF paper §2): R_app rules (:mod:`stef.pipeline.rules`), feature
extraction from SQL (:mod:`stef.pipeline.extract_sql`) and from natural language (:mod:`stef.pipeline.extract_nl`),
filter alignment (:mod:`stef.pipeline.align`), production normalisation (:mod:`stef.pipeline.normalize`), the
semantic verdict (:mod:`stef.pipeline.judge.symbolic`) and the score Φ (:mod:`stef.pipeline.score`);
:func:`stef.pipeline.evaluate.evaluate` runs them in order. This package imports no Prefect, DuckDB,
litellm or network code.
"""

from __future__ import annotations

from stef.models import EVALUATOR_VERSION, AgentLogRecord, Evaluation, EvaluationStatus

__all__ = ["EVALUATOR_VERSION", "AgentLogRecord", "Evaluation", "EvaluationStatus"]
