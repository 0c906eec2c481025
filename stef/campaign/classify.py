"""Classification of one run: each statement checked in the seed's order, then the run's outcome class.

Source: the campaign protocol of ``seeds/003`` ("Taxonomia MCP"), DESIGN.md §7 and issue 6. For
campaign mode ``mcp`` each statement is checked for syntax (sqlglot, configured dialect),
structure against the canonical catalog, read-only execution on the test database and
comparison with the gold statements G_i; the run gets the first matching class of
:class:`~stef.campaign.models.RunOutcome` (tool-call budget first). In ``baseline-static`` only
the final answer is compared (:class:`~stef.campaign.models.BaselineOutcome`). The run's cost
C_i (tokens × tariff) is computed here too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlglot import exp
from sqlglot.errors import OptimizeError, SqlglotError

from stef.campaign.compare import results_match
from stef.campaign.models import (
    BaselineOutcome,
    CampaignMode,
    CampaignRunLog,
    CampaignRunResult,
    CampaignSettings,
    CanonicalCatalog,
    GoldAudit,
    RunOutcome,
    StatementResult,
    Tariff,
    ToolCall,
)
from stef.campaign.sandbox import ExecutionResult, TestDatabase
from stef.errors import InputError
from stef.pipeline.dialects import parse_sql_text, parser_message
from stef.pipeline.statement_safety import NON_QUERY_STATEMENT_TYPES, QUERY_TYPES, embedded_writes

CATALOG_TOOLS = ("catalog.listTables", "catalog.describeTable", "catalog.listRelationships")
"""The three basic MCP catalog tools of the seed ("as três basais")."""

LOOKUP_TOOLS = ("catalog.describeTable", "catalog.listRelationships")
"""Tool calls that look a table up (name it in ``arguments``); they count for traceability."""

TABLE_ARGUMENT_KEYS = ("table", "tableName", "table_name", "name")
"""Argument keys of a lookup tool call that name the table."""


def _has_top_level_order(sql: str, dialect: str) -> bool:
    """Whether ``sql`` ends in a top-level ORDER BY (``False`` when sqlglot cannot parse it, even for
    nesting deeper than its recursive parser: :func:`~stef.campaign.gold_audit.audit_gold` excludes such gold).
    """
    try:
        statements = parse_sql_text(sql, dialect)
        tree = statements[0] if len(statements) == 1 else None  # sqlglot.parse_one's Block of several: no
    except (SqlglotError, RecursionError):
        return False
    return tree is not None and tree.args.get("order") is not None


def _tables(tree: exp.Expr) -> list[str]:
    """Real tables a statement reads (CTE names excluded), lower-case, in first-seen order."""
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    seen: dict[str, None] = {}
    for table in tree.find_all(exp.Table):
        name = table.name.lower()
        if name and name not in ctes:
            seen[name] = None
    return list(seen)


def _structural_problem(tree: exp.Expr, catalog: Mapping[str, frozenset[str]], dialect: str) -> str | None:
    """The first unknown table or column of ``tree`` against ``catalog``, or ``None``."""
    from sqlglot.optimizer.qualify import qualify

    for table in _tables(tree):
        if table not in catalog:
            return f"unknown table {table!r}"
    tables = _tables(tree)
    schema: dict[str, object] = {t: dict.fromkeys(catalog[t], "TEXT") for t in tables}
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
        for c in (cte.args["alias"].columns if cte.args.get("alias") else [])
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
) -> tuple[StatementResult, exp.Expr | None]:
    """Syntax, then structure; the parsed tree when both pass."""
    try:
        parsed = [s for s in parse_sql_text(sql, dialect) if s is not None]
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
    checked: StatementResult, tree: exp.Expr, db: TestDatabase, settings: CampaignSettings, engine_dialect: str
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
    """litellm's price for ``model`` (``None`` when it does not know the model); litellm is imported
    once, lazily and with its local price table (:func:`stef.llm.litellm_loader.import_litellm`: a
    plain import fetched the table from the network, with retries that cost seconds offline)."""
    from stef.llm.litellm_loader import import_litellm

    litellm = import_litellm()
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


__all__ = ["CATALOG_TOOLS", "classify_run", "run_cost"]
