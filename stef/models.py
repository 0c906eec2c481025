"""Data contracts of the STEF method: inputs, stage results and the evaluation record.

Every result is a frozen pydantic model (STYLE.md §5) so stages cannot mutate each other's
output and every object serialises to JSON for the warehouse and ``stef evaluate``.

Source: STEF paper §2 (stages A–E) and §3 (score Φ); DESIGN.md §2–§3.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidatorFunctionWrapHandler, field_validator

from stef.display import json_kind

EVALUATOR_VERSION = "stef-0.2.0+symbolic-12"
"""Version of the evaluation method; part of the key of stored evaluations."""
BATCH_SIZE = 500
"""Records per evaluation batch: per ``stef evaluate`` call of :func:`stef.pipeline.evaluate.evaluate_many`,
per :func:`tasks.evaluate.evaluate_batch` task run of a nightly in threads, on Dask or with a model
judge (small enough to spread a day over the task runner's workers). A nightly in the process pool
cuts the day into fewer, larger tasks (:func:`tasks.evaluate.pool_task_count`): each task run costs
Prefect's API about 0.1 s of CPU."""


class FilterStatus(str, Enum):
    """Filter alignment classes (STEF paper §2.C)."""

    FULLY_APPLIED = "FULLY_APPLIED"
    FULLY_APPLIED_WITH_EXTRAS = "FULLY_APPLIED_WITH_EXTRAS"
    PARTIALLY_APPLIED = "PARTIALLY_APPLIED"
    NOT_APPLIED = "NOT_APPLIED"


class Verdict(str, Enum):
    """Four-point semantic verdict (STEF paper §2.D)."""

    CORRECT = "CORRECT"
    LIKELY_CORRECT = "LIKELY_CORRECT"
    POTENTIALLY_INCORRECT = "POTENTIALLY_INCORRECT"
    INCORRECT = "INCORRECT"


class EvaluationStatus(str, Enum):
    """Outcome of evaluating one record.

    ``evaluated`` is the only status that carries a score; every other value is a typed failure
    whose reason is stored in ``status_reason``.
    """

    EVALUATED = "evaluated"
    INVALID_INPUT = "invalid_input"
    """Empty question or SQL, unknown dialect, a log line that is not a valid record."""
    PARSE_ERROR = "parse_error"
    """The SQL could not be parsed in the record's dialect (parser message in the reason)."""
    NON_SELECT = "non_select"
    """The SQL holds no SELECT statement at all (only DROP/DELETE/... statements)."""
    TIMEOUT = "timeout"
    """Evaluation exceeded the per-record time cap."""
    TOO_LARGE = "too_large"
    """The SQL exceeds the size cap."""
    INTERNAL_ERROR = "internal_error"
    """An unexpected error inside STEF; the exception is stored so the record is not lost."""


class Band(str, Enum):
    """Score bands of Φ (STEF paper §3)."""

    EXCELLENT = "excellent"  # 90–100
    GOOD = "good"  # 75–90
    MARGINAL = "marginal"  # 50–75, human review
    POOR = "poor"  # < 50


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class AgentLogRecord(BaseModel):
    """One agent answer as logged by a Text-to-SQL agent (DESIGN.md §2).

    Required: ``run_id``, ``question``, ``sql``. Empty strings are accepted here and turned into
    an ``invalid_input`` status by :func:`stef.pipeline.evaluate.evaluate`, so the record is stored with
    its reason instead of being dropped. Unknown extra keys are kept (``extra="allow"``).
    """

    model_config = ConfigDict(frozen=True, extra="allow")

    run_id: str = Field(min_length=1)
    timestamp: str | None = None
    agent_id: str = "unknown"
    agent_version: str = "unknown"
    question: str
    enriched_question: str | None = None
    sql: str
    dialect: str | None = None
    app_id: str | None = None
    tool_calls: list[Any] | None = None
    tokens: Annotated[int, Field(ge=0)] | dict[str, Any] | None = None
    latency_ms: Annotated[float, Field(ge=0, allow_inf_nan=False)] | None = None
    """Milliseconds, finite and >= 0 (``"NaN"``, ``"Infinity"`` or a negative value rejects the line)."""
    cost_usd: Annotated[float, Field(ge=0, allow_inf_nan=False)] | None = None
    """US dollars, finite and >= 0."""
    model_version: str | None = None
    prompt_version: str | None = None

    @field_validator("run_id")
    @classmethod
    def _run_id_not_blank(cls, value: str) -> str:
        """A ``run_id`` of spaces only identifies nothing (as an empty one)."""
        if not value.strip():
            raise ValueError("is blank (only whitespace): a run_id identifies the answer")
        return value

    @field_validator("latency_ms", "cost_usd", mode="before")
    @classmethod
    def _number_not_boolean(cls, value: object) -> object:
        """``true`` / ``false`` are no amounts (pydantic would read them as 1 and 0)."""
        if isinstance(value, bool):
            raise ValueError(f"should be a number, not {json_kind(value)}")
        return value

    @field_validator("tokens", mode="wrap")
    @classmethod
    def _tokens_in_words(cls, value: object, handler: ValidatorFunctionWrapHandler) -> object:
        """One reason for a ``tokens`` of neither kind (pydantic gives one per member of the union,
        named by its internal tags: ``tokens.constrained-int``, ``tokens.dict[str,any]``); a
        boolean, and a negative or non-finite count at any depth of an object of counts
        (``{"prompt": -80}``, ``{"details": {"cached": -1}}``), are refused too."""
        if isinstance(value, bool):
            raise ValueError(f"should be a whole count (120) or an object of counts, not {json_kind(value)}")
        if isinstance(value, dict):
            problem = _negative_count(value, "")
            if problem is not None:
                raise ValueError(problem)
        try:
            return handler(value)
        except ValidationError:
            if isinstance(value, int) and not isinstance(value, bool) and value < 0:
                raise ValueError(f"should be 0 or more, not {value}") from None
            raise ValueError(
                'should be a whole count (120) or an object of counts ({"prompt": 80, "completion": 40}), '
                f"not {json_kind(value)}"
            ) from None


def _negative_count(counts: Mapping[Any, object], prefix: str) -> str | None:
    """Why an object of token counts is not one: a negative or non-finite number (not a boolean)
    at any depth, named by its path; ``None`` when none is (other values, such as a provider's
    ``"service_tier": "standard"``, are kept as logged)."""
    import math

    for key, item in counts.items():
        name = f"{prefix}{key}"
        if isinstance(item, Mapping):
            problem = _negative_count(item, f"{name}.")
            if problem is not None:
                return problem
        elif isinstance(item, (int, float)) and not isinstance(item, bool) and not (math.isfinite(item) and item >= 0):
            return f"count {name!r} should be 0 or more, not {item}"
    return None


class FilterPredicate(_Frozen):
    """One filter as a (column, operator, value) triple.

    ``column`` is the normalised column name without table qualifier (lower case, R_app
    mappings applied); ``operator`` is one of ``=, !=, <, <=, >, >=, IN, NOT IN, LIKE,
    NOT LIKE, BETWEEN, IS NULL, IS NOT NULL``; ``value`` is the normalised literal as text
    (lower case, whitespace collapsed) or ``None`` (IS NULL, or a non-literal right side);
    ``values`` holds all literals (IN lists, BETWEEN bounds).
    """

    column: str
    operator: str
    value: str | None = None
    values: tuple[str, ...] = ()
    raw_values: tuple[str, ...] = ()
    """The string literals as written in S (case kept), for case-sensitive comparisons."""
    clause: Literal["where", "having", "join", "qualify", "case"] = "where"
    negated: bool = False
    sql: str = ""


class SQLSpec(_Frozen):
    """Semantic features extracted from the answer SQL S (STEF paper §2.B).

    Column names are normalised (unqualified, lower case, R_app mappings applied).
    """

    dialect: str
    statement_kinds: tuple[str, ...]
    projections: tuple[str, ...]
    projection_columns: tuple[str, ...]
    plain_projections: int
    """Projections of the outer SELECT with no aggregate inside (need a GROUP BY next to one)."""
    aggregations: tuple[str, ...]
    """Upper-case aggregate function names used anywhere (``COUNT``, ``SUM`` ...)."""
    window_functions: tuple[str, ...]
    filters: tuple[FilterPredicate, ...]
    group_by: tuple[str, ...]
    order_by: tuple[tuple[str, str], ...]
    """(expression, ``ASC`` | ``DESC``) pairs of the outermost query."""
    limit: int | None
    distinct: bool
    tables: tuple[str, ...]
    joins: tuple[str, ...]
    """Join kinds (``INNER``, ``LEFT`` ...) in order."""
    join_conditions: tuple[str, ...]
    subquery_count: int
    cte_names: tuple[str, ...]
    set_operations: tuple[str, ...]
    columns: tuple[str, ...]
    """Every column referenced anywhere, normalised and de-duplicated."""
    functions: tuple[str, ...]
    """Upper-case names of every non-aggregate function (``CAST``, ``STRFTIME``, ``IIF`` ...)."""
    arithmetic: tuple[str, ...]
    """Binary arithmetic operators used (``/``, ``*``, ``+``, ``-``)."""
    literals: tuple[str, ...]
    """Every normalised string/number literal."""
    unused_tables: tuple[str, ...] = ()
    """Joined tables whose columns are used only in join conditions (scope analysis)."""
    integer_divisions: int = 0
    """Divisions with no float cast or float literal on either side (integer division risk)."""
    tautologies: int = 0
    """Comparisons of two constants (``1 = 1``): always true or false, they disable filters."""
    count_join_safety: Literal["safe", "fanout", ""] = ""
    """Whether the COUNTs over the outer SELECT's joins count each row once, by the key names
    (``safe``), can count one several times (``fanout``), or the names do not tell (``""``)."""
    own_key_joins: int = 0
    """Join equalities that pair the own keys of two different tables by name (``t1.id = t2.id``)."""
    ungrouped_aggregate_order: str | None = None
    """SQL of an ORDER BY aggregate in a SELECT with plain projections and no GROUP BY."""
    ungrouped_mixed_projection: bool = False
    """The outer SELECT projects an aggregate beside a plain column with no GROUP BY (one row,
    the plain column from an arbitrary row in SQLite)."""
    ranking_measures: tuple[str, ...] = ()
    """SQL of COUNT/SUM/AVG projections the ORDER BY ... LIMIT ranks on, beside other projections."""
    precedence_slips: tuple[str, ...] = ()
    """SQL of filter ORs whose AND side shares a column with the other side, unparenthesised
    (``a = 1 AND b < 3 OR b > 5``): the AND's other conditions hold for one alternative only."""
    null_comparisons: int = 0
    """Comparisons with ``= NULL`` / ``!= NULL`` (always unknown in SQL)."""
    date_mismatches: tuple[str, ...] = ()
    """SQL of date misuse on a date-named column with no date function: compared with a bare
    year or partial date (``dob > 1980``, ``date = '2008-08'``, ``BETWEEN … AND '2008-10'``), or
    minus an extracted date part (``birthday - STRFTIME('%Y', date)``)."""
    padded_part_mismatches: tuple[str, ...] = ()
    """SQL of STRFTIME parts (zero-padded text) compared with a value they never equal (``'9'``, ``9``)."""
    join_key_mismatches: tuple[str, ...] = ()
    """Join equalities between keys of two different entities by naming convention
    (``client_id = card_id``, ``link_to_budget = link_to_event``)."""
    constant_projections: tuple[str, ...] = ()
    """Outer projections that are plain columns the outer WHERE fixes with ``= literal``
    (more than one projection): they return a value the question already gave."""
    single_row_ordering: bool = False
    """The outer query aggregates every projection without GROUP BY (one row) yet has
    ORDER BY or LIMIT: the ranking the question asks for needs a subquery."""
    unguarded_null_order: tuple[str, ...] = ()
    """ORDER BY … LIMIT keys that sort NULLs first in the dialect and have no IS [NOT] NULL filter."""
    flags: tuple[str, ...] = ()
    """Warnings found while cleaning/splitting (non-SELECT statements, stripped prose ...)."""


class QuestionSpec(_Frozen):
    """Requirements extracted from natural language (Q_u or Q_e) by rules (STEF paper §2.B)."""

    aggregations: tuple[str, ...] = ()
    filter_values: tuple[str, ...] = ()
    """Normalised literals the question asks to filter on (quoted values, numbers, entities)."""
    entities: tuple[str, ...] = ()
    """Capitalised names in the text ("North Bohemia", "TR010"): likely filter values."""
    column_mentions: tuple[str, ...] = ()
    """Column names mentioned explicitly (backticks, ``col = value`` in hints)."""
    value_bindings: tuple[tuple[str, str, str], ...] = ()
    """(column, operator, value) triples stated in the text, e.g. ``gender = 'M'``."""
    optional_values: tuple[str, ...] = ()
    """Values Q_e mentions but Q_u does not (enumerated codes ...): matched if applied, never missing."""
    optional_bindings: tuple[tuple[str, str, str], ...] = ()
    """Definitions of Q_e whose phrase Q_u does not mention (``element = 'cl' means Chlorine``)."""
    formulas: tuple[str, ...] = ()
    """Normalised formula texts ("rate = a / b") stated in the hint."""
    top_k: int | None = None
    ordering: Literal["ASC", "DESC"] | None = None
    superlative: bool = False
    distinct: bool = False
    grouping: bool = False
    percentage: bool = False
    ratio: bool = False
    count_asked: bool = False
    list_asked: bool = False
    comparison_ops: tuple[str, ...] = ()
    """Comparison operators implied by phrases ("more than" -> ``>``, "at least" -> ``>=``)."""
    compared_values: tuple[tuple[str, str], ...] = ()
    """(number, operator) for each number read after a comparison phrase: the direction the text
    states for that number ("under age 30" -> ``("30", "<")``)."""
    years: tuple[str, ...] = ()
    null_conditions: tuple[tuple[str, str], ...] = ()
    """(column, ``IS NULL`` | ``IS NOT NULL``) conditions a hint states ("translation is not null")."""
    average_comparison: bool = False
    """The text compares with an average ("above-average", "less than the average"): S needs
    the average computed in a subquery or window, not a constant."""


class AlignmentResult(_Frozen):
    """Filter alignment between the requested and the applied filters (STEF paper §2.C)."""

    status: FilterStatus
    matched: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()
    extra: tuple[str, ...] = ()
    wrong: tuple[str, ...] = ()
    benign_extra: tuple[str, ...] = ()
    """The subset of ``extra`` confirmed benign by R_app (earns the leniency bonus)."""


class EnrichmentStatus(str, Enum):
    """How faithfully Q_e restates Q_u."""

    FAITHFUL = "faithful"
    ADDS_CONSTRAINTS = "adds_constraints"
    DROPS_CONSTRAINTS = "drops_constraints"
    CONTRADICTS = "contradicts"


class EnrichmentResult(_Frozen):
    """Outcome of comparing Q_u and Q_e.

    Attributes:
        status: the class (see module docstring).
        added: constraints Q_e adds (``"gender = m"``, ``"value 'gold'"``).
        dropped: constraints of Q_u missing from Q_e.
        contradictions: conflicting pairs, e.g. ``"year 2012 in Q_u, 2011 in Q_e"``.
    """

    status: EnrichmentStatus
    added: tuple[str, ...] = ()
    dropped: tuple[str, ...] = ()
    contradictions: tuple[str, ...] = ()


class SuspectedError(_Frozen):
    """A suspected semantic error in the NL2SQL-BUGs taxonomy (category, subcategory)."""

    category: str
    subcategory: str
    evidence: str


class JudgeResult(_Frozen):
    """Output of a :class:`stef.pipeline.judge.models.Judge` (STEF paper §2.D).

    ``p_correct`` is the calibrated P(answer correct); the verdict is monotone in it and γ is
    the probability that the verdict's side (correct or not) is right (:func:`stef.pipeline.judge.calibrate.verdict_from_probability`).
    """

    verdict: Verdict
    confidence: float = Field(ge=0.0, le=1.0)
    rationale: str
    judge: str = "symbolic"
    suspected_errors: tuple[SuspectedError, ...] = ()
    p_correct: float | None = Field(default=None, ge=0.0, le=1.0)


class SchemaReport(_Frozen):
    """What S does against the app's schema (:func:`stef.pipeline.schema_checks.check_against_schema`).

    Every item names the clause and the text as written in S, e.g.
    ``"JOIN ON t1.cds = t2.code (not a declared key pair)"``.
    """

    source: str = ""
    """The schema file (DDL or catalog) the record was checked against."""
    unknown_tables: tuple[str, ...] = ()
    unknown_columns: tuple[str, ...] = ()
    ambiguous_columns: tuple[str, ...] = ()
    """Unqualified columns two tables of their SELECT have (``ambiguous column name`` at run time)."""
    non_key_joins: tuple[str, ...] = ()
    join_type_mismatches: tuple[str, ...] = ()
    literal_type_mismatches: tuple[str, ...] = ()
    text_aggregates: tuple[str, ...] = ()
    named_columns_unused: tuple[str, ...] = ()
    """Columns of S's tables the question names word for word and S never uses."""
    primary_key_joins: tuple[str, ...] = ()
    """Joins of two single-column primary keys that no foreign key of the schema relates."""
    impossible_null_tests: tuple[str, ...] = ()
    """``IS NULL`` tests of a column the schema declares NOT NULL or primary key (never true)."""
    non_null_order_keys: tuple[str, ...] = ()
    """ORDER BY columns (lower case) the schema declares NOT NULL or primary key: no NULL sorts first."""
    count_fanouts: tuple[str, ...] = ()
    """COUNTs without DISTINCT over a join that can meet a counted row several times."""
    counts_checked: int = 0
    """COUNTs over a join whose fan-out the schema's primary keys decide (with or without one)."""
    tables_checked: int = 0
    columns_checked: int = 0
    joins_checked: int = 0


class ScoreBreakdown(_Frozen):
    """Φ and its parts (STEF paper §3): Φ = min(B, 10) / 10 × 100 × Γ."""

    filter_score: float
    verdict_score: float
    leniency_bonus: float
    base: float
    gamma_multiplier: float
    score: float
    band: Band


class ObservedReport(_Frozen):
    """What S does against its app's observed catalog (:func:`stef.pipeline.observed.check_against_observed`)."""

    source: str = ""
    """What the catalog was learned from."""
    queries: int = 0
    """Answers the catalog was learned from."""
    unseen_tables: tuple[str, ...] = ()
    unseen_columns: tuple[str, ...] = ()
    """``table.column`` no answer used, of tables read often enough to tell."""
    unseen_joins: tuple[str, ...] = ()
    """Join equalities (as written) no answer used, with how many answers read both tables."""
    tables_checked: int = 0
    joins_checked: int = 0


class Evaluation(_Frozen):
    """The full evaluation of one record: status, score, verdict and all evidence.

    This is the row that ``stef evaluate`` writes (one JSON object per input record) and that
    the warehouse stores in ``evaluations``. ``score`` is ``None`` unless ``status`` is
    ``evaluated``.
    """

    run_id: str | None
    status: EvaluationStatus
    status_reason: str | None = None
    score: float | None = None
    band: Band | None = None
    filter_status: FilterStatus | None = None
    verdict: Verdict | None = None
    confidence: float | None = None
    p_correct: float | None = None
    """Calibrated P(answer correct) in [0, 1] (``None`` unless ``status`` is ``evaluated``)."""
    rationale: str | None = None
    judge: str = "symbolic"
    judge_fallback_reason: str | None = None
    evaluator_version: str = EVALUATOR_VERSION
    dialect: str | None = None
    agent_id: str | None = None
    agent_version: str | None = None
    app_id: str | None = None
    score_breakdown: ScoreBreakdown | None = None
    alignment: AlignmentResult | None = None
    sql_spec: SQLSpec | None = None
    question_spec: QuestionSpec | None = None
    enriched_spec: QuestionSpec | None = None
    enrichment_status: EnrichmentStatus | None = None
    """How faithfully Q_e restates Q_u (``None`` when the record has no Q_e)."""
    enrichment: EnrichmentResult | None = None
    normalization_rules_applied: tuple[str, ...] = ()
    schema_report: SchemaReport | None = None
    """S against the app's schema (``None``: the app has no schema; judged schema-free)."""
    observed_report: ObservedReport | None = None
    """S against the app's observed catalog (``None``: none given)."""
    suspected_errors: tuple[SuspectedError, ...] = ()
    flags: tuple[str, ...] = ()
    cost_usd: float | None = None
    tokens: int | None = None
    duration_ms: float | None = None

    def summary_row(self) -> dict[str, Any]:
        """Flat JSON-ready dict with the contract keys first (``stef evaluate`` output)."""
        return self.model_dump(mode="json")

    def evidence_json(self) -> str:
        """The whole evaluation as one JSON document (the warehouse's ``evidence`` column)."""
        return self.model_dump_json()

    def compact(self, compress: bool = True) -> CompactEvaluation:
        """This evaluation as a :class:`CompactEvaluation`: its keys and its evidence JSON,
        zlib-compressed (``compress``, the default) or, with ``compress=False``, as text (faster,
        about 2.5 times the bytes) when that text is ASCII and at most
        :data:`PLAIN_EVIDENCE_MAX_CHARS` characters long (a longer or non-ASCII one is compressed
        all the same, so a day's text stays within :data:`PLAIN_EVIDENCE_MAX_BYTES`)."""
        text = self.model_dump_json()
        plain = not compress and len(text) <= PLAIN_EVIDENCE_MAX_CHARS and text.isascii()
        return CompactEvaluation(
            run_id=self.run_id,
            status=self.status,
            evaluator_version=self.evaluator_version,
            agent_id=self.agent_id,
            agent_version=self.agent_version,
            app_id=self.app_id,
            evidence=text if plain else zlib.compress(text.encode("utf-8"), 1),
        )

    def compact_plain(self) -> CompactEvaluation:
        """:meth:`compact` with its evidence JSON as text where it is short ASCII (``compress=False``)."""
        return self.compact(compress=False)


@dataclass(frozen=True, slots=True)
class CompactEvaluation:
    """An :class:`Evaluation` reduced to what the warehouse stores: its keys and its evidence JSON
    (about 3.3 KB of text per record of the demo's kind instead of about 20 KB of Python objects),
    zlib-compressed (about 1.3 KB) for a large day and for long or non-ASCII evidence, so a day of 100k records and its copies in
    transit between processes fit in memory. Batch tasks of the nightly flow return these.

    >>> e = Evaluation(run_id="r1", status=EvaluationStatus.EVALUATED, score=90.0).compact()
    >>> e.run_id, e.status.value, Evaluation.model_validate_json(e.evidence_json()).score
    ('r1', 'evaluated', 90.0)
    >>> plain = Evaluation(run_id="r1", status=EvaluationStatus.EVALUATED, score=90.0).compact(compress=False)
    >>> plain.evidence_json() == e.evidence_json(), type(plain.evidence).__name__, type(e.evidence).__name__
    (True, 'str', 'bytes')
    >>> [type(Evaluation(run_id="r1", status=EvaluationStatus.EVALUATED, rationale=text).compact(compress=False).evidence)
    ...  for text in ("東京", "x" * PLAIN_EVIDENCE_MAX_CHARS)]  # non-ASCII, too long: compressed all the same
    [<class 'bytes'>, <class 'bytes'>]
    """

    run_id: str | None
    status: EvaluationStatus
    evaluator_version: str
    agent_id: str | None
    agent_version: str | None
    app_id: str | None
    evidence: str | bytes
    """``Evaluation.model_dump_json()``: the text itself, or (``bytes``) the text as UTF-8
    compressed by zlib at level 1 (about 40 % of the text; compressing and decompressing cost
    about 70 µs per record on one core)."""

    def evidence_json(self) -> str:
        """The evaluation's JSON document (as :meth:`Evaluation.evidence_json`)."""
        if isinstance(self.evidence, str):
            return self.evidence
        return zlib.decompress(self.evidence).decode("utf-8")

    def evidence_size(self) -> int:
        """About the characters of the evidence JSON (compressed: 3 × its bytes), without decompressing it."""
        return len(self.evidence) if isinstance(self.evidence, str) else 3 * len(self.evidence)

    def compact(self) -> CompactEvaluation:
        """Itself (already compact)."""
        return self


PLAIN_EVIDENCE_MAX_CHARS = 4096
"""Longest evidence JSON kept as text by ``Evaluation.compact(compress=False)``, in characters
(ASCII only: one byte each). The evidence of the demo's records is 3.3 KB on average and 4.6 KB
at the 99th percentile (4 % of them longer than this, 0.3 % of Spider's); a query with hundreds
of predicates makes it several times longer, and such an evaluation is compressed."""

PLAIN_EVIDENCE_MAX_BYTES = 128 * 1024 * 1024
"""Text of the evidence a day may keep between scoring and the store: a day of at most
``PLAIN_EVIDENCE_MAX_BYTES / PLAIN_EVIDENCE_MAX_CHARS`` records (32,768) keeps each short ASCII
evidence JSON as text (:func:`evidence_compressed`); a larger day compresses every one. zlib
costs about 46 µs per record in the scoring workers and 24 µs in the store's single thread (2
cores, the demo's records): about 0.9 s of a 20k-record nightly. Text holds about 2 KB more per
record than its compressed form, at most this much in all; the 100k-record nightly compresses."""


def evidence_compressed(records: int) -> bool:
    """Whether a day of ``records`` records compresses all its evidence JSON
    (:data:`PLAIN_EVIDENCE_MAX_BYTES`, :data:`PLAIN_EVIDENCE_MAX_CHARS`).

    >>> evidence_compressed(20_000), evidence_compressed(32_768), evidence_compressed(32_769)
    (False, False, True)
    """
    return records * PLAIN_EVIDENCE_MAX_CHARS > PLAIN_EVIDENCE_MAX_BYTES


StoredEvaluation = Evaluation | CompactEvaluation
"""What the warehouse accepts for one evaluation: the full model or its compact form."""


# --- observed catalogs (stef.pipeline.observed learns and checks them; the warehouse stores them) ---

CATALOG_FORMAT = "stef-observed-catalog"
"""``format`` of an observed catalog file."""
CATALOG_FORMAT_VERSION = 1
MIN_QUERIES = 10
"""Answers an app's catalog must have learned from before it is used at all."""
OBSERVED_VERSION_SUFFIX = "+observed"
"""Appended to the evaluator version of a run that uses observed catalogs."""


class ObservedCatalog(BaseModel):
    """One app's observed catalog: counts of what its answers used.

    Attributes:
        app_id: the app.
        queries: answers it was learned from.
        tables: table -> answers that read it.
        columns: ``table.column`` -> answers that used it.
        joins: ``t1.c1=t2.c2`` -> answers that joined on it.
        values: ``table.column`` -> {literal -> answers that compared the column with it}
            (the :data:`stef.pipeline.observed.MAX_VALUES_PER_COLUMN` most frequent).
        learned_at: when (UTC, ISO-8601).
        source: what it was learned from (a folder of logs, a warehouse and its days).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    app_id: str
    queries: int = 0
    tables: dict[str, int] = Field(default_factory=dict)
    columns: dict[str, int] = Field(default_factory=dict)
    joins: dict[str, int] = Field(default_factory=dict)
    values: dict[str, dict[str, int]] = Field(default_factory=dict)
    learned_at: str = ""
    source: str = ""


class ObservedCatalogBook:
    """Observed catalogs of many apps (``--observed-catalog FILE``): ``for_app`` gives one app's
    catalog, or ``None`` when it has none or learned from fewer than :data:`MIN_QUERIES` answers."""

    def __init__(self, catalogs: Mapping[str, ObservedCatalog], source: str = "") -> None:
        self.catalogs = dict(catalogs)
        self.source = source

    def for_app(self, app_id: str | None) -> ObservedCatalog | None:
        """The app's catalog when it is usable, else ``None``."""
        catalog = self.catalogs.get(app_id or "")
        return catalog if catalog is not None and catalog.queries >= MIN_QUERIES else None

    def evaluator_version(self, base: str) -> str:
        """``base`` with :data:`OBSERVED_VERSION_SUFFIX`."""
        return base if OBSERVED_VERSION_SUFFIX in base else base + OBSERVED_VERSION_SUFFIX

    def to_json(self) -> str:
        """The catalog file's JSON text (:func:`stef.pipeline.observed.load_observed_catalogs` reads it back)."""
        return (
            json.dumps(
                {
                    "format": CATALOG_FORMAT,
                    "version": CATALOG_FORMAT_VERSION,
                    "apps": {app: c.model_dump(mode="json") for app, c in sorted(self.catalogs.items())},
                },
                indent=1,
                ensure_ascii=False,
            )
            + "\n"
        )
