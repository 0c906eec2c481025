"""Reference-based campaign protocol: gold audit, six outcome classes, evidence, calibration.

Source: the experimental protocol ``seeds/003_7e3f1b24b92db84a.txt`` (Portuguese; "Protocolo de
avaliação experimental"), DESIGN.md §7 and issue 6. One question = one session = one run. For
campaign mode ``mcp`` each run is checked in the seed's order — tool-call budget, syntax of each
statement (sqlglot, configured dialect), structure against a canonical catalog, read-only
execution on the test database, comparison with the gold statements G_i — and gets the first
matching class of :class:`RunOutcome`. In ``baseline-static`` (schema in the prompt, 0 tool
calls) only the final answer is compared with G_i (:class:`BaselineOutcome`); the six classes,
latency, tokens and cost are not metrics of that mode ("Taxonomia MCP ... não se aplica ao
baseline").

Pure apart from :func:`write_evidence` (writes the per-run JSON files): no Prefect, no DuckDB.

Public API::

    audit = audit_gold(gold, db, settings)                   # execute every G_i first
    result = classify_run(run, audit, db, catalog, settings) # one run -> CampaignRunResult
    summary = summarize(results, audit, settings)            # per campaign_id
    report = calibration_report(results, evaluations)        # Φ vs outcome (AUROC, confusion)
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from enum import Enum
from itertools import product
from pathlib import Path
from typing import Any

import sqlglot
from pydantic import BaseModel, ConfigDict, Field, RootModel
from sqlglot import exp
from sqlglot.errors import OptimizeError, SqlglotError

from stef.campaign.sandbox import ExecutionResult, ResourceLimits, TestDatabase
from stef.errors import InputError
from stef.models import AgentLogRecord, Evaluation, EvaluationStatus
from stef.pipeline.dialects import parser_message
from stef.pipeline.statement_safety import NON_QUERY_STATEMENT_TYPES, QUERY_TYPES, embedded_writes

PROTOCOL_SOURCE = "seeds/003_7e3f1b24b92db84a.txt (Protocolo de avaliação experimental)"
"""Where the protocol comes from; recorded in every ``context.json``."""

CATALOG_TOOLS = ("catalog.listTables", "catalog.describeTable", "catalog.listRelationships")
"""The three basic MCP catalog tools of the seed ("as três basais")."""

LOOKUP_TOOLS = ("catalog.describeTable", "catalog.listRelationships")
"""Tool calls that look a table up (name it in ``arguments``); they count for traceability."""

TABLE_ARGUMENT_KEYS = ("table", "tableName", "table_name", "name")
"""Argument keys of a lookup tool call that name the table."""

BAND_THRESHOLDS = (50.0, 75.0, 90.0)
"""Φ thresholds of the bands (marginal, good, excellent) used for the calibration confusion matrices."""


class CampaignMode(str, Enum):
    """Campaign id kinds of the seed: MCP tools, or the schema injected in the prompt."""

    MCP = "mcp"
    BASELINE_STATIC = "baseline-static"


class RunOutcome(str, Enum):
    """The six outcome classes of ``mcp`` runs, in the seed's precedence order (first match wins)."""

    BUDGET_EXCEEDED = "budget_exceeded"
    SYNTAX_ERROR = "syntax_error"
    STRUCTURAL_ERROR = "structural_error"
    EXECUTION_ERROR = "execution_error"
    PARTIAL_SUCCESS = "partial_success"
    SUCCESS = "success"


class BaselineOutcome(str, Enum):
    """Outcome of a ``baseline-static`` run: the final answer matches G_i or not."""

    CORRECT = "correct"
    INCORRECT = "incorrect"


OUTCOME_CLASSES: tuple[str, ...] = tuple(o.value for o in RunOutcome) + tuple(o.value for o in BaselineOutcome)
"""Every outcome a run can get, MCP classes first."""

POSITIVE_OUTCOMES = frozenset({RunOutcome.SUCCESS.value, BaselineOutcome.CORRECT.value})
"""Outcomes that count as a correct answer for calibration."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ToolCall(BaseModel):
    """One MCP tool call of a session (``name`` e.g. ``catalog.describeTable``)."""

    model_config = ConfigDict(frozen=True, extra="allow")

    name: str = Field(min_length=1)
    arguments: dict[str, Any] = Field(default_factory=dict)
    duration_ms: float | None = None


class CampaignRunLog(BaseModel):
    """One line of a campaign run log (JSONL): one question = one session = one run.

    ``statements`` holds the agent's SQL statements in order (the protocol allows up to
    ``CampaignSettings.max_statements``; extra ones are flagged and not checked). ``tokens`` is a
    total or ``{"prompt": n, "completion": m}`` (``input``/``output`` also accepted).
    """

    model_config = ConfigDict(frozen=True, extra="allow")

    run_id: str = Field(min_length=1)
    campaign_id: str = Field(min_length=1, description="e.g. 'mcp' or 'baseline-static'; the mode is taken from it")
    question_id: str = Field(min_length=1)
    question: str
    tool_calls: list[ToolCall] = Field(default_factory=list)
    statements: list[str] = Field(default_factory=list)
    model_version: str | None = None
    prompt_version: str | None = None
    seed: int | str | None = None
    commit_hash: str | None = None
    tokens: int | dict[str, int] | None = None
    latency_ms: float | None = None
    cost_usd: float | None = None
    mode: CampaignMode | None = Field(default=None, description="overrides the mode read from campaign_id")

    def campaign_mode(self) -> CampaignMode:
        """``mode`` if given, else ``baseline-static`` when ``campaign_id`` starts with ``baseline``, else ``mcp``."""
        if self.mode is not None:
            return self.mode
        return CampaignMode.BASELINE_STATIC if self.campaign_id.startswith("baseline") else CampaignMode.MCP


class GoldQuestion(_Frozen):
    """One question of the gold battery: the required statements G_i (all must be matched for ``success``)."""

    question_id: str = Field(min_length=1)
    question: str
    gold_sql: list[str] = Field(min_length=1)
    source: str | None = None


class Tariff(_Frozen):
    """Price of one model version in USD per million tokens."""

    input_usd_per_million: float = Field(ge=0)
    output_usd_per_million: float = Field(ge=0)


class CampaignSettings(_Frozen):
    """Protocol settings (defaults from the seed: budget 10 tool calls, up to 5 statements)."""

    tool_budget: int = Field(default=10, ge=0, description="more tool calls than this -> budget_exceeded")
    max_statements: int = Field(default=5, ge=1)
    dialect: str = Field(default="sqlite", description="sqlglot dialect of the statements (e.g. hive, sqlite)")
    timeout_s: float = Field(default=5.0, gt=0, le=86_400, description="per-statement execution timeout (seconds)")
    row_cap: int = Field(default=10_000, ge=1, description="more rows than this is an execution error")
    max_value_bytes: int = Field(
        default=16 * 2**20,
        ge=1024,
        le=2**31 - 1,
        description="longest string, blob or row a SQLite statement may build or read (bytes); longer is an execution error",
    )
    max_result_bytes: int = Field(
        default=64 * 2**20,
        ge=1024,
        description="fetched rows of one statement, as Python objects (bytes); more is an execution error",
    )
    memory_mb: int = Field(
        default=1024,
        ge=64,
        description="memory the database worker may add after opening the test database (MiB); DuckDB's memory_limit is half of it",
    )
    float_digits: int = Field(default=9, ge=1, le=17, description="significant digits compared for floats")
    tariffs: dict[str, Tariff] = Field(
        default_factory=dict, description="model_version -> price; else litellm's prices"
    )
    infra_cost_usd: dict[str, float] = Field(
        default_factory=dict, description="C_infra per campaign_id (never added to C_i)"
    )
    use_litellm_prices: bool = True

    def resource_limits(self) -> ResourceLimits:
        """The sandbox bounds of the test database (:func:`stef.campaign.sandbox.open_test_database`).

        >>> CampaignSettings(memory_mb=256).resource_limits().memory_bytes
        268435456
        """
        return ResourceLimits(
            memory_bytes=self.memory_mb * 2**20,
            max_value_bytes=self.max_value_bytes,
            max_result_bytes=self.max_result_bytes,
        )


class CanonicalCatalog(RootModel[dict[str, list[str]]]):
    """The canonical catalog ``{table: [columns]}`` (compared case-insensitively)."""

    def normalized(self) -> dict[str, frozenset[str]]:
        """Lower-case table -> lower-case column names."""
        return {t.lower(): frozenset(c.lower() for c in cols) for t, cols in self.root.items()}


class StatementResult(_Frozen):
    """What happened to one statement: ``outcome`` is its first failing step, or ``match`` / ``no_match``."""

    index: int
    sql: str
    outcome: str
    syntax_ok: bool
    message: str | None = None
    tables: list[str] = Field(default_factory=list)
    execution_status: str | None = None
    row_count: int | None = None
    duration_ms: float | None = None
    matches_gold: list[int] = Field(default_factory=list)


class CampaignRunResult(_Frozen):
    """The classified run (``metrics.json`` is its camelCase rendering)."""

    run_id: str
    campaign_id: str
    mode: CampaignMode
    question_id: str
    question: str
    outcome: str
    reason: str
    tool_calls: int
    statements: list[StatementResult]
    required: int
    matched: list[int]
    tables_used: list[str]
    tables_looked_up: list[str]
    catalog_traceability: float | None
    latency_ms: float | None
    tokens: int | None
    cost_usd: float | None
    cost_source: str | None
    flags: list[str] = Field(default_factory=list)


class GoldAuditItem(_Frozen):
    """Audit of one gold question: ``ok`` or excluded with the reason."""

    question_id: str
    ok: bool
    reason: str | None = None
    row_counts: list[int] = Field(default_factory=list)


class GoldAudit(BaseModel):
    """Result of :func:`audit_gold`; ``results`` holds the gold rows used for comparison."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    items: list[GoldAuditItem]
    questions: dict[str, GoldQuestion]
    results: dict[str, list[ExecutionResult]] = Field(default_factory=dict, exclude=True)

    @property
    def excluded(self) -> list[GoldAuditItem]:
        """Items whose gold failed or returned nothing."""
        return [i for i in self.items if not i.ok]


class CampaignSummary(_Frozen):
    """Per-campaign figures (latency, tokens and cost are ``None`` in baseline mode)."""

    campaign_id: str
    mode: CampaignMode
    runs: int
    counts: dict[str, int]
    rates: dict[str, float]
    excluded_runs: int
    mean_tool_calls: float | None
    mean_latency_ms: float | None
    mean_tokens: float | None
    mean_cost_usd: float | None
    total_cost_usd: float | None
    infra_cost_usd: float | None
    mean_catalog_traceability: float | None


# --------------------------------------------------------------------------- inputs


def read_jsonl(path: str | Path, model: type[BaseModel]) -> list[Any]:
    """Read a JSONL file into ``model`` instances (blank lines skipped).

    Args:
        path: the file.
        model: :class:`CampaignRunLog` or :class:`GoldQuestion`.

    Returns:
        One instance per non-blank line.

    Raises:
        InputError: missing file, or a line that is not valid JSON / not valid for ``model``
            (the message names the file, line and field).
    """
    from pydantic import ValidationError

    from stef.logs import MAX_LINE_BYTES, capped_lines

    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    out: list[Any] = []
    with path.open("rb") as handle:
        for number, raw in capped_lines(handle):
            if len(raw) > MAX_LINE_BYTES:
                raise InputError(f"{path}:{number}: line longer than {MAX_LINE_BYTES} bytes")
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise InputError(f"{path}:{number}: invalid UTF-8 at byte {exc.start}") from exc
            if not line.strip():
                continue
            try:
                out.append(model.model_validate_json(line))
            except ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(str(p) for p in first.get("loc", ())) or "line"
                raise InputError(f"{path}:{number}: field `{where}`: {first.get('msg')}") from exc
    return out


def load_catalog(path: str | Path) -> CanonicalCatalog:
    """Read a canonical catalog JSON file ``{table: [columns]}``.

    Raises:
        InputError: missing file or wrong shape.
    """
    from pydantic import ValidationError

    from stef.config_files import read_config_text

    path = Path(path)
    try:
        text = read_config_text(path)
    except OSError as exc:
        raise InputError(f"{path}: cannot read the catalog file ({exc.strerror or exc})") from exc
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not a UTF-8 text file (invalid byte at offset {exc.start})") from exc
    try:
        return CanonicalCatalog.model_validate_json(text)
    except ValidationError as exc:
        raise InputError(
            f"{path}: not a catalog of the form {{table: [columns]}} ({exc.errors()[0].get('msg')})"
        ) from exc


def json_schemas() -> dict[str, dict[str, Any]]:
    """JSON Schemas of the campaign inputs and of ``metrics.json``'s source model.

    Returns:
        ``{"run_log": ..., "gold_question": ..., "catalog": ..., "settings": ..., "run_result": ...}``.

    >>> sorted(json_schemas()["gold_question"]["required"])
    ['gold_sql', 'question', 'question_id']
    """
    return {
        "run_log": CampaignRunLog.model_json_schema(),
        "gold_question": GoldQuestion.model_json_schema(),
        "catalog": CanonicalCatalog.model_json_schema(),
        "settings": CampaignSettings.model_json_schema(),
        "run_result": CampaignRunResult.model_json_schema(),
    }


# --------------------------------------------------------------------------- result comparison


def _canonical(value: Any, digits: int) -> tuple[int, Any]:
    """A sortable, NULL-safe key: numbers compared to ``digits`` significant digits, bools as numbers."""
    if value is None:
        return (0, "")
    if isinstance(value, bool | int | float):
        number = float(value)
        if math.isnan(number):
            return (1, "nan")
        return (2, float(f"{number:.{digits}g}"))
    if isinstance(value, bytes):
        return (4, value.hex())
    return (3, str(value))


def results_match(
    predicted: Sequence[Sequence[Any]], gold: Sequence[Sequence[Any]], *, ordered: bool = False, digits: int = 9
) -> bool:
    """Whether two result sets are equal: column-order insensitive, NULL-safe, float tolerant.

    Rows are compared as a multiset unless ``ordered`` (the gold has a top-level ORDER BY).
    Columns of ``predicted`` may be in any order: every assignment of predicted columns to gold
    columns whose value multisets agree is tried.

    Args:
        predicted: rows of the agent's statement.
        gold: rows of the gold statement.
        ordered: compare row order too.
        digits: significant digits compared for numbers (3 and 3.0000000001 are equal at 9).

    Returns:
        ``True`` when they match.

    >>> results_match([("b", 2), ("a", 1.0)], [(1, "a"), (2, "b")])
    True
    >>> results_match([("b", 2), ("a", 1)], [(1, "a"), (2, "b")], ordered=True)
    False
    >>> results_match([(None,)], [(None,)]), results_match([(None,)], [(0,)])
    (True, False)
    """
    if len(predicted) != len(gold):
        return False
    if not gold:
        return True
    width = len(gold[0])
    if any(len(r) != width for r in gold) or any(len(r) != width for r in predicted):
        return False
    pred_rows = [tuple(_canonical(v, digits) for v in row) for row in predicted]
    gold_rows = [tuple(_canonical(v, digits) for v in row) for row in gold]
    pred_cols = [sorted(r[i] for r in pred_rows) for i in range(width)]
    gold_cols = [sorted(r[i] for r in gold_rows) for i in range(width)]
    candidates = [[p for p in range(width) if pred_cols[p] == gold_cols[g]] for g in range(width)]
    if any(not c for c in candidates):
        return False
    tried = 0
    for assignment in product(*candidates):
        if len(set(assignment)) != width:
            continue
        tried += 1
        if tried > 5040:  # 7! assignments: give up on pathological all-equal columns
            return False
        reordered = [tuple(row[p] for p in assignment) for row in pred_rows]
        if (reordered == gold_rows) if ordered else (sorted(reordered) == sorted(gold_rows)):
            return True
    return False


def _has_top_level_order(sql: str, dialect: str) -> bool:
    try:
        tree = sqlglot.parse_one(sql, read=dialect or None)
    except SqlglotError:
        return False
    return tree is not None and tree.args.get("order") is not None


# --------------------------------------------------------------------------- gold audit


def audit_gold(gold: Iterable[GoldQuestion], db: TestDatabase, settings: CampaignSettings) -> GoldAudit:
    """Execute every gold statement first (the seed's "Auditar executabilidade das colas G_i").

    A question whose gold statement fails, times out, passes the row cap or returns no row is
    excluded, with the reason; its runs are not classified.

    Args:
        gold: the battery.
        db: the test database (gold SQL is executed as written, in SQLite/DuckDB syntax).
        settings: timeout and row cap.

    Returns:
        A :class:`GoldAudit` (``results`` keeps the gold rows for comparison).

    Raises:
        InputError: two gold questions share a ``question_id``.
    """
    items: list[GoldAuditItem] = []
    questions: dict[str, GoldQuestion] = {}
    results: dict[str, list[ExecutionResult]] = {}
    for question in gold:
        if question.question_id in questions:
            raise InputError(f"gold battery: question_id {question.question_id!r} appears twice")
        questions[question.question_id] = question
        executed = [db.execute(sql, settings.timeout_s, settings.row_cap) for sql in question.gold_sql]
        reason = None
        for index, result in enumerate(executed):
            if result.status != "ok":
                reason = f"gold statement {index + 1} {result.status}: {result.message}"
                break
            if not result.rows:
                reason = f"gold statement {index + 1} returned no rows"
                break
        items.append(
            GoldAuditItem(
                question_id=question.question_id,
                ok=reason is None,
                reason=reason,
                row_counts=[len(r.rows) for r in executed],
            )
        )
        if reason is None:
            results[question.question_id] = executed
    return GoldAudit(items=items, questions=questions, results=results)


# --------------------------------------------------------------------------- one statement


def _tables(tree: exp.Expression) -> list[str]:
    """Real tables a statement reads (CTE names excluded), lower-case, in first-seen order."""
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    seen: dict[str, None] = {}
    for table in tree.find_all(exp.Table):
        name = table.name.lower()
        if name and name not in ctes:
            seen[name] = None
    return list(seen)


def _structural_problem(tree: exp.Expression, catalog: Mapping[str, frozenset[str]], dialect: str) -> str | None:
    """The first unknown table or column of ``tree`` against ``catalog``, or ``None``."""
    from sqlglot.optimizer.qualify import qualify

    for table in _tables(tree):
        if table not in catalog:
            return f"unknown table {table!r}"
    tables = _tables(tree)
    schema = {t: dict.fromkeys(catalog[t], "TEXT") for t in tables}
    try:
        qualify(tree.copy(), schema=schema, dialect=dialect or None, validate_qualify_columns=True)
        return None
    except (OptimizeError, SqlglotError):
        pass
    # qualify also fails on ambiguity or constructs it cannot resolve: flag only names that exist nowhere.
    known = set().union(*(catalog[t] for t in tables)) if tables else set()
    aliases = {a.alias.lower() for a in tree.find_all(exp.Alias)}
    aliases |= {
        c.name.lower()
        for cte in tree.find_all(exp.CTE, exp.Subquery)
        for c in (cte.args.get("alias").columns if cte.args.get("alias") else [])
    }
    for column in tree.find_all(exp.Column):
        name = column.name.lower()
        if not name or name in known or name in aliases or name == "*":
            continue
        if column.this.args.get("quoted") and dialect == "sqlite" and not column.table:
            continue  # SQLite reads an unresolvable "quoted" name as a string literal
        return f"unknown column {column.sql(dialect=dialect or None)!r}"
    return None


def _check_statement(
    index: int, sql: str, dialect: str, catalog: Mapping[str, frozenset[str]]
) -> tuple[StatementResult, exp.Expression | None]:
    """Syntax, then structure; the parsed tree when both pass."""
    try:
        parsed = [s for s in sqlglot.parse(sql, read=dialect or None) if s is not None]
    except SqlglotError as error:
        return StatementResult(
            index=index, sql=sql, outcome="syntax_error", syntax_ok=False, message=parser_message(error)
        ), None
    except RecursionError:
        return StatementResult(
            index=index, sql=sql, outcome="syntax_error", syntax_ok=False, message="nests too deeply for the parser"
        ), None
    if len(parsed) != 1:
        message = "empty statement" if not parsed else f"holds {len(parsed)} statements; log one statement per entry"
        return StatementResult(index=index, sql=sql, outcome="syntax_error", syntax_ok=False, message=message), None
    tree = parsed[0]
    if not isinstance(tree, QUERY_TYPES + NON_QUERY_STATEMENT_TYPES):
        shown = tree.sql(dialect=dialect or None)[:80]
        return StatementResult(
            index=index,
            sql=sql,
            outcome="syntax_error",
            syntax_ok=False,
            message=f"not a SQL statement (parsed as the bare expression {shown!r})",
        ), None
    tables = _tables(tree)
    problem = _structural_problem(tree, catalog, dialect)
    if problem:
        return StatementResult(
            index=index, sql=sql, outcome="structural_error", syntax_ok=True, message=problem, tables=tables
        ), None
    return StatementResult(index=index, sql=sql, outcome="checked", syntax_ok=True, tables=tables), tree


def _execute_statement(
    checked: StatementResult, tree: exp.Expression, db: TestDatabase, settings: CampaignSettings, engine_dialect: str
) -> tuple[StatementResult, ExecutionResult | None]:
    """Run a checked statement read-only (SELECT only); refuse anything else without executing it."""
    writes = embedded_writes(tree) if isinstance(tree, QUERY_TYPES) else []
    if not isinstance(tree, QUERY_TYPES) or writes:
        kind = writes[0] if writes else tree.key.upper()
        refused = checked.model_copy(
            update={
                "outcome": "execution_error",
                "execution_status": "refused",
                "message": f"{kind} refused: campaigns execute read-only SELECT statements only",
            }
        )
        return refused, None
    sql = checked.sql if settings.dialect == engine_dialect else tree.sql(dialect=engine_dialect)
    result = db.execute(sql, settings.timeout_s, settings.row_cap)
    update: dict[str, Any] = {"execution_status": result.status, "duration_ms": round(result.duration_ms, 3)}
    if result.status != "ok":
        update |= {"outcome": "execution_error", "message": result.message}
        return checked.model_copy(update=update), None
    update["row_count"] = len(result.rows)
    return checked.model_copy(update=update), result


# --------------------------------------------------------------------------- one run


def _token_split(tokens: int | dict[str, int] | None) -> tuple[int | None, int, int]:
    if tokens is None:
        return None, 0, 0
    if isinstance(tokens, int):
        return tokens, tokens, 0
    prompt = int(tokens.get("prompt", tokens.get("input", tokens.get("prompt_tokens", 0))) or 0)
    completion = int(tokens.get("completion", tokens.get("output", tokens.get("completion_tokens", 0))) or 0)
    total = int(tokens.get("total", prompt + completion) or 0)
    return total, prompt, completion


def _litellm_tariff(model: str) -> Tariff | None:
    """litellm's price for ``model`` (imported lazily; ``None`` when it does not know the model)."""
    import litellm

    info = litellm.model_cost.get(model) or litellm.model_cost.get(model.split("/", 1)[-1])
    if not info or info.get("input_cost_per_token") is None:
        return None
    return Tariff(
        input_usd_per_million=float(info["input_cost_per_token"]) * 1e6,
        output_usd_per_million=float(info.get("output_cost_per_token") or 0.0) * 1e6,
    )


def run_cost(run: CampaignRunLog, settings: CampaignSettings) -> tuple[float | None, str | None]:
    """C_i of a run: tokens × the model version's tariff (settings, else litellm's prices), else the logged ``cost_usd``.

    A bare token total is charged at the input rate. C_infra is never added.

    Returns:
        ``(cost_usd, source)`` with source ``tariff``, ``litellm``, ``logged`` or ``None``.

    >>> s = CampaignSettings(tariffs={"m": Tariff(input_usd_per_million=1.0, output_usd_per_million=4.0)})
    >>> run_cost(CampaignRunLog(run_id="r", campaign_id="mcp", question_id="q", question="?", model_version="m", tokens={"prompt": 1000, "completion": 500}), s)
    (0.003, 'tariff')
    """
    total, prompt, completion = _token_split(run.tokens)
    if total is not None and run.model_version:
        tariff = settings.tariffs.get(run.model_version)
        source = "tariff"
        if tariff is None and settings.use_litellm_prices:
            tariff, source = _litellm_tariff(run.model_version), "litellm"
        if tariff is not None:
            if prompt == 0 and completion == 0:
                prompt = total
            cost = (prompt * tariff.input_usd_per_million + completion * tariff.output_usd_per_million) / 1e6
            return round(cost, 9), source
    if run.cost_usd is not None:
        return run.cost_usd, "logged"
    return None, None


def _looked_up(tool_calls: Sequence[ToolCall]) -> list[str]:
    seen: dict[str, None] = {}
    for call in tool_calls:
        if call.name not in LOOKUP_TOOLS:
            continue
        for key in TABLE_ARGUMENT_KEYS:
            value = call.arguments.get(key)
            if isinstance(value, str) and value:
                seen[value.lower().split(".")[-1]] = None
    return list(seen)


def classify_run(
    run: CampaignRunLog,
    audit: GoldAudit,
    db: TestDatabase,
    catalog: CanonicalCatalog | Mapping[str, Sequence[str]],
    settings: CampaignSettings,
    *,
    engine_dialect: str = "sqlite",
) -> CampaignRunResult:
    """Check one run in the seed's order and give it its outcome class.

    ``mcp`` precedence (first match wins): ``budget_exceeded`` (more tool calls than the budget),
    ``syntax_error`` (any statement), ``structural_error`` (any statement), ``execution_error``
    (any statement failed, was refused as non-SELECT, timed out or passed the row cap — or no
    statement matches a gold statement), ``partial_success`` (some required gold statements
    matched), ``success`` (all matched). Every statement is still checked as far as it gets, so
    the evidence is complete. ``baseline-static``: the last statement is compared with the last
    gold statement (``correct`` / ``incorrect``).

    Args:
        run: the run log line.
        audit: the gold audit (the run's question must have passed it).
        db: the test database.
        catalog: the canonical catalog.
        settings: protocol settings.
        engine_dialect: dialect the database executes (statements in another dialect are transpiled).

    Returns:
        The :class:`CampaignRunResult`.

    Raises:
        InputError: the run's ``question_id`` is not in the battery or was excluded by the audit.
    """
    if run.question_id not in audit.questions:
        raise InputError(f"run {run.run_id}: question_id {run.question_id!r} is not in the gold battery")
    if run.question_id not in audit.results:
        raise InputError(f"run {run.run_id}: question {run.question_id!r} was excluded by the gold audit")
    gold_q = audit.questions[run.question_id]
    gold_results = audit.results[run.question_id]
    ordered = [_has_top_level_order(sql, engine_dialect) for sql in gold_q.gold_sql]
    normalized = (
        catalog.normalized() if isinstance(catalog, CanonicalCatalog) else CanonicalCatalog(dict(catalog)).normalized()
    )
    mode = run.campaign_mode()
    flags: list[str] = []
    statements = list(run.statements)
    if len(statements) > settings.max_statements:
        flags.append(f"too_many_statements: {len(statements)} logged, only the first {settings.max_statements} checked")
        statements = statements[: settings.max_statements]
    if mode is CampaignMode.BASELINE_STATIC:
        if run.tool_calls:
            flags.append(f"baseline_with_tool_calls: {len(run.tool_calls)}")
        statements = statements[-1:]
    checked: list[StatementResult] = []
    for index, sql in enumerate(statements):
        result, tree = _check_statement(index, sql, settings.dialect, normalized)
        if tree is not None:
            result, executed = _execute_statement(result, tree, db, settings, engine_dialect)
            if executed is not None:
                targets = range(len(gold_results)) if mode is CampaignMode.MCP else [len(gold_results) - 1]
                matches = [
                    g
                    for g in targets
                    if results_match(
                        executed.rows, gold_results[g].rows, ordered=ordered[g], digits=settings.float_digits
                    )
                ]
                result = result.model_copy(
                    update={"matches_gold": matches, "outcome": "match" if matches else "no_match"}
                )
        checked.append(result)
    matched = sorted({g for s in checked for g in s.matches_gold})
    required = len(gold_results) if mode is CampaignMode.MCP else 1
    used = list(dict.fromkeys(t for s in checked for t in s.tables))
    looked = _looked_up(run.tool_calls)
    traceability = round(sum(1 for t in used if t in looked) / len(used), 4) if used else None
    outcome, reason = _outcome(run, checked, matched, required, mode, settings)
    total_tokens, _, _ = _token_split(run.tokens)
    cost, cost_source = run_cost(run, settings)
    return CampaignRunResult(
        run_id=run.run_id,
        campaign_id=run.campaign_id,
        mode=mode,
        question_id=run.question_id,
        question=run.question,
        outcome=outcome,
        reason=reason,
        tool_calls=len(run.tool_calls),
        statements=checked,
        required=required,
        matched=matched,
        tables_used=used,
        tables_looked_up=looked,
        catalog_traceability=traceability,
        latency_ms=run.latency_ms,
        tokens=total_tokens,
        cost_usd=cost,
        cost_source=cost_source,
        flags=flags,
    )


def _first(checked: Sequence[StatementResult], outcome: str) -> StatementResult | None:
    return next((s for s in checked if s.outcome == outcome), None)


def _outcome(
    run: CampaignRunLog,
    checked: Sequence[StatementResult],
    matched: Sequence[int],
    required: int,
    mode: CampaignMode,
    settings: CampaignSettings,
) -> tuple[str, str]:
    """The run's class and a one-line reason, by the seed's precedence."""
    if mode is CampaignMode.BASELINE_STATIC:
        if not checked:
            return BaselineOutcome.INCORRECT.value, "no final answer"
        final = checked[-1]
        if matched:
            return BaselineOutcome.CORRECT.value, "final answer matches the gold answer"
        detail = final.message or "result differs from the gold answer"
        return BaselineOutcome.INCORRECT.value, f"final answer {final.outcome}: {detail}"
    if len(run.tool_calls) > settings.tool_budget:
        return (
            RunOutcome.BUDGET_EXCEEDED.value,
            f"{len(run.tool_calls)} tool calls, over the budget of {settings.tool_budget}",
        )
    for outcome in (RunOutcome.SYNTAX_ERROR, RunOutcome.STRUCTURAL_ERROR, RunOutcome.EXECUTION_ERROR):
        hit = _first(checked, outcome.value)
        if hit is not None:
            return outcome.value, f"statement {hit.index + 1}: {hit.message}"
    if not checked:
        return RunOutcome.EXECUTION_ERROR.value, "no statement"
    if not matched:
        return RunOutcome.EXECUTION_ERROR.value, f"no statement matches the gold answer ({required} required)"
    if len(matched) < required:
        return RunOutcome.PARTIAL_SUCCESS.value, f"{len(matched)} of {required} required gold statements matched"
    return RunOutcome.SUCCESS.value, f"all {required} required gold statements matched"


# --------------------------------------------------------------------------- summary


def _mean(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return round(sum(present) / len(present), 6) if present else None


def summarize(
    results: Sequence[CampaignRunResult], settings: CampaignSettings, excluded_runs: Mapping[str, int] | None = None
) -> list[CampaignSummary]:
    """One :class:`CampaignSummary` per ``campaign_id`` (in first-seen order).

    ``counts`` lists every class of the campaign's mode (zeros included); ``rates`` are counts
    over classified runs. Latency, tokens and cost are ``None`` for ``baseline-static``.

    Args:
        results: classified runs.
        settings: for ``infra_cost_usd``.
        excluded_runs: campaign_id -> runs not classified (question excluded by the audit).

    Returns:
        The summaries.
    """
    excluded_runs = excluded_runs or {}
    campaigns = list(dict.fromkeys([r.campaign_id for r in results] + list(excluded_runs)))
    out: list[CampaignSummary] = []
    for campaign in campaigns:
        runs = [r for r in results if r.campaign_id == campaign]
        mode = (
            runs[0].mode
            if runs
            else (CampaignMode.BASELINE_STATIC if campaign.startswith("baseline") else CampaignMode.MCP)
        )
        classes = [o.value for o in (RunOutcome if mode is CampaignMode.MCP else BaselineOutcome)]
        counter = Counter(r.outcome for r in runs)
        counts = {c: counter.get(c, 0) for c in classes}
        mcp = mode is CampaignMode.MCP
        costs = [r.cost_usd for r in runs if r.cost_usd is not None]
        out.append(
            CampaignSummary(
                campaign_id=campaign,
                mode=mode,
                runs=len(runs),
                counts=counts,
                rates={c: round(n / len(runs), 4) if runs else 0.0 for c, n in counts.items()},
                excluded_runs=excluded_runs.get(campaign, 0),
                mean_tool_calls=_mean(r.tool_calls for r in runs) if mcp else None,
                mean_latency_ms=_mean(r.latency_ms for r in runs) if mcp else None,
                mean_tokens=_mean(r.tokens for r in runs) if mcp else None,
                mean_cost_usd=_mean(costs) if mcp else None,
                total_cost_usd=round(sum(costs), 9) if mcp and costs else None,
                infra_cost_usd=settings.infra_cost_usd.get(campaign),
                mean_catalog_traceability=_mean(r.catalog_traceability for r in runs) if mcp else None,
            )
        )
    return out


# --------------------------------------------------------------------------- evidence


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p.capitalize() for p in rest)


def _camel_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {_camel(str(k)): _camel_keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_camel_keys(v) for v in value]
    return value


def evidence_documents(
    run: CampaignRunLog, result: CampaignRunResult, catalog: CanonicalCatalog, settings: CampaignSettings
) -> tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]:
    """``metrics.json``, ``context.json`` and the ``session.jsonl`` trail of one run (camelCase keys, as the seed).

    The metadata snapshot is the catalog entries of the tables the session looked up (``mcp``),
    or the whole catalog (``baseline-static``: the schema was in the prompt).

    Returns:
        ``(metrics, context, session_events)``.
    """
    metrics = _camel_keys(result.model_dump(mode="json", exclude={"question"}))
    metrics["statementCount"] = len(run.statements)
    if result.mode is CampaignMode.BASELINE_STATIC:
        for key in ("latencyMs", "tokens", "costUsd", "costSource", "toolCalls", "catalogTraceability"):
            metrics[key] = None  # not metrics of the baseline mode (seed: "não se aplica ao baseline")
    lower = {t.lower(): cols for t, cols in catalog.root.items()}
    if result.mode is CampaignMode.BASELINE_STATIC:
        snapshot = dict(catalog.root)
    else:
        snapshot = {t: lower[t] for t in result.tables_looked_up if t in lower}
    context = {
        "runId": run.run_id,
        "campaignId": run.campaign_id,
        "mode": result.mode.value,
        "questionId": run.question_id,
        "question": run.question,
        "metadataSnapshot": snapshot,
        "seed": run.seed,
        "modelVersion": run.model_version,
        "promptVersion": run.prompt_version,
        "commitHash": run.commit_hash,
        "dialect": settings.dialect,
        "toolBudget": settings.tool_budget,
        "maxStatements": settings.max_statements,
        "protocol": PROTOCOL_SOURCE,
    }
    session: list[dict[str, Any]] = [
        {"event": "question", "runId": run.run_id, "campaignId": run.campaign_id, "question": run.question}
    ]
    for number, call in enumerate(run.tool_calls, 1):
        session.append(
            {
                "event": "toolCall",
                "n": number,
                "name": call.name,
                "arguments": call.arguments,
                "durationMs": call.duration_ms,
            }
        )
    for statement in result.statements:
        session.append({"event": "statement", **_camel_keys(statement.model_dump(mode="json"))})
    session.append({"event": "outcome", "outcome": result.outcome, "reason": result.reason})
    return metrics, context, session


def write_evidence(
    out_dir: str | Path,
    run: CampaignRunLog,
    result: CampaignRunResult,
    catalog: CanonicalCatalog,
    settings: CampaignSettings,
) -> Path:
    """Write ``OUT/<campaign folder>/<run folder>/{metrics.json, context.json, session.jsonl}``.

    The folder names are :func:`folder_name` of ``campaign_id`` and ``run_id`` (distinct ids never
    share a folder); the files hold the ids as logged.

    Returns:
        The run's folder.
    """
    metrics, context, session = evidence_documents(run, result, catalog, settings)
    folder = campaign_folder(out_dir, run.campaign_id) / folder_name(run.run_id)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "metrics.json").write_text(json.dumps(metrics, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    (folder / "context.json").write_text(json.dumps(context, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    (folder / "session.jsonl").write_text(
        "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in session), encoding="utf-8"
    )
    return folder


FOLDER_SAFE_CHARACTERS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-_")
"""Characters an id keeps in its folder name; every other UTF-8 byte becomes ``%XX``."""

FOLDER_NAME_MAX_BYTES = 255
"""Longest folder name (the usual file-name limit); longer encodings are cut and hashed."""

_FOLDER_HASH_CHARS = 32
"""Hex digits of the SHA-256 of the id that end a cut folder name (128 bits)."""


def folder_name(identifier: str) -> str:
    """The evidence folder name of a ``run_id`` or ``campaign_id``: safe, and distinct ids get distinct names.

    Lower-case ASCII letters, digits, ``-`` and ``_`` are kept; every other byte of the id's
    UTF-8 form (upper-case letters, ``.``, ``/``, ``%``, spaces, NUL, non-ASCII) is written
    ``%XX`` with upper-case hex digits. The mapping is injective, also on case-insensitive file
    systems, and no name is empty, ``.``, ``..``, absolute or contains a separator. An encoding
    longer than :data:`FOLDER_NAME_MAX_BYTES` is cut at a ``%XX`` boundary and ends with ``~`` and
    the first 32 hex digits of the id's SHA-256 (``~`` never occurs otherwise); the empty id
    is that suffix alone.

    Args:
        identifier: the id as logged (lone surrogates are hashed by their code points).

    Returns:
        The folder name (ASCII, 1 to 255 bytes).

    >>> [folder_name(i) for i in ("mcp-001", "a/b", "a_b", "a?b", "..", "Mcp", "ação")]
    ['mcp-001', 'a%2Fb', 'a_b', 'a%3Fb', '%2E%2E', '%4Dcp', 'a%C3%A7%C3%A3o']
    >>> long = folder_name("x" * 300)
    >>> len(long), long[-33]
    (255, '~')
    """
    data = identifier.encode("utf-8", "surrogatepass")
    parts = [chr(b) if chr(b) in FOLDER_SAFE_CHARACTERS else f"%{b:02X}" for b in data]
    name = "".join(parts)
    if 0 < len(name) <= FOLDER_NAME_MAX_BYTES:
        return name
    digest = hashlib.sha256(data).hexdigest()[:_FOLDER_HASH_CHARS]
    room = FOLDER_NAME_MAX_BYTES - 1 - _FOLDER_HASH_CHARS
    head: list[str] = []
    used = 0
    for part in parts:
        if used + len(part) > room:
            break
        head.append(part)
        used += len(part)
    return "".join(head) + "~" + digest


def campaign_folder(out_dir: str | Path, campaign_id: str) -> Path:
    """``OUT/<folder_name(campaign_id)>``: where a campaign's ``summary.json`` and run folders go."""
    return Path(out_dir) / folder_name(campaign_id)


def write_summary(out_dir: str | Path, summary: CampaignSummary) -> Path:
    """Write ``OUT/<campaign folder>/summary.json`` (no run folder can be named ``summary.json``: ``.`` is encoded).

    Returns:
        The file written.
    """
    folder = campaign_folder(out_dir, summary.campaign_id)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "summary.json"
    path.write_text(summary.model_dump_json(indent=2) + "\n", encoding="utf-8")
    return path


# --------------------------------------------------------------------------- whole campaign


class CampaignResult(BaseModel):
    """Everything :func:`run_campaign` produced."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    runs: list[CampaignRunLog]
    audit: GoldAudit
    results: list[CampaignRunResult]
    skipped: dict[str, dict[str, str]] = Field(
        default_factory=dict, description="campaign_id -> run_id -> why it was not classified"
    )
    summaries: list[CampaignSummary]

    def counts(self) -> dict[str, int]:
        """Every outcome class -> number of runs over all campaigns (zeros included)."""
        counter = Counter(r.outcome for r in self.results)
        return {c: counter.get(c, 0) for c in OUTCOME_CLASSES}

    def as_json(self) -> dict[str, Any]:
        """The ``--json`` object of ``stef campaign run``: ``counts``, ``campaigns``, ``gold_audit``, ``skipped``."""
        return {
            "counts": self.counts(),
            "runs": len(self.runs),
            "classified": len(self.results),
            "campaigns": {s.campaign_id: s.model_dump(mode="json") for s in self.summaries},
            "gold_audit": {
                "questions": len(self.audit.items),
                "excluded": [i.model_dump(mode="json") for i in self.audit.excluded],
            },
            "skipped": self.skipped,
        }


def run_campaign(
    runs: Sequence[CampaignRunLog],
    gold: Sequence[GoldQuestion],
    db: TestDatabase,
    settings: CampaignSettings,
    catalog: CanonicalCatalog | None = None,
    out_dir: str | Path | None = None,
) -> CampaignResult:
    """Audit the gold battery, classify every run, write the evidence, summarise per campaign.

    Runs whose question is not in the battery or was excluded by the audit are not classified;
    they are listed in ``skipped`` (by campaign, then run) with the reason and counted as
    ``excluded_runs``. A ``run_id`` is unique within its campaign only: every map of runs here
    is keyed by campaign first.

    Args:
        runs: the run log.
        gold: the gold battery.
        db: the test database (opened read-only).
        settings: protocol settings.
        catalog: the canonical catalog; ``None`` derives it from ``db``.
        out_dir: where to write each run's evidence (:func:`write_evidence`) and each campaign's
            ``summary.json`` (:func:`write_summary`); ``None`` writes nothing.

    Returns:
        A :class:`CampaignResult`.

    Raises:
        InputError: duplicate ``run_id`` within a campaign or duplicate gold ``question_id``.
    """
    catalog = catalog or CanonicalCatalog(db.catalog())
    audit = audit_gold(gold, db, settings)
    engine = "duckdb" if type(db).__name__.startswith("DuckDB") else "sqlite"
    seen: set[tuple[str, str]] = set()
    results: list[CampaignRunResult] = []
    skipped: dict[str, dict[str, str]] = {}
    excluded: Counter[str] = Counter()
    for run in runs:
        key = (run.campaign_id, run.run_id)
        if key in seen:
            raise InputError(f"run log: run_id {run.run_id!r} appears twice in campaign {run.campaign_id!r}")
        seen.add(key)
        if run.question_id not in audit.results:
            item = next((i for i in audit.items if i.question_id == run.question_id), None)
            skipped.setdefault(run.campaign_id, {})[run.run_id] = (
                f"question excluded by the gold audit: {item.reason}"
                if item
                else f"question_id {run.question_id!r} is not in the gold battery"
            )
            excluded[run.campaign_id] += 1
            continue
        result = classify_run(run, audit, db, catalog, settings, engine_dialect=engine)
        results.append(result)
        if out_dir is not None:
            write_evidence(out_dir, run, result, catalog, settings)
    summaries = summarize(results, settings, excluded)
    if out_dir is not None:
        for summary in summaries:
            write_summary(out_dir, summary)
    return CampaignResult(runs=list(runs), audit=audit, results=results, skipped=skipped, summaries=summaries)


# --------------------------------------------------------------------------- calibration


CAMPAIGN_AGENT_PREFIX = "campaign:"
"""``agent_id`` of a run's STEF record: this prefix + its ``campaign_id``."""


def stef_record(run: CampaignRunLog | CampaignRunResult, dialect: str | None) -> AgentLogRecord:
    """The STEF (schema-free) log record of a run: question + statements (the last SELECT is scored).

    ``agent_id`` is ``campaign:<campaign_id>``, so :func:`index_evaluations` can tell apart runs of
    two campaigns that share a ``run_id``.
    """
    statements = run.statements if isinstance(run, CampaignRunLog) else [s.sql for s in run.statements]
    sql = ";\n".join(s.strip().rstrip(";") for s in statements)
    return AgentLogRecord(
        run_id=run.run_id,
        question=run.question,
        sql=sql,
        dialect=dialect or None,
        agent_id=f"{CAMPAIGN_AGENT_PREFIX}{run.campaign_id}",
    )


def index_evaluations(evaluations: Iterable[Evaluation]) -> dict[tuple[str | None, str | None], Evaluation]:
    """STEF evaluations by ``(campaign_id, run_id)``; ``campaign_id`` is ``None`` for an evaluation
    whose ``agent_id`` is not ``campaign:<id>`` (not made by :func:`stef_record`).

    >>> sorted(index_evaluations([Evaluation(run_id="r1", status=EvaluationStatus.PARSE_ERROR, agent_id="campaign:mcp"),
    ...                           Evaluation(run_id="r1", status=EvaluationStatus.PARSE_ERROR, agent_id="campaign:baseline")]))
    [('baseline', 'r1'), ('mcp', 'r1')]
    """
    out: dict[tuple[str | None, str | None], Evaluation] = {}
    for evaluation in evaluations:
        agent = evaluation.agent_id or ""
        campaign = agent[len(CAMPAIGN_AGENT_PREFIX) :] if agent.startswith(CAMPAIGN_AGENT_PREFIX) else None
        out[(campaign, evaluation.run_id)] = evaluation
    return out


class ConfusionAtThreshold(_Frozen):
    """Φ ≥ threshold predicts ``success`` (or ``correct``)."""

    threshold: float
    tp: int
    fp: int
    fn: int
    tn: int


class CalibrationReport(_Frozen):
    """How well Φ predicts the campaign outcome. Unscored runs count as Φ = 0 (STEF could not vouch for them)."""

    runs: int
    scored: int
    positives: int
    auroc: float | None
    confusion: list[ConfusionAtThreshold]
    mean_score_by_outcome: dict[str, float | None]
    runs_by_outcome: dict[str, int]


def calibration_report(results: Sequence[CampaignRunResult], evaluations: Sequence[Evaluation]) -> CalibrationReport:
    """AUROC of Φ for ``success``/``correct``, confusion matrices at the band thresholds, mean Φ per class.

    Args:
        results: classified runs.
        evaluations: STEF evaluations, matched to runs by ``(campaign_id, run_id)`` (see
            :func:`index_evaluations`), else by ``run_id`` alone for evaluations with no campaign.

    Returns:
        The :class:`CalibrationReport` (``auroc`` is ``None`` when only one class is present).

    Source: DESIGN.md §7 ("the calibration report shows how well Φ predicts the outcome").
    """
    from stef.monitor.benchmark import auroc

    by_key = index_evaluations(evaluations)
    scores: list[float] = []
    labels: list[bool] = []
    per_class: dict[str, list[float]] = {}
    scored = 0
    for result in results:
        evaluation = by_key.get((result.campaign_id, result.run_id)) or by_key.get((None, result.run_id))
        score = evaluation.score if evaluation is not None and evaluation.status is EvaluationStatus.EVALUATED else None
        if score is not None:
            scored += 1
            per_class.setdefault(result.outcome, []).append(score)
        else:
            per_class.setdefault(result.outcome, [])
        scores.append(score if score is not None else 0.0)
        labels.append(result.outcome in POSITIVE_OUTCOMES)
    area = auroc(scores, labels) if scores else float("nan")
    confusion = [
        ConfusionAtThreshold(
            threshold=t,
            tp=sum(1 for s, y in zip(scores, labels, strict=True) if s >= t and y),
            fp=sum(1 for s, y in zip(scores, labels, strict=True) if s >= t and not y),
            fn=sum(1 for s, y in zip(scores, labels, strict=True) if s < t and y),
            tn=sum(1 for s, y in zip(scores, labels, strict=True) if s < t and not y),
        )
        for t in BAND_THRESHOLDS
    ]
    order = [c for c in OUTCOME_CLASSES if c in per_class]
    return CalibrationReport(
        runs=len(results),
        scored=scored,
        positives=sum(labels),
        auroc=None if math.isnan(area) else round(area, 4),
        confusion=confusion,
        mean_score_by_outcome={
            c: (round(sum(per_class[c]) / len(per_class[c]), 2) if per_class[c] else None) for c in order
        },
        runs_by_outcome={c: sum(1 for r in results if r.outcome == c) for c in order},
    )


__all__ = [
    "BAND_THRESHOLDS",
    "CATALOG_TOOLS",
    "OUTCOME_CLASSES",
    "BaselineOutcome",
    "CalibrationReport",
    "CampaignMode",
    "CampaignResult",
    "CampaignRunLog",
    "CampaignRunResult",
    "CampaignSettings",
    "CampaignSummary",
    "CanonicalCatalog",
    "GoldAudit",
    "GoldAuditItem",
    "GoldQuestion",
    "RunOutcome",
    "StatementResult",
    "Tariff",
    "ToolCall",
    "audit_gold",
    "calibration_report",
    "campaign_folder",
    "classify_run",
    "evidence_documents",
    "folder_name",
    "index_evaluations",
    "json_schemas",
    "load_catalog",
    "read_jsonl",
    "results_match",
    "run_campaign",
    "run_cost",
    "stef_record",
    "summarize",
    "write_evidence",
    "write_summary",
]
