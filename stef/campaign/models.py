"""Data types of the campaign protocol: run logs, the gold battery, settings, and every result.

Source: the experimental protocol ``seeds/003_7e3f1b24b92db84a.txt`` ("Protocolo de avaliação
experimental"), DESIGN.md §7 and issue 6. Inputs (:class:`CampaignRunLog`, :class:`GoldQuestion`,
:class:`CanonicalCatalog`, :class:`CampaignSettings`), the outcome classes (:class:`RunOutcome`
for ``mcp`` runs, :class:`BaselineOutcome` for ``baseline-static`` runs) and the outputs
(:class:`CampaignRunResult`, :class:`GoldAudit`, :class:`CampaignSummary`,
:class:`CampaignResult`, :class:`CalibrationReport`). The warehouse stores these types
(:mod:`warehouse.campaign`); the behaviour lives in the sibling modules.
"""

from __future__ import annotations

from collections import Counter
from enum import Enum
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, RootModel

from stef.campaign.worker import ExecutionResult, ResourceLimits


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


class SkipStatus(str, Enum):
    """Why a line of a campaign input was not classified (stored with its reason, never dropped)."""

    INVALID_INPUT = "invalid_input"
    """The line is not a valid run log line / gold question (not JSON, a field missing or of the wrong type)."""
    DUPLICATE_RUN = "duplicate_run"
    """The run's ``run_id`` was logged earlier in the same campaign (the first is classified)."""
    UNKNOWN_QUESTION = "unknown_question"
    """The run's ``question_id`` is not in the gold battery."""
    QUESTION_EXCLUDED = "question_excluded"
    """The gold audit excluded the run's question (its gold fails, returns no row, is ambiguous ...)."""


class InputKind(str, Enum):
    """Which campaign input a skipped line comes from."""

    RUN_LOG = "run_log"
    GOLD = "gold"


OUTCOME_CLASSES: tuple[str, ...] = tuple(o.value for o in RunOutcome) + tuple(o.value for o in BaselineOutcome)
"""Every outcome a run can get, MCP classes first."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ToolCall(BaseModel):
    """One MCP tool call of a session (``name`` e.g. ``catalog.describeTable``)."""

    model_config = ConfigDict(frozen=True, extra="allow")

    name: str = Field(min_length=1)
    arguments: dict[str, Any] = Field(default_factory=dict)
    duration_ms: float | None = None


MAX_TOKENS = 2**53 - 1
"""Most tokens one count of a run log may hold (exact as a JSON number everywhere; a total of a few
such counts still fits the warehouse's BIGINT, so one absurd count cannot fail a campaign's store)."""

TokenCount = Annotated[int, Field(ge=0, le=MAX_TOKENS)]
"""A token count of a run log: ``0`` to :data:`MAX_TOKENS` (beyond is an ``invalid_input`` line)."""


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
    tokens: TokenCount | dict[str, TokenCount] | None = None
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
    """Result of :func:`~stef.campaign.gold_audit.audit_gold`; ``results`` holds the gold rows used for comparison."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    items: list[GoldAuditItem]
    questions: dict[str, GoldQuestion]
    results: dict[str, list[ExecutionResult]] = Field(default_factory=dict, exclude=True)

    @property
    def excluded(self) -> list[GoldAuditItem]:
        """Items whose gold failed or returned nothing."""
        return [i for i in self.items if not i.ok]


class SkippedRun(_Frozen):
    """A line of a campaign input that was not classified: its typed status, the reason, where it was read.

    ``campaign_id``, ``run_id`` and ``question_id`` are the ones the line names, when they can be
    read (also from an invalid line); ``raw`` is the line as read (cut to 64 KiB), or the run as
    JSON when it did not come from a file.
    """

    status: SkipStatus
    reason: str
    input: InputKind = InputKind.RUN_LOG
    source: str | None = None
    line_number: int | None = None
    campaign_id: str | None = None
    run_id: str | None = None
    question_id: str | None = None
    raw: str = ""

    def where(self) -> str:
        """``FILE line N`` (or ``run log`` / ``gold battery`` when not read from a file).

        >>> SkippedRun(status=SkipStatus.INVALID_INPUT, reason="x", source="runs.jsonl", line_number=4).where()
        'runs.jsonl line 4'
        """
        if self.source is None or self.line_number is None:
            return "gold battery" if self.input is InputKind.GOLD else "run log"
        return f"{self.source} line {self.line_number}"


class CampaignSummary(_Frozen):
    """Per-campaign figures (latency, tokens and cost are ``None`` in baseline mode)."""

    campaign_id: str
    mode: CampaignMode
    runs: int
    counts: dict[str, int]
    rates: dict[str, float]
    excluded_runs: int
    rejected_runs: int = Field(
        default=0, description="run log lines naming this campaign that were rejected (invalid_input, duplicate_run)"
    )
    mean_tool_calls: float | None
    mean_latency_ms: float | None
    mean_tokens: float | None
    mean_cost_usd: float | None
    total_cost_usd: float | None
    infra_cost_usd: float | None
    mean_catalog_traceability: float | None


class CampaignResult(BaseModel):
    """Everything :func:`~stef.campaign.run.run_campaign` produced."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    runs: list[CampaignRunLog]
    audit: GoldAudit
    results: list[CampaignRunResult]
    skipped: dict[str, dict[str, str]] = Field(
        default_factory=dict, description="campaign_id -> run_id -> why it was not classified"
    )
    skipped_runs: list[SkippedRun] = Field(
        default_factory=list,
        description="the runs of `skipped` with their typed status (unknown_question, question_excluded) and line",
    )
    rejected: list[SkippedRun] = Field(
        default_factory=list,
        description="input lines rejected with the reason: invalid lines of the run log and the gold battery, repeated run ids",
    )
    summaries: list[CampaignSummary]
    sources: list[str] = Field(
        default_factory=list, description="the input files read (run log, gold battery), as given"
    )

    def not_classified(self) -> list[SkippedRun]:
        """Every input line that was not classified, with its status and reason: the skipped runs, then the rejected lines."""
        return [*self.skipped_runs, *self.rejected]

    def counts(self) -> dict[str, int]:
        """Every outcome class -> number of runs over all campaigns (zeros included)."""
        counter = Counter(r.outcome for r in self.results)
        return {c: counter.get(c, 0) for c in OUTCOME_CLASSES}

    def as_json(self) -> dict[str, Any]:
        """The ``--json`` object of ``stef campaign run``: ``counts``, ``campaigns``, ``gold_audit``,
        ``skipped``, ``rejected`` (every rejected line without its text)."""
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
            "rejected": [r.model_dump(mode="json", exclude={"raw"}) for r in self.rejected],
        }


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


__all__ = [
    "MAX_TOKENS",
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
    "ConfusionAtThreshold",
    "GoldAudit",
    "GoldAuditItem",
    "GoldQuestion",
    "InputKind",
    "RunOutcome",
    "SkipStatus",
    "SkippedRun",
    "StatementResult",
    "Tariff",
    "ToolCall",
]
