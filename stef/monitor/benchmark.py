"""Measuring the judge on labelled data in the NL2SQL-BUGs format.

NL2SQL-BUGs (Liu et al., KDD 2025) records: ``id``, ``question``, ``evidence``, ``db_id``,
``sql``, ``label`` (true = semantically correct), ``error_types``. They map to agent log records
as the data's README says: id -> run_id, question -> question, question + " " + evidence ->
enriched_question (``None`` when evidence is empty), sql -> sql, dialect ``sqlite``,
db_id -> app_id. A score ≥ 75 counts as "predicted correct".
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stef.classification_metrics import auroc, expected_calibration_error
from stef.display import json_kind
from stef.models import AgentLogRecord, Evaluation

__all__ = [
    "CORRECT_THRESHOLD",
    "JudgeBenchmark",
    "auroc",
    "bugs_record_to_log",
    "expected_calibration_error",
    "measure",
    "read_bugs_file",
]

CORRECT_THRESHOLD = 75.0
"""Φ at or above which an answer counts as predicted correct (the ``good`` band)."""


def bugs_record_to_log(row: dict[str, Any], dialect: str = "sqlite") -> AgentLogRecord:
    """Map one NL2SQL-BUGs row to an :class:`AgentLogRecord` (see module docstring)."""
    evidence = (row.get("evidence") or "").strip()
    question = row.get("question") or ""
    return AgentLogRecord(
        run_id=str(row["id"]),
        question=question,
        enriched_question=f"{question} {evidence}" if evidence else None,
        sql=row.get("sql") or "",
        dialect=dialect,
        app_id=row.get("db_id"),
        agent_id="nl2sql-bugs",
        agent_version="dev",
    )


LABEL_TEXTS = {"true": True, "false": False, "correct": True, "incorrect": False}
"""Label strings read as booleans (any case, surrounding spaces ignored): a file converted from CSV,
or labelled with the words of ``stef review``."""


def _label(value: object) -> bool | None:
    """A row's ``label`` as a boolean: JSON ``true``/``false``, ``1``/``0`` or the strings of
    :data:`LABEL_TEXTS`; ``None`` for anything else (``"maybe"``, ``2``, ``null``).

    >>> _label(True), _label(0), _label(" FALSE "), _label("Incorrect"), _label("no"), _label(1.0)
    (True, False, False, False, None, None)
    """
    if isinstance(value, bool):
        return value
    if type(value) is int and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        return LABEL_TEXTS.get(value.strip().lower())
    return None


def _row_problem(row: object) -> str | None:
    """Why a decoded line cannot be a labelled row, or ``None``."""
    if not isinstance(row, dict):
        return f"not a JSON object but {json_kind(row)}"
    if "label" not in row:
        return "no label (true = the SQL is correct, false = it is not)"
    if _label(row["label"]) is None:
        shown = json.dumps(row["label"], ensure_ascii=False)
        return f"label {shown[:60]} is not true or false"
    for name in ("question", "sql", "evidence", "db_id"):
        if row.get(name) is not None and not isinstance(row[name], str):
            return f"{name} is {json_kind(row[name])}, not a string"
    error_types = row.get("error_types")
    if error_types is not None and not (
        isinstance(error_types, list)
        and all(isinstance(e, dict) and isinstance(e.get("error_type"), str) for e in error_types)
    ):
        return 'error_types is not a list of {"error_type": "..."} objects'
    return None


def read_bugs_file(path: str | Path) -> list[dict[str, Any]]:
    """Read an NL2SQL-BUGs-format file into dicts, every ``label`` a boolean (:func:`_label` reads
    ``"false"``, ``"incorrect"`` and ``0`` too): JSON lines (blank lines skipped), or one JSON array
    of rows, as the benchmark publishes it (``data/NL2SQL-Bugs-with-evidence.json``).

    Raises:
        OSError: the file cannot be read.
        InputError: a line is not JSON, not an object, has no label or one that is not true or
            false, a text field that is not a string, or ``error_types`` of another shape; the
            message names the file and the line (in a JSON array: the row).
    """
    from stef.config_files import json_lines
    from stef.errors import InputError

    text = Path(path).read_text(encoding="utf-8-sig")  # Excel's byte-order mark
    if text.lstrip().startswith("["):
        return _read_bugs_array(path, text)
    rows: list[dict[str, Any]] = []
    for number, line in json_lines(text):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except RecursionError:
            raise InputError(f"{path}:{number}: nested too deeply to read") from None
        except ValueError as exc:
            raise InputError(f"{path}:{number}: not JSON ({getattr(exc, 'msg', str(exc).split(';')[0])})") from exc
        problem = _row_problem(row)
        if problem is not None:
            raise InputError(f"{path}:{number}: {problem}")
        rows.append({**row, "label": _label(row["label"])})
    return rows


def _read_bugs_array(path: str | Path, text: str) -> list[dict[str, Any]]:
    """The rows of a file that is one JSON array (:func:`read_bugs_file`).

    Raises:
        InputError: the text is not JSON (the line is named), or a row is not a labelled row (the
            row is named, counted from 1).

    >>> _read_bugs_array("bugs.json", '[{"question": "q", "sql": "SELECT 1", "label": true}, {"sql": "x"}]')
    Traceback (most recent call last):
    ...
    stef.errors.InputError: bugs.json: row 2: no label (true = the SQL is correct, false = it is not)
    """
    from stef.errors import InputError

    try:
        payload = json.loads(text)
    except RecursionError:
        raise InputError(f"{path}: nested too deeply to read") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}:{exc.lineno}: not JSON ({exc.msg})") from exc
    except ValueError as exc:
        raise InputError(f"{path}: not JSON ({str(exc).split(';')[0]})") from exc
    rows: list[dict[str, Any]] = []
    for number, row in enumerate(payload, start=1):
        problem = _row_problem(row)
        if problem is not None:
            raise InputError(f"{path}: row {number}: {problem}")
        rows.append({**row, "label": _label(row["label"])})
    return rows


@dataclass(frozen=True)
class JudgeBenchmark:
    """Judge figures on a labelled file.

    Attributes:
        records: rows in the file.
        coverage: evaluated / records.
        accuracy: share of evaluated rows whose prediction (score ≥ 75) equals the label.
        auroc: AUROC of the score for label = correct (evaluated rows).
        negative_precision, negative_recall: precision/recall of "predicted incorrect".
        positive_precision, positive_recall: precision/recall of "predicted correct".
        recall_by_category: error category -> share of its incorrect rows predicted incorrect.
        accuracy_p_correct: share of evaluated rows with (p_correct ≥ 0.5) equal to the label.
        auroc_p_correct: AUROC of p_correct (evaluated rows).
        ece: expected calibration error of p_correct over 10 bins (evaluated rows).
        mean_p_correct, share_correct: mean p_correct and the labelled share of correct answers
            (evaluated rows): the estimated and the true rate.
    """

    records: int
    coverage: float
    accuracy: float
    auroc: float
    negative_precision: float
    negative_recall: float
    positive_precision: float
    positive_recall: float
    recall_by_category: dict[str, float] = field(default_factory=dict)
    category_counts: dict[str, int] = field(default_factory=dict)
    accuracy_p_correct: float = float("nan")
    auroc_p_correct: float = float("nan")
    ece: float = float("nan")
    mean_p_correct: float = float("nan")
    share_correct: float = float("nan")


def _ratio(numerator: float, denominator: int) -> float:
    return numerator / denominator if denominator else float("nan")


def measure(
    rows: Sequence[dict[str, Any]], evaluations: Sequence[Evaluation], threshold: float = CORRECT_THRESHOLD
) -> JudgeBenchmark:
    """Compare evaluations with the rows' labels (same order)."""
    scored = [(row, ev) for row, ev in zip(rows, evaluations, strict=True) if ev.score is not None]
    labels = [bool(row["label"]) for row, _ in scored]
    scores = [float(ev.score) for _, ev in scored]  # type: ignore[arg-type]
    predicted = [score >= threshold for score in scores]
    pairs = list(zip(predicted, labels, strict=True))
    true_pos = sum(1 for p, y in pairs if p and y)
    true_neg = sum(1 for p, y in pairs if not p and not y)
    false_pos = sum(1 for p, y in pairs if p and not y)
    false_neg = sum(1 for p, y in pairs if not p and y)
    caught: Counter[str] = Counter()
    totals: Counter[str] = Counter()
    for (row, _), p in zip(scored, predicted, strict=True):
        if row["label"]:
            continue
        for category in {e["error_type"] for e in row.get("error_types") or []}:
            totals[category] += 1
            caught[category] += int(not p)
    probabilities = [float(ev.p_correct) if ev.p_correct is not None else 0.0 for _, ev in scored]
    return JudgeBenchmark(
        accuracy_p_correct=_ratio(
            sum((p >= 0.5) == y for p, y in zip(probabilities, labels, strict=True)), len(scored)
        ),
        auroc_p_correct=auroc(probabilities, labels),
        ece=expected_calibration_error(probabilities, labels),
        mean_p_correct=_ratio(sum(probabilities), len(scored)) if scored else float("nan"),
        share_correct=_ratio(sum(labels), len(scored)),
        records=len(rows),
        coverage=_ratio(len(scored), len(rows)),
        accuracy=_ratio(true_pos + true_neg, len(scored)),
        auroc=auroc(scores, labels),
        negative_precision=_ratio(true_neg, true_neg + false_neg),
        negative_recall=_ratio(true_neg, true_neg + false_pos),
        positive_precision=_ratio(true_pos, true_pos + false_pos),
        positive_recall=_ratio(true_pos, true_pos + false_neg),
        recall_by_category={c: _ratio(caught[c], totals[c]) for c in sorted(totals)},
        category_counts=dict(sorted(totals.items())),
    )
