"""Review samples, label files and the judge's agreement with reviewers (issue 18)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from stef.monitor.review import (
    REVIEW_COLUMNS,
    LabelFileError,
    Reviewed,
    agreement,
    read_label_file,
    review_rows,
    sample_answers,
    score_band,
    write_review_file,
)


def _candidates(n: int = 400) -> list[dict[str, object]]:
    return [
        {"run_id": f"r{i:03d}", "score": float(i % 101), "p_correct": (i % 101) / 100, "app_id": f"app{i % 4}"}
        for i in range(n)
    ]


def test_random_sample_is_reproducible_and_of_the_size_asked() -> None:
    first = sample_answers(_candidates(), 50, "random", seed=7)
    assert len(first) == 50 and len({r["run_id"] for r in first}) == 50
    assert first == sample_answers(_candidates(), 50, "random", seed=7)
    assert first != sample_answers(_candidates(), 50, "random", seed=8)


def test_uncertain_takes_the_answers_nearest_one_half() -> None:
    """400 answers, each P(correct) of 0.00 … 1.00 about 4 times: the 100 nearest 0.5 are exactly
    those within 0.12 of it (4 at 0.50, 8 at each distance 0.01 … 0.12), whatever the seed."""
    candidates = _candidates()
    expected = sorted(str(r["run_id"]) for r in candidates if abs(float(r["p_correct"]) - 0.5) <= 0.12 + 1e-9)  # type: ignore[arg-type]
    assert len(expected) == 100
    for seed in (1, 2):
        assert [r["run_id"] for r in sample_answers(candidates, 100, "uncertain", seed=seed)] == expected


def test_uncertain_breaks_ties_by_the_seed() -> None:
    pool = [
        {"run_id": f"t{i:02d}", "score": 50.0, "p_correct": 0.5 + (0.05 if i % 2 else -0.05), "app_id": "a"}
        for i in range(20)
    ]
    pool.append({"run_id": "far", "score": 90.0, "p_correct": 0.9, "app_id": "a"})
    samples = {seed: [r["run_id"] for r in sample_answers(pool, 5, "uncertain", seed=seed)] for seed in range(4)}
    assert all("far" not in run_ids for run_ids in samples.values())  # 0.45 and 0.55 tie, both nearer than 0.9
    assert samples[0] == [r["run_id"] for r in sample_answers(pool, 5, "uncertain", seed=0)]
    assert len({tuple(run_ids) for run_ids in samples.values()}) > 1


def test_stratified_balances_bands_and_apps() -> None:
    chosen = sample_answers(_candidates(), 64, "stratified", seed=3)
    strata = Counter((r["app_id"], score_band(r["score"])) for r in chosen)
    assert len(strata) == 16 and set(strata.values()) == {4}  # 4 apps x 4 bands, 4 answers each


@pytest.mark.parametrize("bad", [("unknown", 0), ("nope", -5)])
def test_bad_strategy_or_size_is_refused(bad: tuple[str, int]) -> None:
    with pytest.raises(ValueError):
        sample_answers(_candidates(), bad[1] or 10, bad[0])


def _rows() -> list[dict[str, object]]:
    sample = [
        {
            "run_id": "r1",
            "question": "How many?",
            "sql": "SELECT 1",
            "score": 80.0,
            "verdict": "CORRECT",
            "p_correct": 0.8,
        },
        {
            "run_id": "r2",
            "question": 'A "quoted", line\nbreak',
            "sql": "SELECT 2",
            "score": 20.0,
            "verdict": "INCORRECT",
            "p_correct": 0.1,
        },
    ]
    return review_rows(sample)


def test_csv_round_trip_reads_labels_and_counts_unlabelled(tmp_path: Path) -> None:
    path = tmp_path / "review.csv"
    rows = _rows()
    rows[0].update(label="Correct", note="fine")
    write_review_file(rows, path, "csv")
    assert path.read_text(encoding="utf-8").splitlines()[0] == ",".join(REVIEW_COLUMNS)
    read = read_label_file(path)
    assert read.unlabelled == 1
    assert [(r.run_id, r.label, r.note, r.line) for r in read.rows] == [("r1", "correct", "fine", 2)]


def test_every_bad_line_is_named_and_nothing_is_read(tmp_path: Path) -> None:
    path = tmp_path / "review.jsonl"
    lines = [
        {"run_id": "r1", "label": "correct"},
        {"run_id": "r2", "label": "maybe"},
        {"run_id": "r3", "label": "incorrect", "error_category": "Spelling Errors"},
        {"run_id": "r1", "label": "incorrect"},
        {"run_id": "", "label": "correct"},
        {"run_id": "r6", "label": "correct", "reviewed_at": "9999-12-31T23:59:00-01:00"},
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    with pytest.raises(LabelFileError) as caught:
        read_label_file(path)
    message = str(caught.value)
    assert "5 bad row(s), nothing imported" in message
    assert "line 6: reviewed_at '9999-12-31T23:59:00-01:00' is out of range in UTC" in message
    assert "line 2: label 'maybe' is not 'correct' or 'incorrect'" in message
    assert "line 3: error_category 'Spelling Errors' is not an NL2SQL-BUGs category" in message
    assert "line 4: run_id 'r1' is labelled twice (first at line 1)" in message
    assert "line 5: no run_id" in message


def test_label_studio_export_takes_the_newest_annotation(tmp_path: Path) -> None:
    path = tmp_path / "export.json"
    tasks = [
        {
            "id": 1,
            "data": {"run_id": "r1", "question": "How many?"},
            "annotations": [
                {
                    "completed_by": {"email": "ana@example.com"},
                    "updated_at": "2026-12-01T10:00:00Z",
                    "result": [{"from_name": "label", "type": "choices", "value": {"choices": ["correct"]}}],
                },
                {
                    "completed_by": {"email": "ana@example.com"},
                    "updated_at": "2026-12-02T10:00:00Z",
                    "result": [
                        {"from_name": "label", "type": "choices", "value": {"choices": ["incorrect"]}},
                        {
                            "from_name": "error_category",
                            "type": "choices",
                            "value": {"choices": ["Value-Related Errors"]},
                        },
                        {"from_name": "note", "type": "textarea", "value": {"text": ["wrong city"]}},
                    ],
                },
            ],
        },
        {"id": 2, "data": {"run_id": "r2"}, "annotations": []},
    ]
    path.write_text(json.dumps(tasks), encoding="utf-8")
    read = read_label_file(path)
    assert read.unlabelled == 1
    (row,) = read.rows
    assert (row.run_id, row.label, row.error_category, row.note, row.reviewer) == (
        "r1",
        "incorrect",
        "Value-Related Errors",
        "wrong city",
        "ana@example.com",
    )
    assert row.reviewed_at is not None and row.reviewed_at.isoformat() == "2026-12-02T10:00:00"


def test_label_studio_task_file_holds_the_answer_not_the_labels(tmp_path: Path) -> None:
    path = tmp_path / "tasks.json"
    write_review_file(_rows(), path, "label-studio")
    tasks = json.loads(path.read_text(encoding="utf-8"))
    assert [t["data"]["run_id"] for t in tasks] == ["r1", "r2"]
    assert "label" not in tasks[0]["data"] and tasks[1]["data"]["question"] == 'A "quoted", line\nbreak'


def test_agreement_figures_by_hand() -> None:
    # 10 answers: 6 labelled correct (STEF calls 5 of them correct), 4 incorrect (STEF calls 3 incorrect)
    rows = (
        [Reviewed(True, 80.0, 0.8)] * 5
        + [Reviewed(True, 40.0, 0.4)]
        + [Reviewed(False, 30.0, 0.3, "Value-Related Errors")] * 2
        + [Reviewed(False, None, None, "Value-Related Errors")]
        + [Reviewed(False, 90.0, 0.9, "Table-Related Errors")]
    )
    figures = agreement(rows, resamples=200)
    # accuracy 8/10; chance agreement: called correct 6/10 and labelled correct 6/10 -> 0.36 + 0.16 = 0.52
    assert figures["n"] == 10 and figures["accuracy"] == 0.8 and figures["base_rate_incorrect"] == 0.4
    assert figures["kappa"] == pytest.approx((0.8 - 0.52) / (1 - 0.52), abs=1e-4)
    assert figures["precision_correct"] == pytest.approx(5 / 6, abs=1e-4) and figures[
        "recall_correct"
    ] == pytest.approx(5 / 6, abs=1e-4)
    assert figures["precision_incorrect"] == 0.75 and figures["recall_incorrect"] == 0.75
    # AUROC of p (an unscored answer counts as p = 0): of 24 (correct, wrong) pairs the correct answer
    # ranks higher in 18 (each correct answer beats the three wrong ones below 0.4, none beats the 0.9)
    assert figures["auroc"] == pytest.approx(18 / 24, abs=1e-4)
    assert figures["recall_by_category"] == {
        "Table-Related Errors": {"n": 1, "recall": 0.0},
        "Value-Related Errors": {"n": 3, "recall": 1.0},
    }
    low, high = figures["ci"]["accuracy"]
    assert low <= 0.8 <= high and low >= 0.0 and high <= 1.0
    assert agreement([])["n"] == 0 and agreement([])["accuracy"] is None


def test_a_semicolon_csv_with_padded_headers_reads_and_two_reviewers_may_label_one_answer(tmp_path: Path) -> None:
    path = tmp_path / "excel.csv"
    path.write_text(
        'run_id ; label ;reviewer;note\nr1;correct;ana;ok\nr1;incorrect;bo;"two\nlines"\nr2;;;\n', encoding="utf-8"
    )
    read = read_label_file(path)
    assert [(r.run_id, r.label, r.reviewer, r.line) for r in read.rows] == [
        ("r1", "correct", "ana", 2),
        ("r1", "incorrect", "bo", 3),
    ]
    assert read.unlabelled == 1
    path.write_text("run_id,label,reviewer\nr1,correct,ana\nr1,incorrect,ana\n", encoding="utf-8")
    with pytest.raises(LabelFileError, match="line 3: run_id 'r1' is labelled twice by 'ana' \\(first at line 2\\)"):
        read_label_file(path)


def test_a_label_studio_export_gives_one_row_per_annotator(tmp_path: Path) -> None:
    def annotation(who: str, choice: str, when: str) -> dict[str, object]:
        return {
            "completed_by": {"email": who},
            "updated_at": when,
            "result": [{"from_name": "label", "type": "choices", "value": {"choices": [choice]}}],
        }

    export = [
        {
            "data": {"run_id": "r1", "sample_strategy": "random"},
            "annotations": [
                annotation("ana@x", "incorrect", "2026-12-01T09:00:00Z"),
                annotation("bo@x", "correct", "2026-12-01T10:00:00Z"),
                annotation("ana@x", "correct", "2026-12-01T11:00:00Z"),
            ],
        }
    ]
    path = tmp_path / "export.json"
    path.write_text(json.dumps(export), encoding="utf-8")
    rows = read_label_file(path).rows
    assert sorted((r.reviewer, r.label, r.sample_strategy) for r in rows) == [
        ("ana@x", "correct", "random"),
        ("bo@x", "correct", "random"),
    ]


def test_uncertain_sampling_puts_unscored_answers_last() -> None:
    pool = [{"run_id": f"u{i}", "score": None, "p_correct": None, "app_id": "a"} for i in range(50)]
    pool += [{"run_id": f"s{i}", "score": 50.0, "p_correct": 0.5, "app_id": "a"} for i in range(50)]
    pool += [{"run_id": f"x{i}", "score": 95.0, "p_correct": 0.99, "app_id": "a"} for i in range(5)]
    chosen = sample_answers(pool, 53, "uncertain", seed=4)
    assert sum(1 for r in chosen if r["p_correct"] is None) == 0  # 0.99 is still before no P(correct)
    assert sum(1 for r in chosen if r["p_correct"] == 0.99) == 3


def _task(result: object, **task: object) -> dict[str, object]:
    return {"id": 9, "data": {"run_id": "r1"}, "annotations": [{"result": result}], **task}


@pytest.mark.parametrize(
    ("task", "problem"),
    [
        pytest.param("r1", "task 1 is a string, not an object", id="task_not_an_object"),
        pytest.param({"data": "x", "annotations": "y"}, "task 1: data is a string, not an object", id="data_string"),
        pytest.param(
            {"id": 9, "data": {"run_id": "r1"}, "annotations": "y"},
            "task id 9: annotations is a string, not a list",
            id="annotations_string",
        ),
        pytest.param(
            {"id": "t9", "data": {"run_id": "r1"}, "annotations": [["x"]]},
            "task id 't9': annotations[0] is a list, not an object",
            id="annotation_not_an_object",
        ),
        pytest.param(_task({"a": 1}), "task id 9: annotations[0].result is an object, not a list", id="result_object"),
        pytest.param(_task([7]), "task id 9: annotations[0].result[0] is a number, not an object", id="result_item"),
        pytest.param(
            _task([{"from_name": "label", "value": [1]}]),
            "task id 9: annotations[0].result[0].value (label) is a list, not an object",
            id="value_list",
        ),
        pytest.param(
            _task([{"from_name": "label", "value": {"choices": "correct"}}]),
            "task id 9: annotations[0].result[0].value.choices (label) is a string, not a list of one text",
            id="choices_string",
        ),
        pytest.param(
            _task([{"from_name": "label", "value": {"choices": [1]}}]),
            "task id 9: annotations[0].result[0].value.choices (label) is a list, not a list of one text",
            id="choices_number",
        ),
        pytest.param(
            _task([{"from_name": "error_category", "value": {"choices": ["Value-Related Errors", "Join Errors"]}}]),
            "task id 9: annotations[0].result[0].value.choices (error_category) holds 2 choices "
            "('Value-Related Errors', 'Join Errors'), not one",
            id="two_choices",
        ),
        pytest.param(
            _task(
                [
                    {"from_name": "label", "value": {"choices": ["correct"]}},
                    {"from_name": "note", "value": {"text": "ok"}},
                ]
            ),
            "task id 9: annotations[0].result[1].value.text (note) is a string, not a list of texts",
            id="text_string",
        ),
    ],
)
def test_a_label_studio_task_of_the_wrong_shape_is_a_named_bad_row(tmp_path: Path, task: object, problem: str) -> None:
    path = tmp_path / "export.json"
    good = {
        "id": 1,
        "data": {"run_id": "r2"},
        "annotations": [{"result": [{"from_name": "label", "value": {"choices": ["correct"]}}]}],
    }
    path.write_text(json.dumps([task, good]), encoding="utf-8")
    with pytest.raises(LabelFileError) as caught:
        read_label_file(path)
    assert str(caught.value) == f"{path}: 1 bad row(s), nothing imported: line 1: {problem}"
    kept = read_label_file(path, keep_problems=True)
    assert kept.problems == ((1, problem),)
    assert [(row.line, row.run_id, row.label) for row in kept.rows] == [(2, "r2", "correct")]


def test_label_studio_controls_of_another_config_and_empty_choices_are_not_problems(tmp_path: Path) -> None:
    path = tmp_path / "export.json"
    results = [
        {"from_name": "sentiment", "value": "anything"},
        {"from_name": "label", "value": {"choices": []}},
        {"from_name": "note", "value": {"text": ["a", "b"]}},
    ]
    path.write_text(json.dumps([_task(results)]), encoding="utf-8")
    read = read_label_file(path)
    assert read.rows == () and read.unlabelled == 1 and read.problems == ()


def test_csv_cells_guarded_against_formulas_read_back_exactly(tmp_path: Path) -> None:
    """The writer's `'` is taken off on reading, and only it: a text that starts with `'` itself
    keeps it."""
    texts = ["=cmd|' /C calc'!A0-0", "'=x", "''@y", "+1", "-2", "@SUM(A1)", "'quoted", "plain", "\tTAB"]
    rows = review_rows([{"run_id": text, "question": text, "score": 50.0} for text in texts])
    for row in rows:
        row.update(label="correct", note=row["run_id"])
    path = tmp_path / "review.csv"
    write_review_file(rows, path, "csv")
    written = path.read_text(encoding="utf-8")
    assert "\n'=cmd|' /C calc'!A0-0," in written and "\n''=x," in written and "\n'''@y," in written
    read = read_label_file(path)
    assert sorted(row.run_id for row in read.rows) == sorted(text.strip() for text in texts)
    assert {row.run_id: row.note for row in read.rows}["'=x"] == "'=x"


def test_a_csv_field_longer_than_the_csv_default_reads_and_the_limit_is_restored(tmp_path: Path) -> None:
    import csv

    before = csv.field_size_limit()
    long_sql = "SELECT " + "1" * 199_990
    rows = review_rows([{"run_id": "r1", "sql": long_sql, "score": 50.0}])
    rows[0]["label"] = "wrong"
    path = tmp_path / "review.csv"
    write_review_file(rows, path, "csv")
    (row,) = read_label_file(path).rows
    assert (row.run_id, row.label) == ("r1", "incorrect")
    assert csv.field_size_limit() == before


def test_a_csv_error_names_the_file_and_the_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import csv

    import stef.monitor.review

    before = csv.field_size_limit()
    monkeypatch.setattr(stef.monitor.review, "CSV_FIELD_LIMIT", 8)
    path = tmp_path / "labels.csv"
    path.write_text('run_id,label\nr1,correct\n"r2\nsecond line of a long id",correct\n', encoding="utf-8")
    with pytest.raises(LabelFileError) as caught:
        read_label_file(path)
    assert str(caught.value) == (
        f"{path}: 1 bad row(s), nothing imported: line 3: not readable CSV (field larger than field limit (8))"
    )
    assert csv.field_size_limit() == before


def test_a_quote_never_closed_is_an_error_not_the_rest_of_the_file_swallowed_into_one_note(tmp_path: Path) -> None:
    """A hand-edited note opening a quote it never closes (`"join is wrong`) made the csv reader
    read every later line into that note: 2 of 4 labelled rows were imported, exit code 0."""
    path = tmp_path / "labels.csv"
    path.write_text(
        'run_id,label,note\nr1,correct,\nr2,incorrect,"join is wrong\nr3,correct,\nr4,incorrect,ok\n', encoding="utf-8"
    )
    with pytest.raises(LabelFileError) as caught:
        read_label_file(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: 1 bad row(s), nothing imported: line 3: not readable CSV")
    assert "never closed" in message
    stray = tmp_path / "stray.csv"  # text after a closing quote: csv glued it on ("wrong" join -> wrong join)
    stray.write_text('run_id,label,note\nr1,incorrect,"wrong" join\n', encoding="utf-8")
    with pytest.raises(LabelFileError, match=r"stray\.csv: 1 bad row\(s\), nothing imported: line 2: not readable CSV"):
        read_label_file(stray)
    fine = tmp_path / "fine.csv"  # a quote inside an unquoted cell, and a doubled one, are text
    fine.write_text('run_id,label,note\nr1,incorrect,he said "x"\nr2,correct,"a ""b"" c"\n', encoding="utf-8")
    assert [row.note for row in read_label_file(fine).rows] == ['he said "x"', 'a "b" c']


def test_a_kappa_of_zero_has_no_minus_sign() -> None:
    import math

    figures = agreement(
        [Reviewed(True, 40.0, 0.4), Reviewed(True, 30.0, 0.3), Reviewed(False, 20.0, 0.2)], resamples=20
    )
    assert figures["kappa"] == 0.0 and math.copysign(1.0, figures["kappa"]) == 1.0


def test_a_jsonl_label_file_splits_at_line_feeds_only(tmp_path: Path) -> None:
    """A reviewer's note may hold U+2028 or U+0085 (pasted text), raw in JSON written with
    ``ensure_ascii=False``: the row stays one row and later lines keep their numbers."""
    path = tmp_path / "review.jsonl"
    note = "see\u2028line two\u0085and three"
    lines = [{"run_id": "r1", "label": "correct", "note": note}, {"run_id": "r2", "label": "maybe"}]
    path.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), encoding="utf-8")
    with pytest.raises(LabelFileError) as caught:
        read_label_file(path)
    assert "line 2: label 'maybe' is not 'correct' or 'incorrect'" in str(caught.value)
    path.write_text(json.dumps(lines[0], ensure_ascii=False) + "\n", encoding="utf-8")
    read = read_label_file(path)
    assert [(r.run_id, r.label, r.note, r.line) for r in read.rows] == [("r1", "correct", note, 1)]


def test_a_label_file_saved_by_a_spreadsheet_in_another_encoding_names_the_line_and_the_fix(tmp_path: Path) -> None:
    """Excel's plain "CSV" is Windows-1252: the error was Python's codec message
    ("'utf-8' codec can't decode byte 0xe8 in position 37: invalid continuation byte")."""
    path = tmp_path / "labels.csv"
    path.write_bytes("run_id,label,note\nr1,correct,ok\nr2,incorrect,très\n".encode("cp1252"))
    with pytest.raises(LabelFileError) as caught:
        read_label_file(path)
    assert str(caught.value) == f'{path}:3: not UTF-8 text (byte 0xe8); save the file as UTF-8 (Excel: "CSV UTF-8")'
    path.write_text("run_id,label\nr1,correct\n", encoding="utf-16")  # PowerShell's default
    with pytest.raises(LabelFileError) as caught:
        read_label_file(path)
    assert str(caught.value) == f'{path}: UTF-16 text, not UTF-8; save the file as UTF-8 (Excel: "CSV UTF-8")'


def test_the_interval_of_a_perfectly_calibrated_ece_holds_zero() -> None:
    """Ten answers at P(correct) 0.5, five correct; ten at 0.8, eight correct: each bin's mean p is
    its share of correct answers, so ECE = 0 exactly. Resamples repeat answers and unbalance the
    bins (their ECE is above 0 in nearly all of them): the percentile interval was [0.02, 0.25]."""
    rows = [Reviewed(i < 5, 60.0, 0.5) for i in range(10)] + [Reviewed(i < 8, 80.0, 0.8) for i in range(10)]
    figures = agreement(rows)
    assert figures["ece"] == 0.0
    low, high = figures["ci"]["ece"]
    assert low == 0.0 and 0.1 < high < 0.4
    for key, interval in figures["ci"].items():
        assert interval is not None and interval[0] <= figures[key] <= interval[1], key


def test_a_scored_answer_stored_without_p_correct_is_left_out_of_auroc_and_ece_only() -> None:
    """Evaluations stored before migration 0005 have a score and no P(correct): they were ranked and
    binned as P(correct) 0, as if STEF had been sure they were wrong (AUROC 0.67, ECE 0.26 here)."""
    rows = [
        Reviewed(True, 80.0, 0.9),
        Reviewed(False, 30.0, 0.2),
        Reviewed(True, 80.0, None),  # scored before the warehouse kept p_correct
        Reviewed(False, 90.0, None),
        Reviewed(False, None, None),  # unscored: called incorrect, P(correct) 0
    ]
    figures = agreement(rows, resamples=50)
    assert figures["n"] == 5 and figures["accuracy"] == 0.8  # the calls of all five: 4 agree
    # ranked: 0.9 (correct) above 0.2 and 0.0 (both wrong)
    assert figures["auroc"] == 1.0
    # bins: 0.9 (1 of 1 correct) |0.9 - 1| = 0.1; 0.2 (0 of 1) 0.2; 0.0 (0 of 1) 0; weighted 1/3 each
    assert figures["ece"] == pytest.approx(0.3 / 3, abs=1e-4)
    only_old = agreement([Reviewed(True, 80.0, None), Reviewed(False, 90.0, None)], resamples=20)
    assert (only_old["auroc"], only_old["ece"], only_old["accuracy"]) == (None, None, 0.5)


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        pytest.param(
            "labels.jsonl",
            '{"run_id": "r1", "label": "correct"}\n{"run_id": "r2", "label": "correct"}\n'
            '{"run_id": "r3", "label": "correct"}\n{oops\n[1, 2]\n{"run_id": "r6", "label": "maybe"}\n"text"\n',
            [
                "line 4: not JSON (Expecting property name enclosed in double quotes)",
                "line 5: not a JSON object but a list",
                "line 6: label 'maybe' is not 'correct' or 'incorrect'",
                "line 7: not a JSON object but a string",
            ],
            id="jsonl",
        ),
        pytest.param(
            "labels.csv",
            'run_id,label,note\nr1,correct,\nr2,incorrect,"wrong" join\nr3,maybe,\nr4,correct,"a" b\nr5,correct,\n',
            [
                "line 3: not readable CSV (',' expected after '\"')",
                "line 4: label 'maybe' is not 'correct' or 'incorrect'",
                "line 5: not readable CSV (',' expected after '\"')",
            ],
            id="csv",
        ),
    ],
)
def test_every_bad_line_of_every_format_is_named(tmp_path: Path, name: str, text: str, expected: list[str]) -> None:
    """A JSONL file named its first line that was not a JSON object only (line 4), and a CSV its
    first unreadable line only, while its other bad lines were all named."""
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(LabelFileError) as caught:
        read_label_file(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: {len(expected)} bad row(s), nothing imported: line ")
    parts = message.split("nothing imported: ", 1)[1].split("; line ")
    assert len(parts) == len(expected)
    for part, wanted in zip(parts, expected, strict=True):
        assert ("line " + part.removeprefix("line ")).startswith(wanted), (part, wanted)


def test_bad_lines_past_twenty_are_counted_not_listed(tmp_path: Path) -> None:
    path = tmp_path / "labels.jsonl"
    path.write_text("".join("{oops\n" for _ in range(25)), encoding="utf-8")
    with pytest.raises(LabelFileError) as caught:
        read_label_file(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: 25 bad row(s), nothing imported: line 1: not JSON")
    assert message.count("not JSON") == 20 and message.endswith(
        "line 20: not JSON (Expecting property name enclosed in double quotes); … and 5 more"
    )


def _workbook(path: Path) -> Path:
    """A minimal Excel workbook (an .xlsx is a zip archive of XML parts)."""
    import zipfile

    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as book:
        book.writestr("[Content_Types].xml", '<?xml version="1.0"?><Types xmlns="x"/>' * 20)
        book.writestr("xl/worksheets/sheet1.xml", "<worksheet><sheetData/></worksheet>" * 20)
    return path


@pytest.mark.parametrize(
    ("name", "data", "kind"),
    [
        pytest.param("real.xlsx", None, "a workbook or other zip archive (.xlsx, .ods, .zip)", id="xlsx"),
        pytest.param(
            "old.xls",
            b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1\xfe\xff" + bytes(500),
            "an Excel 97-2003 workbook (.xls) or other OLE2 file",
            id="xls",
        ),
    ],
)
def test_a_workbook_label_file_is_named_as_a_workbook(tmp_path: Path, name: str, data: bytes | None, kind: str) -> None:
    """An Excel workbook (a zip archive) was "not UTF-8 text (byte 0x86)": it says what the file is
    and how to save it as CSV."""
    path = tmp_path / name
    if data is None:
        _workbook(path)
    else:
        path.write_bytes(data)
    with pytest.raises(LabelFileError) as caught:
        read_label_file(path)
    assert str(caught.value) == (
        f"{path}: {kind}, not a CSV, JSONL or JSON label file; if it is a workbook, open it in the spreadsheet "
        'and save the sheet as CSV (Excel: File > Save As > "CSV UTF-8")'
    )
