"""Tests of evaluate() and evaluate_many() (stef.pipeline.evaluate): the end-to-end golden file,
one bad record never stopping a batch, the per-record time cap and size caps.

Run ``python -m tests.stef.pipeline.test_evaluate --regenerate`` from the repository root to
rewrite ``tests/fixtures/evaluate/expected.jsonl`` after a deliberate, reviewed change of the method.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from flows.cli.main import app
from stef.models import AgentLogRecord, EvaluationStatus, Verdict
from stef.pipeline.evaluate import evaluate, evaluate_many
from tests.stef.pipeline.cases import read_jsonl
from tests.support.checkout import FIXTURES


def test_one_bad_record_never_stops_a_batch() -> None:
    records = [
        AgentLogRecord(run_id="ok1", question="How many users?", sql="SELECT COUNT(*) FROM users"),
        AgentLogRecord(run_id="bad", question="How many users?", sql="SELEC oops"),
        AgentLogRecord(run_id="huge", question="q", sql="SELECT " + " + ".join(["1"] * 20000)),
        AgentLogRecord(run_id="ok2", question="How many users?", sql="SELECT COUNT(*) FROM users"),
    ]
    evaluations = evaluate_many(records)
    assert [e.run_id for e in evaluations] == ["ok1", "bad", "huge", "ok2"]
    assert evaluations[0].status is EvaluationStatus.EVALUATED
    assert evaluations[1].status is EvaluationStatus.PARSE_ERROR
    assert evaluations[2].status in {EvaluationStatus.EVALUATED, EvaluationStatus.PARSE_ERROR, EvaluationStatus.TIMEOUT}
    assert evaluations[3].status is EvaluationStatus.EVALUATED


GOLDEN_INPUT = FIXTURES / "evaluate" / "nl2sql_bugs_sample.jsonl"
GOLDEN_EXPECTED = FIXTURES / "evaluate" / "expected.jsonl"
GOLDEN_KEYS = ("run_id", "status", "score", "band", "filter_status", "verdict", "confidence", "p_correct")


def _golden_rows() -> list[dict]:
    from stef.monitor.benchmark import bugs_record_to_log

    rows = read_jsonl(GOLDEN_INPUT)
    evaluations = evaluate_many([bugs_record_to_log(row) for row in rows])
    out = []
    for row, evaluation in zip(rows, evaluations, strict=True):
        dumped = evaluation.model_dump(mode="json")
        out.append(
            {
                "title": row["title"],
                **{k: dumped[k] for k in GOLDEN_KEYS},
                "suspected": sorted({e["subcategory"] for e in dumped["suspected_errors"]}),
            }
        )
    return out


@pytest.fixture(scope="module")
def golden_rows() -> dict[str, dict]:
    """Today's golden rows of the whole sample (one batch, as ``stef evaluate`` runs it), by run_id."""
    rows = _golden_rows()
    assert [row["run_id"] for row in rows] == [row["run_id"] for row in read_jsonl(GOLDEN_EXPECTED)]
    return {row["run_id"]: row for row in rows}


@pytest.mark.parametrize("expected", [pytest.param(row, id=row["run_id"]) for row in read_jsonl(GOLDEN_EXPECTED)])
def test_golden_evaluations_on_real_records(golden_rows: dict[str, dict], expected: dict) -> None:
    assert golden_rows[expected["run_id"]] == expected


def test_bench_judge_figures_match_a_hand_count() -> None:
    """``stef bench-judge`` on the golden sample agrees with counting the golden file by hand."""

    result = CliRunner().invoke(app, ["bench-judge", str(GOLDEN_INPUT), "--json"])
    assert result.exit_code == 0, result.output
    figures = json.loads(result.output)
    labels = {str(row["id"]): bool(row["label"]) for row in read_jsonl(GOLDEN_INPUT)}
    expected = read_jsonl(GOLDEN_EXPECTED)
    hits = sum(1 for row in expected if (row["score"] >= 75) == labels[row["run_id"]])
    assert figures["records"] == len(expected) == 24
    assert figures["coverage"] == 1.0
    assert figures["accuracy"] == pytest.approx(hits / len(expected))
    true_negatives = sum(1 for row in expected if row["score"] < 75 and not labels[row["run_id"]])
    assert figures["negative_recall"] == pytest.approx(true_negatives / sum(1 for v in labels.values() if not v))


def test_bench_judge_json_is_strict_json_on_one_label_and_rows_without_id(tmp_path: Path) -> None:
    """A file whose rows all carry one label has no AUROC: ``null`` in the JSON, never ``NaN``
    (strict parsers reject it); rows without ``id`` are named by their line number."""
    rows = [row for row in read_jsonl(GOLDEN_INPUT) if row["label"]][:3]
    for row in rows:
        del row["id"]
    labelled = tmp_path / "one_label.jsonl"
    labelled.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    result = CliRunner().invoke(app, ["bench-judge", str(labelled), "--json"])
    assert result.exit_code == 0, result.output
    figures = json.loads(result.output, parse_constant=lambda name: pytest.fail(f"{name} is not JSON"))
    assert figures["records"] == 3 and figures["auroc"] is None


@pytest.mark.parametrize(
    ("second_line", "message"),
    [
        ('{"question": "q", "sql": "SELECT 1"}', ":2: no label (true = the SQL is correct, false = it is not)"),
        ('{"question": "q", "sql": "SELECT 1", "label": "maybe"}', ':2: label "maybe" is not true or false'),
        ('{"question": "q", "sql": "SELECT 1", "label": 2}', ":2: label 2 is not true or false"),
        ("[1, 2]", ":2: not a JSON object but a list"),
        ("{oops", ":2: not JSON (Expecting property name enclosed in double quotes)"),
        ('{"question": "q", "sql": 7, "label": true}', ":2: sql is a number, not a string"),
        ('{"question": "q", "sql": "SELECT 1", "label": false, "error_types": ["x"]}', ":2: error_types is not a list"),
    ],
)
def test_bench_judge_names_the_line_of_a_row_it_cannot_measure(tmp_path: Path, second_line: str, message: str) -> None:
    """A row without a usable label never counts as correct (``bool("false")`` is true) nor ends in a
    traceback: the command fails naming the file and the line, and prints no figures."""
    labelled = tmp_path / "labels.jsonl"
    labelled.write_text('{"question": "q", "sql": "SELECT 1", "label": true}\n' + second_line + "\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["bench-judge", str(labelled), "--json"])
    assert result.exit_code == 2, result.output
    assert f"{labelled}{message}" in " ".join(result.output.split()) and "Traceback" not in result.output


def test_bench_judge_on_a_file_of_labels_alone_says_so_instead_of_printing_nan_figures(tmp_path: Path) -> None:
    """The demo's ``labels.jsonl`` (run_id, label, error_types; no question or SQL) gave "coverage
    0.000" and every other figure NaN, with exit code 0."""
    labels = tmp_path / "labels.jsonl"
    labels.write_text(
        "".join(json.dumps({"run_id": f"r{i}", "label": i % 2 == 0, "error_types": []}) + "\n" for i in range(4)),
        encoding="utf-8",
    )
    result = CliRunner().invoke(app, ["bench-judge", str(labels)])
    assert result.exit_code == 2
    said = " ".join(result.output.split())
    assert f"{labels}: none of its 4 rows could be scored (row 1: invalid_input: " in said
    assert "not a file of labels alone" in said and "nan" not in said


def test_bench_judge_reads_labels_written_as_text_or_numbers(tmp_path: Path) -> None:
    """A file converted from CSV holds ``"false"`` / ``"TRUE"`` / ``0``: they are the labels they
    name, so the figures equal those of the same file with JSON booleans."""
    rows = read_jsonl(GOLDEN_INPUT)
    as_text = [
        {
            **row,
            "label": ["false", "TRUE"][row["label"]]
            if i % 3 == 1
            else ["incorrect", " Correct"][row["label"]]
            if i % 3 == 2
            else int(row["label"]),
        }
        for i, row in enumerate(rows)
    ]
    booleans, texts = tmp_path / "booleans.jsonl", tmp_path / "texts.jsonl"
    booleans.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    texts.write_text("".join(json.dumps(row) + "\n" for row in as_text), encoding="utf-8-sig")  # with a BOM
    figures = [json.loads(CliRunner().invoke(app, ["bench-judge", str(f), "--json"]).output) for f in (booleans, texts)]
    assert figures[0] == figures[1] and 0 < figures[0]["share_correct"] < 1


def test_bench_judge_reads_the_benchmark_file_as_published_a_json_array(tmp_path: Path) -> None:
    """NL2SQL-BUGs publishes ``data/NL2SQL-Bugs-with-evidence.json``, one JSON array of rows: it was
    refused ("not a JSON object but list", or "not JSON" when the array is indented)."""
    rows = read_jsonl(GOLDEN_INPUT)
    lines, array = tmp_path / "bugs.jsonl", tmp_path / "NL2SQL-Bugs-with-evidence.json"
    lines.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    array.write_text(json.dumps(rows, indent=4), encoding="utf-8")
    figures = [json.loads(CliRunner().invoke(app, ["bench-judge", str(f), "--json"]).output) for f in (lines, array)]
    assert figures[0] == figures[1] and figures[1]["records"] == 24
    array.write_text(json.dumps([rows[0], {**rows[1], "label": "maybe"}]), encoding="utf-8")
    result = CliRunner().invoke(app, ["bench-judge", str(array), "--json"])
    assert result.exit_code == 2
    assert f'{array}: row 2: label "maybe" is not true or false' in " ".join(result.output.split())


@pytest.mark.parametrize(
    ("sql", "statuses"),
    [
        pytest.param("SELECT a FROM t WHERE b IN (" + ",".join(["'x'"] * 200_000) + ")", {"too_large"}, id="sql_1mb"),
        pytest.param(
            "SELECT a FROM " + "(SELECT a FROM " * 200 + "t" + ")" * 200,
            {"evaluated", "parse_error", "timeout"},
            id="nested_200_subqueries",
        ),
        pytest.param(
            "SELECT a FROM t WHERE " + " OR ".join(f"b = {i}" for i in range(5000)),
            {"evaluated", "timeout"},
            id="or_5000_predicates",
        ),
        pytest.param("\x00\x01\x02garbage\xff", {"invalid_input"}, id="binary_junk"),
    ],
)
def test_pathological_sql_gets_a_typed_status(sql: str, statuses: set[str]) -> None:
    records = [
        AgentLogRecord(run_id="odd", question="How many rows?", sql=sql),
        AgentLogRecord(run_id="next", question="How many users?", sql="SELECT COUNT(*) FROM users"),
    ]
    odd, following = evaluate_many(records)
    assert odd.status.value in statuses
    assert following.status is EvaluationStatus.EVALUATED


def test_time_cap_gives_timeout_status_and_the_batch_goes_on() -> None:
    records = [
        AgentLogRecord(
            run_id="slow",
            question="How many rows?",
            sql="SELECT a FROM t WHERE " + " OR ".join(f"b = {i}" for i in range(12000)),
        ),
        AgentLogRecord(run_id="fast", question="How many users?", sql="SELECT COUNT(*) FROM users"),
    ]
    slow, fast = evaluate_many(records, time_cap_s=0.2)  # the slow record takes about 1 s
    assert slow.status is EvaluationStatus.TIMEOUT
    assert slow.status_reason == "evaluation exceeded the 0.2 s per-record cap"
    assert fast.status is EvaluationStatus.EVALUATED


def test_time_cap_interrupts_a_stage_that_never_returns(monkeypatch: pytest.MonkeyPatch) -> None:
    """The SIGALRM tick stops a stage stuck in Python code (no deadline check inside it), within
    one tick of the cap; the next record is evaluated and the previous SIGALRM handler is back."""
    import signal
    import time as clock

    import stef.pipeline.evaluate as pipeline

    real_extract = pipeline.extract_question_spec

    def stuck_on_one_question(text: str | None, *args: object, **kwargs: object) -> object:
        give_up = clock.perf_counter() + 5.0  # without a working alarm the test fails, it does not hang
        while text == "hang?" and clock.perf_counter() < give_up:
            pass
        return real_extract(text, *args, **kwargs)

    monkeypatch.setattr(pipeline, "extract_question_spec", stuck_on_one_question)
    records = [
        AgentLogRecord(run_id="stuck", question="hang?", sql="SELECT 1"),
        AgentLogRecord(run_id="fine", question="How many users?", sql="SELECT COUNT(*) FROM users"),
    ]
    handler_before = signal.getsignal(signal.SIGALRM)
    started = clock.perf_counter()
    stuck, fine = evaluate_many(records, time_cap_s=0.2)
    elapsed = clock.perf_counter() - started
    assert (stuck.status, stuck.status_reason) == (
        EvaluationStatus.TIMEOUT,
        "evaluation exceeded the 0.2 s per-record cap",
    )
    assert fine.status is EvaluationStatus.EVALUATED
    assert 0.2 <= elapsed < 1.5
    assert signal.getsignal(signal.SIGALRM) is handler_before
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_a_nested_batch_gives_the_enclosing_batch_its_timer_back() -> None:
    import signal

    from stef.time_cap import _RecordAlarm

    with _RecordAlarm(1.0):
        outer_handler = signal.getsignal(signal.SIGALRM)
        with _RecordAlarm(0.4):
            assert signal.getitimer(signal.ITIMER_REAL)[1] == pytest.approx(0.1)
        assert signal.getsignal(signal.SIGALRM) == outer_handler
        assert signal.getitimer(signal.ITIMER_REAL)[1] == pytest.approx(0.25)
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def _demo_day_records() -> list[AgentLogRecord]:
    """The bundled demo day's 120 records (real NL2SQL-BUGs questions and SQL)."""
    path = Path(__file__).resolve().parents[3] / "flows" / "demo_data" / "2026-11-26" / "agent-logs.jsonl"
    return [AgentLogRecord.model_validate(row) for row in read_jsonl(path)]


def test_a_batch_evaluates_each_record_as_evaluate_does_alone() -> None:
    """evaluate_many takes the records of a chunk through the stages together (STAGE_CHUNK); every
    evaluation, failures among them, is the one evaluate() gives the record alone, in input order."""
    from stef.pipeline.evaluate import STAGE_CHUNK
    from stef.pipeline.rules import RuleBook

    demo = _demo_day_records()
    odd = [
        AgentLogRecord(run_id="empty-question", question=" ", sql="SELECT 1"),
        AgentLogRecord(run_id="parse-error", question="How many users?", sql="SELEC oops"),
        AgentLogRecord(run_id="unknown-dialect", question="How many users?", sql="SELECT 1", dialect="klingon"),
        AgentLogRecord(run_id="write", question="Delete them", sql="DELETE FROM users"),
        AgentLogRecord(run_id="both", question="How many users?", sql="SELECT COUNT(*) FROM users; DROP TABLE users"),
    ]
    records = demo[:45] + odd + demo[45:100] + odd[:2]  # failures inside and across chunks, a short last chunk
    assert len(records) > 3 * STAGE_CHUNK and len(records) % STAGE_CHUNK
    rulebook = RuleBook()
    batch = evaluate_many(records, rulebook=rulebook, time_cap_s=None)
    alone = [evaluate(record, rules=rulebook.for_app(record.app_id)) for record in records]
    assert [e.run_id for e in batch] == [r.run_id for r in records]
    assert [e.model_dump(exclude={"duration_ms"}) for e in batch] == [
        e.model_dump(exclude={"duration_ms"}) for e in alone
    ]
    statuses = {e.run_id: e.status.value for e in batch}
    assert (statuses["empty-question"], statuses["parse-error"], statuses["unknown-dialect"]) == (
        "invalid_input",
        "parse_error",
        "invalid_input",
    )
    assert sum(e.status is EvaluationStatus.EVALUATED for e in batch) >= 100


def test_time_cap_and_duration_count_each_records_own_stages(monkeypatch: pytest.MonkeyPatch) -> None:
    """A chunk's records run stage by stage, interleaved: each record's time cap and duration_ms
    count its own stages only. Every record here spends about 20 ms in its own stages and a chunk
    about 0.7 s in one stage; with a 0.15 s cap none times out, and no duration reaches the chunk's."""
    import time as clock

    import stef.pipeline.evaluate as pipeline

    real_extract = pipeline.extract_question_spec

    def slow_extract(*args: object, **kwargs: object) -> object:
        clock.sleep(0.01)
        return real_extract(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(pipeline, "extract_question_spec", slow_extract)
    records = [
        AgentLogRecord(run_id=f"r{n}", question="How many users?", sql="SELECT COUNT(*) FROM users") for n in range(40)
    ]
    started = clock.perf_counter()
    evaluations = evaluate_many(records, time_cap_s=0.15)
    assert clock.perf_counter() - started > 0.6  # 32 records x 2 questions x 10 ms in the first chunk's stage
    assert {e.status for e in evaluations} == {EvaluationStatus.EVALUATED}
    durations = [e.duration_ms or 0.0 for e in evaluations]
    assert min(durations) >= 20.0  # the record's two question specs
    assert max(durations) < 150.0  # not the 0.6 s of the other records' question specs


@pytest.mark.parametrize("in_thread", [False, True], ids=["main_thread_alarm", "worker_thread_checks"])
def test_stages_that_each_fit_the_cap_but_not_together_time_out(
    monkeypatch: pytest.MonkeyPatch, in_thread: bool
) -> None:
    """The cap is the record's whole evaluation: two stages of 0.1 s each against a 0.15 s cap end
    in ``timeout`` (the SIGALRM tick in the main thread, the check after each stage in any thread),
    and the next record is evaluated."""
    import threading
    import time as clock

    import stef.pipeline.evaluate as pipeline

    real_sql_spec, real_question_spec = pipeline.extract_sql_spec, pipeline.extract_question_spec

    def slow_sql_spec(tree: Any, *args: Any, **kwargs: Any) -> Any:  # stage B
        if "slow_table" in tree.sql():
            clock.sleep(0.1)
        return real_sql_spec(tree, *args, **kwargs)

    def slow_question_spec(text: str | None, *args: Any, **kwargs: Any) -> Any:  # stage C, the next step
        if text == "slow?":
            clock.sleep(0.1)
        return real_question_spec(text, *args, **kwargs)

    monkeypatch.setattr(pipeline, "extract_sql_spec", slow_sql_spec)
    monkeypatch.setattr(pipeline, "extract_question_spec", slow_question_spec)
    records = [
        AgentLogRecord(run_id="slow", question="slow?", sql="SELECT COUNT(*) FROM slow_table"),
        AgentLogRecord(run_id="fine", question="How many users?", sql="SELECT COUNT(*) FROM users"),
    ]
    results: list[list[Any]] = []
    if in_thread:
        worker = threading.Thread(target=lambda: results.append(evaluate_many(records, time_cap_s=0.15)))
        worker.start()
        worker.join()
    else:
        results.append(evaluate_many(records, time_cap_s=0.15))
    slow, fine = results[0]
    assert (slow.status, slow.status_reason) == (
        EvaluationStatus.TIMEOUT,
        "evaluation exceeded the 0.15 s per-record cap",
    )
    assert fine.status is EvaluationStatus.EVALUATED


def test_every_evaluation_of_a_batch_carries_its_evaluator_version_also_a_failure_before_the_stages() -> None:
    """An unexpected error while resolving a record's rules is that record's ``internal_error``; like
    every other evaluation of the batch (evaluated, timeout, parse error) it carries the batch's
    evaluator version (here with a judge's ``+calib=…`` suffix)."""
    from stef.models import EVALUATOR_VERSION
    from stef.pipeline.judge.symbolic import SymbolicJudge
    from stef.pipeline.rules import AppRules, RuleBook

    class BrokenForOneApp(RuleBook):
        def for_app(self, app_id: str | None) -> AppRules:
            if app_id == "broken":
                raise ValueError("rules store unreachable")
            return super().for_app(app_id)

    class CalibratedJudge(SymbolicJudge):
        version_suffix = "+calib=test"

    records = [
        AgentLogRecord(run_id="ok", question="How many users?", sql="SELECT COUNT(*) FROM users"),
        AgentLogRecord(run_id="broken", question="How many users?", sql="SELECT 1", app_id="broken"),
        AgentLogRecord(run_id="bad-sql", question="How many users?", sql="SELEC oops"),
    ]
    ok, broken, bad_sql = evaluate_many(records, rulebook=BrokenForOneApp(), judge=CalibratedJudge())
    assert (broken.status, broken.status_reason) == (
        EvaluationStatus.INTERNAL_ERROR,
        "ValueError: rules store unreachable",
    )
    assert (ok.status, bad_sql.status) == (EvaluationStatus.EVALUATED, EvaluationStatus.PARSE_ERROR)
    assert {e.evaluator_version for e in (ok, broken, bad_sql)} == {EVALUATOR_VERSION + "+calib=test"}


def test_oversized_question_is_too_large_not_slow() -> None:
    record = AgentLogRecord(run_id="big", question="word " * 10_000, sql="SELECT 1")
    evaluation = evaluate(record)
    assert evaluation.status is EvaluationStatus.TOO_LARGE
    assert evaluation.status_reason == "question is 50000 characters, over the 20000 cap"


def test_deadline_is_checked_between_stages_in_any_thread() -> None:
    import threading
    import time as clock

    from stef.time_cap import RecordTimeout

    caught: list[BaseException] = []

    def run() -> None:
        try:
            evaluate(
                AgentLogRecord(run_id="r", question="How many users?", sql="SELECT COUNT(*) FROM users"),
                deadline=clock.perf_counter() - 1,
            )
        except RecordTimeout as exc:
            caught.append(exc)

    worker = threading.Thread(target=run)
    worker.start()
    worker.join()
    assert len(caught) == 1


def test_every_evaluated_row_of_the_golden_sample_has_p_correct_monotone_with_its_verdict() -> None:
    from stef.monitor.benchmark import bugs_record_to_log, read_bugs_file

    rows = read_bugs_file(FIXTURES / "evaluate" / "nl2sql_bugs_sample.jsonl")
    evaluations = [
        e for e in evaluate_many([bugs_record_to_log(row) for row in rows]) if e.status is EvaluationStatus.EVALUATED
    ]
    assert evaluations and all(e.p_correct is not None and 0.0 <= e.p_correct <= 1.0 for e in evaluations)
    order = [Verdict.INCORRECT, Verdict.POTENTIALLY_INCORRECT, Verdict.LIKELY_CORRECT, Verdict.CORRECT]
    ranked = sorted(evaluations, key=lambda e: e.p_correct or 0.0)
    assert [order.index(e.verdict) for e in ranked] == sorted(order.index(e.verdict) for e in ranked)


if __name__ == "__main__":  # regenerate the golden file after a reviewed change of the method
    if sys.argv[1:] == ["--regenerate"]:
        GOLDEN_EXPECTED.write_text("".join(json.dumps(r) + "\n" for r in _golden_rows()), encoding="utf-8")


@pytest.mark.parametrize(
    ("logged", "dialect"),
    [
        ("postgresql", "postgres"),
        ("PostgreSQL", "postgres"),
        ("mssql", "tsql"),
        ("mariadb", "mysql"),
        ("sqlite3", "sqlite"),
        ("postgresql+psycopg2", "postgres"),
        ("SQL Server", "tsql"),
        ("T-SQL", "tsql"),
        ("Spark SQL", "spark"),
        ("awsathena", "athena"),
    ],
)
def test_dialect_names_agents_log_through_sqlalchemy_are_read(logged: str, dialect: str) -> None:
    """SQLAlchemy's ``engine.dialect.name`` is ``postgresql`` / ``mssql`` / ``mariadb``: every record of an
    agent that logged it was ``invalid_input`` (unknown SQL dialect); it is scored in sqlglot's dialect, the
    same as a record naming that dialect."""
    sql = "SELECT name FROM users WHERE id = 1 ORDER BY name"
    aliased = evaluate(AgentLogRecord(run_id="a", question="Which user has id 1?", sql=sql, dialect=logged))
    named = evaluate(AgentLogRecord(run_id="a", question="Which user has id 1?", sql=sql, dialect=dialect))
    assert aliased.status is EvaluationStatus.EVALUATED, aliased.status_reason
    assert (aliased.dialect, aliased.score, aliased.p_correct) == (dialect, named.score, named.p_correct)
    unknown = evaluate(AgentLogRecord(run_id="b", question="q?", sql=sql, dialect="postgresqll"))
    assert unknown.status is EvaluationStatus.INVALID_INPUT
    assert "unknown SQL dialect 'postgresqll'" in (unknown.status_reason or "")
