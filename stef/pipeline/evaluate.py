"""The STEF pipeline: one record in, one :class:`Evaluation` out (STEF paper §2–§3).

:func:`evaluate` runs the stages in order — rules (A), SQL and language extraction (B),
alignment (C), production normalisation (E, before judging and scoring), the verdict (D) and
Φ — on a tree parsed once. Bad input never raises: it returns an evaluation with a typed status
and its reason (``invalid_input``, ``parse_error``, ``non_select``, ``too_large``,
``internal_error``), so one bad record never stops a batch.

:func:`evaluate_many` runs the same stages on a batch, :data:`STAGE_CHUNK` records at a time and
stage by stage (each record's stages are a generator that yields between two stages): the
evaluations are those of :func:`evaluate`, in input order, for about a quarter less CPU.
"""

from __future__ import annotations

import time
import unicodedata
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass
from itertools import islice
from typing import Literal, TypeVar, overload

from sqlglot.errors import SqlglotError

from stef.errors import RulesError, UnknownDialectError
from stef.models import (
    EVALUATOR_VERSION,
    AgentLogRecord,
    AlignmentResult,
    EnrichmentResult,
    Evaluation,
    EvaluationStatus,
    JudgeResult,
    ObservedCatalog,
    ObservedCatalogBook,
    ObservedReport,
    QuestionSpec,
    SchemaReport,
    SQLSpec,
    Verdict,
)
from stef.pipeline.align import align_filters
from stef.pipeline.clean import parse_sql_with_fallback
from stef.pipeline.dialects import parser_message, resolve_dialect
from stef.pipeline.enrichment import validate_enrichment
from stef.pipeline.extract_nl import extract_question_spec
from stef.pipeline.extract_sql import extract_sql_spec
from stef.pipeline.judge.models import Judge, JudgeInput
from stef.pipeline.judge.symbolic import SymbolicJudge
from stef.pipeline.normalize import normalize
from stef.pipeline.observed import check_against_observed
from stef.pipeline.rules import AppRules, RuleBook, default_rules
from stef.pipeline.schema import DatabaseSchema, DDLParseError, SchemaError
from stef.pipeline.schema_book import SchemaBook
from stef.pipeline.schema_checks import check_against_schema
from stef.pipeline.score import compute_score
from stef.pipeline.values import compatible_text
from stef.time_cap import RecordTimeout, _check_deadline, _RecordAlarm, configured_time_cap_s

_DEFAULT_JUDGE = SymbolicJudge()

MAX_TEXT_CHARS = 20_000
"""Q_u or Q_e longer than this is not analysed (status ``too_large``)."""


def _failure(
    record: AgentLogRecord,
    status: EvaluationStatus,
    reason: str,
    dialect: str | None = None,
    flags: tuple[str, ...] = (),
    judge: str = "symbolic",
    duration_ms: float | None = None,
) -> Evaluation:
    return Evaluation(
        run_id=record.run_id,
        status=status,
        status_reason=reason,
        dialect=dialect,
        agent_id=record.agent_id,
        agent_version=record.agent_version,
        app_id=record.app_id,
        judge=judge,
        flags=flags,
        duration_ms=duration_ms,
    )


@dataclass(frozen=True, slots=True)
class Prepared:
    """One record through stages A–E, ready for a verdict (:func:`prepare`'s result).

    Attributes:
        record: the logged answer.
        rules: R_app of its app (Φ's weights come from ``rules.scoring``).
        dialect: the dialect S was parsed in.
        flags: the cleaning / splitting flags of S.
        started: ``time.perf_counter()`` when the record's evaluation began (:func:`finish`'s
            default ``duration_ms`` counts from it; :func:`evaluate_many` passes each record's own time).
        sql_spec: stage B's features of S, before stage E's normalisation.
        question_spec, enriched_spec: stage C's specs of Q_u and Q_e.
        enrichment: the enrichment check of Q_e (``None`` without Q_e).
        alignment: stage D's filter alignment.
        normalization_rules_applied: stage E's rules that fired.
        schema_report, observed_report: S against the app's schema / observed catalog, when given.
        judge_input: what the judge reads (normalised specs, the schema, the findings so far).
    """

    record: AgentLogRecord
    rules: AppRules
    dialect: str
    flags: tuple[str, ...]
    started: float
    sql_spec: SQLSpec
    question_spec: QuestionSpec
    enriched_spec: QuestionSpec | None
    enrichment: EnrichmentResult | None
    alignment: AlignmentResult
    normalization_rules_applied: tuple[str, ...]
    schema_report: SchemaReport | None
    observed_report: ObservedReport | None
    judge_input: JudgeInput


class _RecordClock:
    """Seconds one record's own stages have run (for ``duration_ms`` and the per-record time cap).

    :func:`evaluate_many` takes the records of a chunk through the stages together
    (:data:`STAGE_CHUNK`), so the wall time since a record's first stage would count the other
    records' stages too: the clock runs only while the record's own stage does
    (:meth:`resume`, :meth:`pause`). A clock made with ``running=True`` runs from its creation
    (one record evaluated alone: :func:`prepare`, :func:`evaluate`).

    >>> clock = _RecordClock(running=False)
    >>> clock.elapsed_s()
    0.0
    """

    __slots__ = ("_since", "started", "used")

    def __init__(self, running: bool = True) -> None:
        self.started = time.perf_counter()
        """``time.perf_counter()`` when the clock was made (:attr:`Prepared.started`)."""
        self.used = 0.0
        """Seconds of the record's stages that have ended."""
        self._since: float | None = self.started if running else None

    def resume(self) -> None:
        """Start counting (a stage of the record begins)."""
        self._since = time.perf_counter()

    def pause(self) -> None:
        """Stop counting (the stage ended); a paused clock stays as it is."""
        if self._since is not None:
            self.used += time.perf_counter() - self._since
            self._since = None

    def elapsed_s(self) -> float:
        """Seconds counted so far, the running stage included."""
        return self.used + (time.perf_counter() - self._since if self._since is not None else 0.0)

    def elapsed_ms(self) -> float:
        """:meth:`elapsed_s` in milliseconds, rounded to the microsecond (``duration_ms``)."""
        return round(self.elapsed_s() * 1000, 3)


StagesResult = TypeVar("StagesResult")
"""What a record's stages return (:func:`_run_stages`)."""


def _run_stages(stages: Generator[None, None, StagesResult], deadline: float | None) -> StagesResult:
    """Run ``stages`` to the end, checking ``deadline`` between two stages.

    Raises:
        RecordTimeout: ``deadline`` passed between two stages.
    """
    try:
        while True:
            try:
                next(stages)
            except StopIteration as done:
                result: StagesResult = done.value
                return result
            _check_deadline(deadline)
    finally:
        stages.close()


def prepare(
    record: AgentLogRecord,
    rules: AppRules | None = None,
    judge_name: str = "symbolic",
    default_dialect: str | None = None,
    deadline: float | None = None,
    schema: DatabaseSchema | None = None,
    observed: ObservedCatalog | None = None,
) -> Prepared | Evaluation:
    """Stages A–E of one record and the judge's input (STEF paper §2.A–E); no verdict yet.

    Args: as :func:`evaluate` (``judge_name`` is recorded on a failure).

    Returns:
        A :class:`Prepared` record, or the failure :class:`Evaluation` (``invalid_input``,
        ``too_large``, ``parse_error`` ... with its reason) of a record that cannot be judged.

    Raises:
        RecordTimeout: ``deadline`` passed between two stages.
    """
    return _run_stages(
        _prepare_stages(
            record, rules or default_rules(), judge_name, default_dialect, schema, observed, _RecordClock()
        ),
        deadline,
    )


def _prepare_stages(
    record: AgentLogRecord,
    rules: AppRules,
    judge_name: str,
    default_dialect: str | None,
    schema: DatabaseSchema | None,
    observed: ObservedCatalog | None,
    clock: _RecordClock,
) -> Generator[None, None, Prepared | Evaluation]:
    """:func:`prepare` as a generator that yields between two stages (parsing, the SQL's
    features, the questions' specs, the alignment and normalisation); ``clock`` times the record."""
    try:
        dialect = resolve_dialect(record.dialect or default_dialect or rules.default_dialect)
    except UnknownDialectError:
        return _failure(
            record,
            EvaluationStatus.INVALID_INPUT,
            f"unknown SQL dialect {record.dialect!r} in the record",
            record.dialect,
            judge=judge_name,
            duration_ms=clock.elapsed_ms(),
        )
    if is_blank(record.question):
        return _failure(
            record,
            EvaluationStatus.INVALID_INPUT,
            "question is empty",
            dialect,
            judge=judge_name,
            duration_ms=clock.elapsed_ms(),
        )
    if is_blank(record.sql):
        return _failure(
            record,
            EvaluationStatus.INVALID_INPUT,
            "SQL is empty",
            dialect,
            judge=judge_name,
            duration_ms=clock.elapsed_ms(),
        )
    for label, text in (("question", record.question), ("enriched question", record.enriched_question or "")):
        if len(text) > MAX_TEXT_CHARS:
            return _failure(
                record,
                EvaluationStatus.TOO_LARGE,
                f"{label} is {len(text)} characters, over the {MAX_TEXT_CHARS} cap",
                dialect,
                judge=judge_name,
                duration_ms=clock.elapsed_ms(),
            )

    record = with_compatible_questions(record)
    parsed = parse_sql_with_fallback(record.sql, dialect)
    dialect = parsed.dialect
    yield  # the cap is checked after the parse, also for a text that does not parse
    if parsed.error is not None or parsed.answer is None:
        status = EvaluationStatus(parsed.error or "parse_error")
        return _failure(
            record,
            status,
            parsed.error_message or "no answer statement",
            dialect,
            parsed.flags,
            judge_name,
            clock.elapsed_ms(),
        )

    try:
        sql_spec = extract_sql_spec(parsed.answer, dialect, rules, parsed.flags)
        schema_report = (
            check_against_schema(
                parsed.answer, schema, f"{record.question} {record.enriched_question or ''}", sql_spec.tables, dialect
            )
            if schema is not None
            else None
        )
        observed_report = check_against_observed(parsed.answer, observed) if observed is not None else None
        yield
        question_spec = extract_question_spec(record.question, dialect, rules)
        enriched_spec = extract_question_spec(record.enriched_question, dialect, rules, reference=record.question)
        yield
        enrichment = validate_enrichment(question_spec, enriched_spec, record.question, record.enriched_question)
        alignment = align_filters(
            sql_spec, question_spec, enriched_spec, record.question, record.enriched_question, rules
        )
        normalised = normalize(sql_spec, question_spec, enriched_spec, rules)
    except RecursionError:
        return _failure(
            record,
            EvaluationStatus.PARSE_ERROR,
            "SQL nests too deeply to analyse",
            dialect,
            parsed.flags,
            judge_name,
            clock.elapsed_ms(),
        )
    except SqlglotError as error:  # a tree sqlglot parsed but cannot analyse (its scopes, its generator)
        return _failure(
            record,
            EvaluationStatus.PARSE_ERROR,
            f"sqlglot cannot analyse this SQL ({type(error).__name__}: {parser_message(error)})",
            dialect,
            parsed.flags,
            judge_name,
            clock.elapsed_ms(),
        )
    judge_input = JudgeInput(
        question=record.question,
        enriched_question=record.enriched_question,
        sql=parsed.text if len(parsed.statements) == 1 else parsed.answer.sql(dialect=dialect or None),
        sql_spec=normalised.sql_spec,
        question_spec=question_spec,
        enriched_spec=enriched_spec,
        alignment=alignment,
        normalization_rules_applied=normalised.applied,
        grouping_required=normalised.grouping_required,
        rules=rules,
        enrichment=enrichment,
        schema_report=schema_report,
        schema=schema,
        observed_report=observed_report,
        app_id=record.app_id,
    )
    return Prepared(
        record,
        rules,
        dialect,
        parsed.flags,
        clock.started,
        sql_spec,
        question_spec,
        enriched_spec,
        enrichment,
        alignment,
        normalised.applied,
        schema_report,
        observed_report,
        judge_input,
    )


def overridden(prepared: Prepared, result: JudgeResult) -> JudgeResult:
    """The verdict :func:`finish` stores for ``result``: INCORRECT with P(correct) 0 and confidence 1
    when the answer holds a non-SELECT statement (whatever the judge said), else ``result`` itself.

    The overridden rationale starts with the stored verdict and P(correct); the judge's own
    rationale follows as such (it named its own verdict and p, e.g. ``POTENTIALLY_INCORRECT
    (calibrated P(correct)=0.40 …)``, which read as the answer's when it came first).

    Args:
        prepared: :func:`prepare`'s result.
        result: a judge's verdict of ``prepared.judge_input``.
    """
    if any(f.startswith("non_select_statement") for f in prepared.flags):
        return result.model_copy(
            update={
                "verdict": Verdict.INCORRECT,
                "confidence": 1.0,
                "p_correct": 0.0,
                "rationale": (
                    f"{Verdict.INCORRECT.value} (P(correct)=0.00): the answer is no read-only query "
                    "(a non-SELECT statement or a side-effecting function); "
                    f"the judge alone said: {result.rationale}"
                )[:2000],
            }
        )
    return result


def finish(
    prepared: Prepared,
    result: JudgeResult,
    evaluator_version: str = EVALUATOR_VERSION,
    duration_ms: float | None = None,
) -> Evaluation:
    """The evaluation of a prepared record with the judge's verdict: Φ from the alignment, the
    verdict and its confidence (STEF paper §3, score Φ).

    A non-SELECT statement in the answer is never a clean answer, whatever the judge said: its
    verdict is INCORRECT with P(correct) 0 and confidence 1.

    Args:
        prepared: :func:`prepare`'s result.
        result: the judge's verdict for ``prepared.judge_input`` (symbolic, or a model's).
        evaluator_version: stamped on the evaluation.
        duration_ms: the evaluation's ``duration_ms`` (``None``: milliseconds since
            ``prepared.started``, i.e. until now).
    """
    record = prepared.record
    result = overridden(prepared, result)
    breakdown = compute_score(prepared.alignment, result.verdict, result.confidence, prepared.rules.scoring)
    return Evaluation(
        run_id=record.run_id,
        status=EvaluationStatus.EVALUATED,
        score=breakdown.score,
        band=breakdown.band,
        filter_status=prepared.alignment.status,
        verdict=result.verdict,
        confidence=result.confidence,
        p_correct=result.p_correct,
        rationale=result.rationale,
        judge=result.judge,
        dialect=prepared.dialect,
        agent_id=record.agent_id,
        agent_version=record.agent_version,
        app_id=record.app_id,
        score_breakdown=breakdown,
        alignment=prepared.alignment,
        sql_spec=prepared.sql_spec,
        question_spec=prepared.question_spec,
        enriched_spec=prepared.enriched_spec,
        enrichment_status=prepared.enrichment.status if prepared.enrichment is not None else None,
        enrichment=prepared.enrichment,
        normalization_rules_applied=prepared.normalization_rules_applied,
        schema_report=prepared.schema_report,
        observed_report=prepared.observed_report,
        suspected_errors=result.suspected_errors,
        flags=prepared.flags,
        duration_ms=round((time.perf_counter() - prepared.started) * 1000, 3) if duration_ms is None else duration_ms,
        evaluator_version=evaluator_version,
    )


def evaluate(
    record: AgentLogRecord,
    rules: AppRules | None = None,
    judge: Judge | None = None,
    default_dialect: str | None = None,
    deadline: float | None = None,
    schema: DatabaseSchema | None = None,
    observed: ObservedCatalog | None = None,
    evaluator_version: str = EVALUATOR_VERSION,
) -> Evaluation:
    """Evaluate one agent answer with the STEF method: ``finish(prepare(record, ...),
    judge.judge(prepared.judge_input))`` (:func:`prepare`, :func:`finish`).

    Args:
        record: the logged answer (Q_u, Q_e, S, dialect, app id ...).
        rules: R_app for the record's app (``None``: ``rules/default.json``).
        judge: the semantic judge (``None``: :class:`SymbolicJudge`).
        default_dialect: dialect for records with none, before the rules' default (e.g. the
            CLI's ``--dialect``); must be a valid sqlglot name.
        deadline: ``time.perf_counter()`` value after which the record is abandoned with
            :class:`RecordTimeout` (checked between stages; works in any thread).
        schema: the app's database schema, when the team has one: S is also checked against it
            (:func:`stef.pipeline.schema_checks.check_against_schema`) and the with-schema calibrator
            judges; ``None``: schema-free (the STEF method as published).
        observed: the app's observed catalog (:mod:`stef.pipeline.observed`): S is also compared with
            what the app's earlier answers used.
        evaluator_version: stamped on an evaluated record (:func:`evaluate_many` passes the
            run's, with ``+schema`` / ``+observed``); failures carry the default.

    Returns:
        An :class:`Evaluation`; ``status`` is ``evaluated`` with ``score`` set, or a typed
        failure status with ``status_reason`` (never raises for bad input).

    >>> r = AgentLogRecord(run_id="r1", question="How many users live in 'Rome'?",
    ...     sql="SELECT COUNT(*) FROM users WHERE city = 'Rome'", dialect="sqlite")
    >>> e = evaluate(r)
    >>> e.status.value, e.filter_status.value, e.verdict.value, e.score, e.p_correct > 0.65
    ('evaluated', 'FULLY_APPLIED', 'CORRECT', 80.0, True)
    """
    stages = _judged_stages(
        record,
        rules,
        judge or _DEFAULT_JUDGE,
        default_dialect,
        schema,
        observed,
        evaluator_version,
        True,
        _RecordClock(),
    )
    judged = _run_stages(stages, deadline)
    assert judged.evaluation is not None  # finished by default
    return judged.evaluation


@dataclass(frozen=True, slots=True)
class Judged:
    """One record through stages A–E and the batch judge's verdict (:func:`judge_many_prepared`).

    Attributes:
        evaluation: the finished evaluation, or a record's failure (typed status and reason);
            ``None`` when the record was judged but not finished (``finished=False``).
        prepared: the record's stages (``None`` for a failure).
        result: the judge's verdict of ``prepared.judge_input`` (``None`` for a failure).
        duration_ms: milliseconds of the record's own stages, up to its verdict (``None`` for a failure).
    """

    evaluation: Evaluation | None
    prepared: Prepared | None = None
    result: JudgeResult | None = None
    duration_ms: float | None = None


def _judged_stages(
    record: AgentLogRecord,
    rules: AppRules | None,
    judge: Judge,
    default_dialect: str | None,
    schema: DatabaseSchema | None,
    observed: ObservedCatalog | None,
    evaluator_version: str,
    finished: bool,
    clock: _RecordClock,
) -> Generator[None, None, Judged]:
    """``prepare(...)``, ``judge.judge(...)`` and (when ``finished``) ``finish(...)`` of one record,
    as a generator that yields between two stages (:func:`_prepare_stages`); ``clock`` times the
    record (``duration_ms``: its stages up to the verdict)."""
    judge_name = getattr(judge, "name", "symbolic")
    prepared = yield from _prepare_stages(
        record, rules or default_rules(), judge_name, default_dialect, schema, observed, clock
    )
    if isinstance(prepared, Evaluation):
        return Judged(prepared)
    yield
    try:
        result: JudgeResult = judge.judge(prepared.judge_input)
    except RecursionError:
        return Judged(
            _failure(
                record,
                EvaluationStatus.PARSE_ERROR,
                "SQL nests too deeply to analyse",
                prepared.dialect,
                prepared.flags,
                judge_name,
                clock.elapsed_ms(),
            )
        )
    duration_ms = clock.elapsed_ms()
    if finished:
        yield
        evaluation = finish(prepared, result, evaluator_version, duration_ms)
        return Judged(evaluation, prepared, result, duration_ms)
    return Judged(None, prepared, result, duration_ms)


Converted = TypeVar("Converted")


@overload
def evaluate_many(
    records: Iterable[AgentLogRecord],
    rulebook: RuleBook | None = ...,
    judge: Judge | None = ...,
    default_dialect: str | None = ...,
    time_cap_s: float | Literal["configured"] | None = ...,
    convert: None = ...,
    schemas: SchemaBook | None = ...,
    observed: ObservedCatalogBook | None = ...,
) -> list[Evaluation]: ...


@overload
def evaluate_many(
    records: Iterable[AgentLogRecord],
    rulebook: RuleBook | None = ...,
    judge: Judge | None = ...,
    default_dialect: str | None = ...,
    time_cap_s: float | Literal["configured"] | None = ...,
    *,
    convert: Callable[[Evaluation], Converted],
    schemas: SchemaBook | None = ...,
    observed: ObservedCatalogBook | None = ...,
) -> list[Converted]: ...


def evaluate_many(
    records: Iterable[AgentLogRecord],
    rulebook: RuleBook | None = None,
    judge: Judge | None = None,
    default_dialect: str | None = None,
    time_cap_s: float | Literal["configured"] | None = "configured",
    convert: Callable[[Evaluation], Converted] | None = None,
    schemas: SchemaBook | None = None,
    observed: ObservedCatalogBook | None = None,
) -> list[Evaluation] | list[Converted]:
    """Evaluate records in order; one bad record never stops the batch.

    An unexpected exception inside STEF for one record becomes an ``internal_error``
    evaluation naming the exception, and a record whose stages run past ``time_cap_s`` seconds
    gets the ``timeout`` status (SIGALRM in the main thread, else the cap checked between stages,
    see :class:`stef.time_cap._RecordAlarm`); the batch goes on. The records go through the stages
    :data:`STAGE_CHUNK` at a time, stage by stage; the cap and ``duration_ms`` count each record's
    own stages. An invalid rule file
    (:class:`stef.errors.RulesError`) is a configuration error and is raised.

    Args:
        records: the records to evaluate.
        rulebook: resolves each record's ``app_id`` to its rules (``None``: the bundled rules).
        judge: the semantic judge (``None``: :class:`SymbolicJudge`).
        default_dialect: dialect for records that name none.
        time_cap_s: per-record cap in seconds (``None`` or 0: no cap); ``"configured"``:
            :func:`stef.time_cap.configured_time_cap_s` (``$STEF_TIME_CAP_S``, default 2 s).
        schemas: the apps' schemas (``--schema-dir``); an app without one is judged schema-free.
            Every evaluation of the batch then carries the evaluator version with ``+schema``.
        observed: the apps' observed catalogs (``--observed-catalog``), for apps without a
            schema; the evaluator version then carries ``+observed``.
        convert: applied to each evaluation as soon as its chunk is done (e.g.
            :meth:`Evaluation.compact`, or an output line), so a batch holds at most
            :data:`STAGE_CHUNK` full evaluations: fewer live objects to scan for the garbage
            collector, less memory.

    Returns:
        One :class:`Evaluation` (or ``convert`` of it) per record, same order.

    Raises:
        RulesError: an invalid rule file.
        SchemaError: an app's schema file cannot be read.
        ConfigError: an invalid ``$STEF_TIME_CAP_S``.
    """
    batch = _evaluated(records, rulebook, judge, default_dialect, time_cap_s, schemas, observed)
    if convert is None:
        return [_finished(judged) for _, judged in batch]
    return [_converted(convert, _finished(judged), record) for record, judged in batch]


def judge_many_prepared(
    records: Iterable[AgentLogRecord],
    rulebook: RuleBook | None = None,
    judge: Judge | None = None,
    default_dialect: str | None = None,
    time_cap_s: float | Literal["configured"] | None = "configured",
    schemas: SchemaBook | None = None,
    observed: ObservedCatalogBook | None = None,
    finished: bool = True,
) -> list[Judged]:
    """:func:`evaluate_many`, keeping each record's :class:`Prepared` stages and ``judge``'s verdict
    (:class:`Judged`), so a second judge can :func:`finish` it without running the pipeline again
    (the LLM path: the symbolic verdict first, the model's for the records it is asked about).

    Args: as :func:`evaluate_many`, and
        finished: also :func:`finish` each judged record (``False``: ``Judged.evaluation`` is
            ``None`` for them, the caller finishes each record once with the verdict it keeps;
            failures always carry their evaluation).

    Returns:
        One :class:`Judged` per record, same order; a failure's evaluation carries the batch's
        evaluator version as in :func:`evaluate_many`.

    Raises: as :func:`evaluate_many`.
    """
    return [
        judged
        for _, judged in _evaluated(records, rulebook, judge, default_dialect, time_cap_s, schemas, observed, finished)
    ]


def _evaluated(
    records: Iterable[AgentLogRecord],
    rulebook: RuleBook | None,
    judge: Judge | None,
    default_dialect: str | None,
    time_cap_s: float | Literal["configured"] | None,
    schemas: SchemaBook | None,
    observed: ObservedCatalogBook | None,
    finished: bool = True,
) -> Iterator[tuple[AgentLogRecord, Judged]]:
    """The batch loop of :func:`evaluate_many`: per record, its :class:`Judged` stages and
    verdict (finished when ``finished``), under the per-record time cap."""
    if time_cap_s == "configured":
        time_cap_s = configured_time_cap_s()
    rulebook = rulebook or RuleBook()
    judge = judge or _DEFAULT_JUDGE
    version = schemas.evaluator_version(EVALUATOR_VERSION) if schemas is not None else None
    if observed is not None:
        version = observed.evaluator_version(version or EVALUATOR_VERSION)
    suffix = str(getattr(judge, "version_suffix", ""))  # deployment calibrators (+calib=...)
    if suffix:
        version = (version or EVALUATOR_VERSION) + suffix
    cap = time_cap_s or None
    with _RecordAlarm(cap) as alarm:
        chunks = iter(records)
        while chunk := list(islice(chunks, STAGE_CHUNK)):
            running: list[tuple[int, _RecordClock, Generator[None, None, Judged]]] = []
            judged: list[Judged | None] = [None] * len(chunk)
            for index, record in enumerate(chunk):
                try:
                    rules = rulebook.for_app(record.app_id)
                    schema = record_schema(schemas, record, rules, default_dialect) if schemas is not None else None
                    clock = _RecordClock(running=False)
                    stages = _judged_stages(
                        record,
                        rules,
                        judge,
                        default_dialect,
                        schema,
                        observed.for_app(record.app_id) if observed is not None else None,
                        version or EVALUATOR_VERSION,
                        finished,
                        clock,
                    )
                except RecordSchemaError as exc:  # this record's dialect cannot read its app's schema file
                    judged[index] = _stamped(
                        Judged(_failure(record, EvaluationStatus.INVALID_INPUT, str(exc), record.dialect)), version
                    )
                    continue
                except (RulesError, SchemaError):
                    raise
                except Exception as exc:
                    judged[index] = _stamped(Judged(internal_error(record, exc)), version)
                    continue
                running.append((index, clock, stages))
            while running:  # stage by stage: each stage of the chunk's records, then the next stage
                still_running = []
                for index, clock, stages in running:
                    done = _advance(chunk[index], stages, clock, alarm, cap)
                    if done is None:
                        still_running.append((index, clock, stages))
                    else:
                        judged[index] = _stamped(done, version)
                running = still_running
            for record, one in zip(chunk, judged, strict=True):
                assert one is not None  # every record of the chunk ran to its end
                yield record, one


STAGE_CHUNK = 32
"""Records :func:`evaluate_many` takes through the stages together: the first stage of each (the
parse), then the next stage of each, and so on. One stage's code then runs on many records in a row
while the processor's caches hold it, instead of every stage in turn for one record: about 380 µs of CPU
per record instead of 490 on the bench's records (``tests/benchmarks/bench_throughput.py``), with
the same evaluations. Each record's stages are timed on their own (:class:`_RecordClock`), for its
``duration_ms`` and its time cap; a chunk holds at most this many parsed trees at once."""


def _advance(
    record: AgentLogRecord,
    stages: Generator[None, None, Judged],
    clock: _RecordClock,
    alarm: _RecordAlarm,
    cap: float | None,
) -> Judged | None:
    """Run the next stage of ``record`` under its time cap: ``None`` when more stages follow, else
    the record's :class:`Judged` (its verdict, or its ``timeout`` / ``internal_error`` evaluation).

    The cap counts the record's own stages (``clock``): the SIGALRM tick interrupts a stage that
    runs past it (main thread), and the cap is checked after each stage, the last one included
    (any thread), so stages that each fit in the cap but together do not end in ``timeout`` too.

    Raises:
        RulesError, SchemaError: an invalid rule or schema file (a configuration error).
    """
    try:
        clock.resume()
        alarm.deadline = None if cap is None else time.perf_counter() + cap - clock.used
        judged: Judged | None = None
        try:
            next(stages)
        except StopIteration as done:
            judged = done.value
        finally:
            alarm.deadline = None  # a tick that fires before this line still lands in `except RecordTimeout`
            clock.pause()
        if cap is not None and clock.used > cap:
            raise RecordTimeout
        return judged
    except RecordTimeout:
        stages.close()
        return Judged(
            _failure(
                record,
                EvaluationStatus.TIMEOUT,
                f"evaluation exceeded the {cap:g} s per-record cap",
                record.dialect,
            )
        )
    except (RulesError, SchemaError):
        raise
    except Exception as exc:
        return Judged(internal_error(record, exc))


def _stamped(judged: Judged, version: str | None) -> Judged:
    """``judged`` with its evaluation stamped with the batch's evaluator ``version`` (:func:`evaluate`
    stamps an evaluated record; its failures carry the default)."""
    evaluation = judged.evaluation
    if version is None or evaluation is None or evaluation.evaluator_version == version:
        return judged
    return Judged(
        evaluation.model_copy(update={"evaluator_version": version}), judged.prepared, judged.result, judged.duration_ms
    )


def _finished(judged: Judged) -> Evaluation:
    """The evaluation of a record judged with ``finished=True`` (every record has one then)."""
    assert judged.evaluation is not None
    return judged.evaluation


class RecordSchemaError(SchemaError):
    """The app's schema file parses neither in the record's dialect nor in the app's own (the
    record gets an ``invalid_input`` evaluation with this message; the batch goes on)."""


def is_blank(text: str) -> bool:
    r"""Whether ``text`` holds nothing to read: only whitespace, control and invisible format
    characters (a zero-width space ``\u200b``, a byte-order mark, a direction mark).

    >>> is_blank(" \u200b\ufeff\n"), is_blank("How many?")
    (True, False)
    """
    return all(character.isspace() or unicodedata.category(character) in ("Cc", "Cf") for character in text)


def with_compatible_questions(record: AgentLogRecord) -> AgentLogRecord:
    r"""``record`` with its question and enriched question composed and width-folded
    (:func:`stef.pipeline.values.compatible_text`), as the values they are compared with: an
    accent typed as a combining mark (``Ala\u0301meda``) or fullwidth letters from an input method
    (``Ａｌａｍｅｄａ``) read as the SQL's ``'Alámeda'`` / ``'Alameda'``, a no-break space as a
    space. Only for scoring: the stored record keeps the text as logged.

    >>> with_compatible_questions(AgentLogRecord(run_id="r", question="Ａｌａ\u0301meda?", sql="SELECT 1")).question
    'Alámeda?'
    """
    update = {
        field: compatible
        for field, text in (("question", record.question), ("enriched_question", record.enriched_question))
        if text is not None and (compatible := compatible_text(text)) != text
    }
    return record.model_copy(update=update) if update else record


def record_schema(
    schemas: SchemaBook, record: AgentLogRecord, rules: AppRules, default_dialect: str | None = None
) -> DatabaseSchema | None:
    """The schema ``record`` is judged against: its app's file (:meth:`SchemaBook.for_app`), read
    in the record's dialect, else in the app's (the rules' ``default_dialect``, else the run's
    ``default_dialect``, else sqlglot's generic one) when the record's does not read it.

    A DDL file is the database's, in the database's dialect; a record that names another dialect
    (an agent that writes SQLite-flavoured SQL against a Postgres database) is still judged
    against it. Catalogs (``.json``) have no dialect to read them in.

    Args:
        schemas: the run's schema files.
        record: the record (its ``app_id`` and ``dialect``).
        rules: the app's rules (its ``schema`` file name and ``default_dialect``).
        default_dialect: the run's dialect (``--dialect``), if any.

    Returns:
        The app's :class:`DatabaseSchema`, or ``None`` when the app has no schema file.

    Raises:
        SchemaError: the file cannot be read (missing, not text, a broken catalog, a table
            declared twice), or does not parse in the app's configured dialect (a configuration
            error: it stops the run, whatever the records).
        RecordSchemaError: the file parses in neither the record's dialect nor the app's, and
            the record names another dialect than the app's: this record's problem.
    """
    dialect = _schema_dialect(record.dialect, rules, default_dialect)
    app_dialect = _app_dialect(rules, default_dialect)
    try:
        return schemas.for_app(record.app_id, dialect, rules.schema_file)
    except DDLParseError as in_record_dialect:  # another dialect may read it; a file that cannot be read stops the run
        if app_dialect == dialect:
            if not dialect:  # nothing named a dialect: say which one was used and how to name the database's
                raise DDLParseError(
                    f"{in_record_dialect} (read in sqlglot's generic dialect: give the database's dialect "
                    "as the rules' default_dialect, stef evaluate's --dialect or the records' dialect)"
                ) from in_record_dialect
            raise
        try:
            return schemas.for_app(record.app_id, app_dialect, rules.schema_file)
        except DDLParseError as in_app_dialect:
            if rules.default_dialect or default_dialect:  # the app's dialect is configured: the file is wrong
                raise
            raise RecordSchemaError(
                f"the app's schema file parses neither in the record's dialect {dialect or 'generic'} "
                f"({in_record_dialect}) nor in sqlglot's generic one ({in_app_dialect}); give the app's "
                "dialect with --dialect or its rules' default_dialect"
            ) from in_record_dialect


def _app_dialect(rules: AppRules, default_dialect: str | None) -> str:
    """The dialect of the app's database, its DDL read in when the record's does not read it: the
    rules' ``default_dialect`` (the app's own), else the run's (``--dialect``), else generic
    (``""``; also for an unknown name)."""
    try:
        return resolve_dialect(rules.default_dialect or default_dialect)
    except UnknownDialectError:
        return ""


def _schema_dialect(record_dialect: str | None, rules: AppRules, default_dialect: str | None) -> str:
    """The dialect an app's DDL is read in: ``record_dialect``, else the run's, else the rules'
    default (``""``, generic, when none is set or the name is unknown)."""
    try:
        return resolve_dialect(record_dialect or default_dialect or rules.default_dialect)
    except UnknownDialectError:
        return ""


def internal_error(record: AgentLogRecord, exc: BaseException) -> Evaluation:
    """The ``internal_error`` evaluation of ``record`` naming the unexpected exception ``exc``
    (its type and message, at most 1,000 characters)."""
    return _failure(record, EvaluationStatus.INTERNAL_ERROR, f"{type(exc).__name__}: {exc}"[:1000], record.dialect)


def _converted(convert: Callable[[Evaluation], Converted], evaluation: Evaluation, record: AgentLogRecord) -> Converted:
    """``convert(evaluation)``; when that fails (an evaluation that cannot be serialised), the
    ``internal_error`` evaluation of the record naming the failure, converted."""
    try:
        return convert(evaluation)
    except Exception as exc:
        return convert(internal_error(record, exc))


def rejected_evaluation(run_id: str | None, reason: str) -> Evaluation:
    """The ``invalid_input`` evaluation of a log line that is not a valid record."""
    return Evaluation(run_id=run_id, status=EvaluationStatus.INVALID_INPUT, status_reason=reason)
