"""Reviewers close the loop (issue 18): review samples, label files, and the judge's agreement
with people.

* :func:`sample_answers` draws the answers a team labels (``random``, ``uncertain``: the answers
  whose P(correct) is nearest 0.5, ``stratified``: balanced over score bands and apps);
* :func:`write_review_file` writes them as CSV, JSONL or Label Studio tasks, and
  :func:`read_label_file` reads the filled file back (or a Label Studio export), checking every row
  (:class:`LabelFileError` names each bad line; nothing is half-read);
* :func:`agreement` measures STEF against the labels: n, base rate of wrong answers, accuracy of
  its call (Φ ≥ 75 means "correct"), precision and recall of both classes, Cohen's κ, AUROC of
  P(correct), expected calibration error, recall per error category, each with a bootstrap 95 %
  interval.

Labels are ``correct`` / ``incorrect``; the error category, when given, is a category of the
NL2SQL-BUGs taxonomy (Liu et al., KDD 2025; :data:`stef.llm.verdict.TAXONOMY`).
"""

from __future__ import annotations

import csv
import io
import json
import math
import random
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from stef.classification_metrics import auroc, expected_calibration_error
from stef.display import json_kind, looks_like_formula, spreadsheet_text
from stef.errors import StefError
from stef.llm.verdict import TAXONOMY

STRATEGIES = ("random", "uncertain", "stratified")
"""How :func:`sample_answers` draws a review sample."""
FORMATS = ("csv", "jsonl", "label-studio")
"""Review file formats (:func:`write_review_file`)."""
CORRECT_FROM_SCORE = 75.0
"""Φ at or above which STEF calls an answer correct."""
BOOTSTRAP_RESAMPLES = 1000
ERROR_CATEGORIES: tuple[str, ...] = tuple(TAXONOMY)
"""The NL2SQL-BUGs categories a reviewer may name."""

REVIEW_COLUMNS = (
    "run_id",
    "app_id",
    "agent_id",
    "agent_version",
    "log_date",
    "question",
    "enriched_question",
    "sql",
    "score",
    "verdict",
    "p_correct",
    "evidence",
    "evaluator_version",
    "sample_strategy",
    "label",
    "error_category",
    "note",
)
"""Columns of a review file, in order; reviewers fill the last three."""

_LABEL_WORDS = {
    "correct": "correct",
    "right": "correct",
    "true": "correct",
    "yes": "correct",
    "1": "correct",
    "incorrect": "incorrect",
    "wrong": "incorrect",
    "false": "incorrect",
    "no": "incorrect",
    "0": "incorrect",
}


class LabelFileError(StefError):
    """A label file cannot be imported: the message names every bad line (up to 20) and why."""


# --------------------------------------------------------------------------- sampling


def sample_answers(
    candidates: Sequence[Mapping[str, Any]], n: int, strategy: str, seed: int = 0
) -> list[dict[str, Any]]:
    """``n`` answers of ``candidates`` to review (all of them when there are fewer), in run-id order.

    Args:
        candidates: scored answers with ``run_id``, ``score``, ``p_correct`` and ``app_id``
            (:func:`warehouse.reviews.read_review_candidates`).
        n: sample size (≥ 1).
        strategy: ``random`` (uniform); ``uncertain`` (uncertainty sampling: the ``n`` answers
            whose P(correct) is nearest 0.5, answers equally near in an order drawn from ``seed``;
            answers without a P(correct) only after all the others); ``stratified`` (the same
            number from every score band × app, round robin, random within a stratum).
        seed: the random seed (the same seed and candidates give the same sample).

    Raises:
        ValueError: an unknown strategy or ``n`` < 1.

    >>> rows = [{"run_id": f"r{i}", "score": 10.0 * i, "p_correct": i / 10, "app_id": "a"} for i in range(10)]
    >>> [r["run_id"] for r in sample_answers(rows, 3, "random", seed=7)] == [r["run_id"] for r in sample_answers(rows, 3, "random", seed=7)]
    True
    >>> len(sample_answers(rows, 50, "stratified"))
    10
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown sampling strategy {strategy!r}: use one of {', '.join(STRATEGIES)}")
    if n < 1:
        raise ValueError(f"the sample size must be at least 1, got {n}")
    rng = random.Random(seed)
    pool = sorted((dict(row) for row in candidates), key=lambda row: str(row["run_id"]))
    if n >= len(pool):
        chosen = pool
    elif strategy == "random":
        chosen = rng.sample(pool, n)
    elif strategy == "uncertain":
        chosen = [row for _, row in sorted(((_uncertainty_key(row, rng), row) for row in pool), key=lambda k: k[0])[:n]]
    else:
        strata: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for row in pool:
            strata.setdefault((score_band(row.get("score")), str(row.get("app_id") or "")), []).append(row)
        queues = [rng.sample(rows, len(rows)) for _, rows in sorted(strata.items())]
        chosen = []
        while len(chosen) < n:
            for queue in queues:
                if queue and len(chosen) < n:
                    chosen.append(queue.pop())
    return sorted(chosen, key=lambda row: str(row["run_id"]))


def _uncertainty_key(row: Mapping[str, Any], rng: random.Random) -> tuple[int, float, float]:
    """The order in which ``uncertain`` sampling takes an answer: (unscored, distance of P(correct)
    from 0.5, a seeded random tie-break). An answer without a P(correct) has a fixed call,
    "incorrect", and is least worth a reviewer's time: it comes after every answer with one.

    >>> rng = random.Random(0)
    >>> [_uncertainty_key(row, rng)[:2] for row in ({"p_correct": 0.45}, {"p_correct": 0.55}, {"p_correct": None})]
    [(0, 0.05), (0, 0.05), (1, 0.0)]
    """
    tie_break = rng.random()
    p = row.get("p_correct")
    if not isinstance(p, int | float) or isinstance(p, bool) or math.isnan(p):
        return (1, 0.0, tie_break)
    # rounded: 0.45 and 0.55 are equally near 0.5, though not in binary floating point
    return (0, round(abs(float(p) - 0.5), 9), tie_break)


def score_band(score: object) -> str:
    """The band of a Φ (``excellent`` ≥ 90, ``good`` ≥ 75, ``marginal`` ≥ 50, else ``poor``).

    >>> score_band(90.0), score_band(80), score_band(50), score_band(None)
    ('excellent', 'good', 'marginal', 'poor')
    """
    value = float(score) if isinstance(score, int | float) else 0.0
    return "excellent" if value >= 90 else "good" if value >= 75 else "marginal" if value >= 50 else "poor"


def evidence_summary(row: Mapping[str, Any], limit: int = 300) -> str:
    """A one-line summary of why STEF scored an answer as it did: its verdict, P(correct) and
    suspected error categories, then the start of the judge's rationale.

    >>> evidence_summary({"verdict": "INCORRECT", "p_correct": 0.12, "categories": ["Value-Related Errors"],
    ...     "rationale": "INCORRECT (calibrated P(correct)=0.12, calib): filter value differs"})
    'INCORRECT, P(correct) 0.12; suspected Value-Related Errors; filter value differs'
    """
    parts = [f"{row.get('verdict') or '?'}, P(correct) {_number(row.get('p_correct'), '.2f')}"]
    categories = [str(c) for c in row.get("categories") or ()]
    if categories:
        parts.append("suspected " + ", ".join(categories))
    rationale = str(row.get("rationale") or "")
    if "): " in rationale:
        rationale = rationale.split("): ", 1)[1]
    if rationale:
        parts.append(rationale)
    text = " ".join("; ".join(parts).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _number(value: object, spec: str) -> str:
    return "–" if not isinstance(value, int | float) else format(float(value), spec)


UNBIASED_STRATEGIES = ("random", "all")
"""Sample strategies whose labels estimate the judge's operating characteristics without bias
(``all``: the sample is every candidate answer). Labels from ``uncertain`` or ``stratified`` samples
over-represent some P(correct) values, so they are used for agreement figures and refits only."""


def review_rows(sample: Sequence[Mapping[str, Any]], strategy: str | None = None) -> list[dict[str, Any]]:
    """The sample as review-file rows (:data:`REVIEW_COLUMNS`), label columns empty;
    ``sample_strategy`` is ``strategy`` (``all`` when the sample is every candidate)."""
    rows = []
    for row in sample:
        out = {name: row.get(name) for name in REVIEW_COLUMNS}
        out["sample_strategy"] = strategy
        out["log_date"] = str(row.get("log_date")) if row.get("log_date") is not None else None
        out["evidence"] = evidence_summary(row)
        out["label"] = out["error_category"] = out["note"] = ""
        rows.append(out)
    return rows


def write_review_file(rows: Sequence[Mapping[str, Any]], path: Path, file_format: str) -> None:
    """Write review rows as CSV (RFC 4180, UTF-8, header first), JSONL (one object per line) or a
    Label Studio task list (JSON; each task's ``data`` holds the row, see :data:`LABEL_STUDIO_CONFIG`).

    Raises:
        ValueError: an unknown format.
        OSError: the file cannot be written.
    """
    if file_format == "csv":
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=list(REVIEW_COLUMNS), lineterminator="\n")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: spreadsheet_text(row.get(k)) for k in REVIEW_COLUMNS})
        text = buffer.getvalue()
    elif file_format == "jsonl":
        text = "".join(json.dumps({k: row.get(k) for k in REVIEW_COLUMNS}, ensure_ascii=False) + "\n" for row in rows)
    elif file_format == "label-studio":
        tasks = [
            {"data": {k: ("" if row.get(k) is None else row.get(k)) for k in REVIEW_COLUMNS if k not in _LABEL_KEYS}}
            for row in rows
        ]
        text = json.dumps(tasks, ensure_ascii=False, indent=1) + "\n"
    else:
        raise ValueError(f"unknown review file format {file_format!r}: use one of {', '.join(FORMATS)}")
    path.write_text(text, encoding="utf-8")


_LABEL_KEYS = ("label", "error_category", "note")


def _unguarded_text(value: object) -> object:
    """A CSV cell as :func:`stef.display.spreadsheet_text` received it: one ``'`` less when the cell
    is one or more ``'`` followed by a formula start (the exact inverse of the guard); any other
    value as is.

    >>> print(_unguarded_text("'=cmd|' /C calc'!A0-0"), _unguarded_text("''=x"), _unguarded_text("'x"))
    =cmd|' /C calc'!A0-0 '=x 'x
    >>> all(_unguarded_text(spreadsheet_text(t)) == t for t in ("=1", "'=1", "''+1", "'", "'a", "a", "\\t1", "'\\r", " =1", "' \\uff1d1"))
    True
    """
    if isinstance(value, str) and value.startswith("'") and looks_like_formula(value):
        return value[1:]
    return value


LABEL_STUDIO_CONFIG = (
    """<View>
  <Header value="$question"/>
  <Text name="enriched" value="$enriched_question"/>
  <Text name="sql" value="$sql"/>
  <Text name="evidence" value="$evidence"/>
  <Choices name="label" toName="sql" choice="single" required="true">
    <Choice value="correct"/>
    <Choice value="incorrect"/>
  </Choices>
  <Choices name="error_category" toName="sql" choice="single">
"""
    + "".join(f'    <Choice value="{c}"/>\n' for c in ERROR_CATEGORIES)
    + """  </Choices>
  <TextArea name="note" toName="sql" maxSubmissions="1"/>
</View>
"""
)
"""Label Studio labeling config for the task file (paste it into the project's settings)."""


# --------------------------------------------------------------------------- reading labels


@dataclass(frozen=True)
class LabelRow:
    """One labelled answer read from a file.

    Attributes:
        line: its line number (CSV: counting the header as line 1; JSON: the task's position, from 1).
        run_id: the answer's run id.
        label: ``correct`` or ``incorrect``.
        error_category: an NL2SQL-BUGs category, or ``None``.
        note: free text, or ``None``.
        evaluator_version: the evaluation the reviewer was shown (``None``: not in the file).
        reviewer: who labelled it (Label Studio exports; ``None`` otherwise).
        reviewed_at: when (a naive UTC time; ``None``: not in the file).
        sample_strategy: how ``stef review sample`` drew the answer (``None``: not in the file).
    """

    line: int
    run_id: str
    label: str
    error_category: str | None
    note: str | None
    evaluator_version: str | None = None
    reviewer: str | None = None
    reviewed_at: datetime | None = None
    sample_strategy: str | None = None


@dataclass(frozen=True)
class LabelFile:
    """A read label file: its labelled rows, how many rows had no label yet, and its bad rows
    (``(line, problem)``, only with ``read_label_file(..., keep_problems=True)``)."""

    rows: tuple[LabelRow, ...]
    unlabelled: int
    problems: tuple[tuple[int, str], ...] = ()


LABEL_FILE_MAX_BYTES = 256 * 1024 * 1024
"""Largest label file read (256 MiB); a FIFO, a directory or a device is refused at once."""


def read_label_file(path: Path, keep_problems: bool = False) -> LabelFile:
    """Read a filled review file (CSV, JSONL, or a Label Studio JSON export), checking every row.

    Rows with an empty ``label`` are not reviewed yet and are counted, not read. A row is bad
    when its run id is empty, its label is not one of ``correct`` / ``incorrect`` (also accepted:
    right/wrong, true/false, yes/no, 1/0), its error category is not an NL2SQL-BUGs category, its
    ``reviewed_at`` is not an ISO-8601 time, its ``sample_strategy`` is unknown, or its run id
    appears twice for one reviewer; a Label Studio task is bad when its parts are not of the types
    Label Studio writes (:func:`_task_rows`). A CSV may use ``,``, ``;`` or tabs between fields; a
    field may be as long as the file (:data:`CSV_FIELD_LIMIT`), and a cell's leading ``'`` that
    :func:`write_review_file` added against spreadsheet formulas is taken off.

    Args:
        path: the file.
        keep_problems: return the bad rows in :attr:`LabelFile.problems` instead of raising, so a
            caller that checks the good rows further (against the warehouse) names every bad row at once.

    Raises:
        LabelFileError: the file cannot be read, a CSV has no ``run_id`` and ``label`` header, a
            Label Studio export is not a JSON list, or (without ``keep_problems``) any row is bad:
            every bad line is named (:func:`bad_rows_error`), a CSV line that is not readable CSV
            and a JSONL line that is not a JSON object among them.
    """
    from stef.config_files import json_lines, read_config_text

    try:
        text = read_config_text(path, LABEL_FILE_MAX_BYTES).removeprefix("\ufeff")  # Excel's byte-order mark
    except OSError as exc:
        raise LabelFileError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    except UnicodeDecodeError as exc:
        raise LabelFileError(_not_utf8_message(path, exc)) from exc
    stripped = text.lstrip()
    problems: list[tuple[int, str]] = []
    if path.suffix.lower() == ".json" or stripped.startswith("["):
        records, problems = _label_studio_records(path, text)
    elif path.suffix.lower() == ".jsonl" or stripped.startswith("{"):
        records = []
        for number, line in json_lines(text):
            if line.strip():
                try:
                    value = json.loads(line)
                except json.JSONDecodeError as exc:
                    problems.append((number, f"not JSON ({exc.msg})"))
                    continue
                if not isinstance(value, dict):
                    problems.append((number, f"not a JSON object but {json_kind(value)}"))
                    continue
                records.append((number, value))
    else:
        records, problems = _csv_records(path, text)
    return _checked(path, records, keep_problems, problems)


def _not_utf8_message(path: Path, exc: UnicodeDecodeError) -> str:
    """The error of a label file that is not UTF-8: the line and byte, and how to save it instead.

    A spreadsheet's plain "CSV" (Windows-1252 in Excel) and PowerShell's UTF-16 are the usual cases;
    a workbook itself (``review.xlsx``, a zip archive) is named as one, with how to save it as CSV.

    >>> bad = b"run_id,label,note\\nr1,correct,tr\\xe8s bien\\n"
    >>> _not_utf8_message(Path("labels.csv"), UnicodeDecodeError("utf-8", bad, 31, 32, "invalid"))
    'labels.csv:2: not UTF-8 text (byte 0xe8); save the file as UTF-8 (Excel: "CSV UTF-8")'
    """
    from stef.config_files import not_text_message

    data = exc.object if isinstance(exc.object, bytes) else bytes(exc.object)
    binary = not_text_message(data[:16], "a CSV, JSONL or JSON label file")
    if binary is not None:
        return f"{path}: {binary}"
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return f'{path}: UTF-16 text, not UTF-8; save the file as UTF-8 (Excel: "CSV UTF-8")'
    line = data.count(b"\n", 0, exc.start) + 1
    return f'{path}:{line}: not UTF-8 text (byte 0x{data[exc.start]:02x}); save the file as UTF-8 (Excel: "CSV UTF-8")'


CSV_FIELD_LIMIT = LABEL_FILE_MAX_BYTES
"""Longest CSV field read: a field is never longer than its file, and a label file holds at most
:data:`LABEL_FILE_MAX_BYTES` bytes (Python's default, 131,072 characters, is shorter than the SQL
STEF stores, up to :data:`stef.pipeline.clean.MAX_SQL_CHARS`, and than a question)."""

_CSV_LIMIT_LOCK = threading.Lock()


@contextmanager
def _csv_field_limit(limit: int) -> Iterator[None]:
    """``csv.field_size_limit`` is ``limit`` inside the block and what it was before after it.

    The limit is a process-wide setting of the ``csv`` module: the lock keeps two readers of this
    module from restoring each other's value; another reader in the process meanwhile only
    accepts longer fields than it would have.
    """
    with _CSV_LIMIT_LOCK:
        previous = csv.field_size_limit(limit)
        try:
            yield
        finally:
            csv.field_size_limit(previous)


def _csv_records(path: Path, text: str) -> tuple[list[tuple[int, dict[str, Any]]], list[tuple[int, str]]]:
    """(line the row starts on, row) of a CSV label file, its cells without the spreadsheet guard
    of :func:`write_review_file` (:func:`_unguarded_text`); and (line, problem) of each row that is
    not readable CSV (a quote never closed, text after a closing quote as in ``"wrong" join``, a
    cell above :data:`CSV_FIELD_LIMIT`), which gives no row: the reader goes on at the next line.

    Raises:
        LabelFileError: the header has no ``run_id`` or ``label`` column, or is not readable CSV.
    """
    header = text.split("\n", 1)[0]
    delimiter = max((",", ";", "\t"), key=header.count)  # Excel writes ';' in many locales
    records: list[tuple[int, dict[str, Any]]] = []
    problems: list[tuple[int, str]] = []
    with _csv_field_limit(CSV_FIELD_LIMIT):
        # strict: a quote never closed is an error, not every later line read into that one cell
        reader = csv.DictReader(io.StringIO(text), delimiter=delimiter, strict=True)
        try:
            names = [str(name).strip() for name in reader.fieldnames or []]
        except csv.Error as exc:
            raise LabelFileError(f"{path}:1: not readable CSV ({exc})") from exc
        if "run_id" not in names or "label" not in names:
            raise LabelFileError(
                f"{path}: a CSV label file needs the columns run_id and label in its header line "
                f"(found: {', '.join(names[:12]) or 'none'})"
            )
        reader.fieldnames = names
        start = 2
        while True:
            try:
                row = next(reader)
            except StopIteration:
                break
            except csv.Error as exc:  # the csv reader drops the rest of the line and reads on at the next
                hint = ""
                if "unexpected end of data" in str(exc):
                    hint = (
                        ': a cell of this line opens a quote (") that is never closed; close it, or write a '
                        'quote inside a quoted cell as ""'
                    )
                problems.append((start, f"not readable CSV ({exc}){hint}"))
            else:
                records.append((start, {k: _unguarded_text(v) for k, v in row.items() if k is not None}))
            start = reader.reader.line_num + 1  # the DictReader's own line_num stays behind on an error
    return records, problems


def _label_studio_records(path: Path, text: str) -> tuple[list[tuple[int, dict[str, Any]]], list[tuple[int, str]]]:
    """(task position, flat row) of a Label Studio export: the task's data plus its newest
    annotation's choices (``label``, ``error_category``), text (``note``), annotator and time;
    and (task position, problem) of each task whose parts are not of the types Label Studio
    writes (:func:`_task_rows`), which gives no row.

    Raises:
        LabelFileError: the text is not JSON, or not a list.
    """
    try:
        tasks = json.loads(text)
    except json.JSONDecodeError as exc:
        raise LabelFileError(f"{path}: not JSON ({exc.msg} at line {exc.lineno})") from exc
    if not isinstance(tasks, list):
        raise LabelFileError(f"{path}: a Label Studio export is a JSON list of tasks, not {json_kind(tasks)}")
    records: list[tuple[int, dict[str, Any]]] = []
    problems: list[tuple[int, str]] = []
    for number, task in enumerate(tasks, start=1):
        try:
            records.extend((number, row) for row in _task_rows(task, number))
        except _BadTaskError as exc:
            problems.append((number, str(exc)))
    return records, problems


class _BadTaskError(Exception):
    """A Label Studio task whose parts are not of the types Label Studio writes (the message says
    which part, and names the task by its id or position)."""


def _task_rows(task: object, number: int = 1) -> list[dict[str, Any]]:
    """The rows of one Label Studio task: one per annotator (their newest annotation that was not
    cancelled), or one unlabelled row when it has none. ``number`` is its position in the export
    (from 1), which names it in an error when it has no ``id``.

    Raises:
        _BadTaskError: the task is not an object; its ``data`` is not an object; its ``annotations``
            not a list of objects; an annotation's ``result`` not a list of objects; the ``value`` of
            a ``label``, ``error_category`` or ``note`` result not an object; its ``choices`` not a
            list of one text; its ``text`` not a list of texts.

    >>> _task_rows({"id": 7, "data": {"run_id": "r1"}, "annotations": [{"result": [
    ...     {"from_name": "label", "value": {"choices": ["correct"]}}]}]})
    [{'run_id': 'r1', 'label': 'correct', 'reviewer': None, 'reviewed_at': None}]
    >>> _task_rows({"id": 7, "data": {}, "annotations": [{"result": [
    ...     {"from_name": "label", "value": {"choices": "correct"}}]}]})
    Traceback (most recent call last):
    ...
    stef.monitor.review._BadTaskError: task id 7: annotations[0].result[0].value.choices (label) is a string, not a list of one text
    """
    if not isinstance(task, dict):
        raise _BadTaskError(f"task {number} is {json_kind(task)}, not an object")
    name = _task_name(task, number)
    data = {} if task.get("data") is None else task["data"]
    if not isinstance(data, dict):
        raise _BadTaskError(f"{name}: data is {json_kind(data)}, not an object")
    annotations = [] if task.get("annotations") is None else task["annotations"]
    if not isinstance(annotations, list):
        raise _BadTaskError(f"{name}: annotations is {json_kind(annotations)}, not a list")
    kept: list[tuple[int, dict[str, Any]]] = []
    for index, annotation in enumerate(annotations):
        if not isinstance(annotation, dict):
            raise _BadTaskError(f"{name}: annotations[{index}] is {json_kind(annotation)}, not an object")
        if not annotation.get("was_cancelled"):
            kept.append((index, annotation))
    newest_by_author: dict[str, tuple[int, dict[str, Any]]] = {}
    for index, annotation in sorted(
        kept, key=lambda item: str(item[1].get("updated_at") or item[1].get("created_at") or "")
    ):
        newest_by_author[str(_annotator(annotation))] = (index, annotation)
    if not newest_by_author:
        return [{**data, "label": ""}]
    rows: list[dict[str, Any]] = []
    for index, newest in newest_by_author.values():
        row: dict[str, Any] = dict(data)
        results = [] if newest.get("result") is None else newest["result"]
        if not isinstance(results, list):
            raise _BadTaskError(f"{name}: annotations[{index}].result is {json_kind(results)}, not a list")
        for position, result in enumerate(results):
            where = f"annotations[{index}].result[{position}]"
            if not isinstance(result, dict):
                raise _BadTaskError(f"{name}: {where} is {json_kind(result)}, not an object")
            field = result.get("from_name")
            if field not in ("label", "error_category", "note"):
                continue  # a control of another labelling config
            value = result.get("value")
            if not isinstance(value, dict):
                raise _BadTaskError(f"{name}: {where}.value ({field}) is {json_kind(value)}, not an object")
            key = "text" if field == "note" else "choices"
            given = value.get(key)
            if given is None or given == []:
                continue
            if not isinstance(given, list) or not all(isinstance(item, str) for item in given):
                wanted = "a list of texts" if key == "text" else "a list of one text"
                raise _BadTaskError(f"{name}: {where}.value.{key} ({field}) is {json_kind(given)}, not {wanted}")
            if key == "text":
                row["note"] = " ".join(given)
            elif len(given) > 1:
                raise _BadTaskError(
                    f"{name}: {where}.value.choices ({field}) holds {len(given)} choices "
                    f"({', '.join(repr(item) for item in given)}), not one"
                )
            else:
                row[str(field)] = given[0]
        author = _annotator(newest)
        row["reviewer"] = None if author is None else str(author)
        row["reviewed_at"] = newest.get("updated_at") or newest.get("created_at")
        rows.append(row)
    return rows


def _task_name(task: Mapping[str, Any], number: int) -> str:
    """``task id 7`` (Label Studio's id of the task), or ``task 3`` (its position) when it has none."""
    identifier = task.get("id")
    if isinstance(identifier, bool) or not isinstance(identifier, int | str):
        return f"task {number}"
    return f"task id {identifier!r}" if isinstance(identifier, str) else f"task id {identifier}"


def _annotator(annotation: Mapping[str, Any]) -> object:
    author = annotation.get("completed_by")
    if isinstance(author, dict):
        author = author.get("email") or author.get("username") or author.get("id")
    return author


def _checked(
    path: Path,
    records: Sequence[tuple[int, Mapping[str, Any]]],
    keep_problems: bool = False,
    bad: Sequence[tuple[int, str]] = (),
) -> LabelFile:
    """The label file of ``records``, its problems those of its rows after ``bad`` (rows already
    found bad by the reader)."""
    problems: list[tuple[int, str]] = list(bad)
    rows: list[LabelRow] = []
    unlabelled = 0
    seen: dict[tuple[str, str | None], int] = {}
    for number, record in records:
        run_id = _text(record.get("run_id"))
        raw_label = _text(record.get("label"))
        if raw_label is None:
            unlabelled += 1
            continue
        if run_id is None:
            problems.append((number, "no run_id"))
            continue
        label = _LABEL_WORDS.get(raw_label.casefold())
        if label is None:
            problems.append(
                (
                    number,
                    f"label {raw_label!r} is not 'correct' or 'incorrect' "
                    f"(also read: right/wrong, true/false, yes/no, 1/0; run_id {run_id!r})",
                )
            )
            continue
        category = _text(record.get("error_category"))
        if category is not None:
            matched = next((c for c in ERROR_CATEGORIES if c.casefold() == category.casefold()), None)
            if matched is None:
                problems.append(
                    (
                        number,
                        f"error_category {category!r} is not an NL2SQL-BUGs category ({', '.join(ERROR_CATEGORIES)})",
                    )
                )
                continue
            category = matched
        reviewed_at = None
        raw_time = _text(record.get("reviewed_at"))
        if raw_time is not None:
            try:
                parsed = datetime.fromisoformat(raw_time.replace("Z", "+00:00"))
            except ValueError:
                problems.append((number, f"reviewed_at {raw_time!r} is not an ISO-8601 time"))
                continue
            if parsed.tzinfo is not None:
                from datetime import UTC

                try:
                    parsed = parsed.astimezone(UTC).replace(tzinfo=None)
                except OverflowError:  # 9999-12-31T23:59-01:00 is in year 10000 in UTC
                    problems.append((number, f"reviewed_at {raw_time!r} is out of range in UTC"))
                    continue
            reviewed_at = parsed
        reviewer = _text(record.get("reviewer"))
        strategy = _text(record.get("sample_strategy"))
        if strategy is not None and strategy not in (*STRATEGIES, "all"):
            problems.append((number, f"sample_strategy {strategy!r} is not one of {', '.join((*STRATEGIES, 'all'))}"))
            continue
        if (run_id, reviewer) in seen:
            who = f" by {reviewer!r}" if reviewer else ""
            problems.append(
                (number, f"run_id {run_id!r} is labelled twice{who} (first at line {seen[run_id, reviewer]})")
            )
            continue
        seen[run_id, reviewer] = number
        rows.append(
            LabelRow(
                line=number,
                run_id=run_id,
                label=label,
                error_category=category,
                note=_text(record.get("note")),
                evaluator_version=_text(record.get("evaluator_version")),
                reviewer=reviewer,
                reviewed_at=reviewed_at,
                sample_strategy=strategy,
            )
        )
    if problems and not keep_problems:
        raise bad_rows_error(path, problems)
    return LabelFile(rows=tuple(rows), unlabelled=unlabelled, problems=tuple(problems))


def bad_rows_error(path: Path, problems: Sequence[tuple[int, str]]) -> LabelFileError:
    """The error naming a label file's bad rows, in line order (the first 20, then how many more)."""
    ordered = [f"line {number}: {problem}" for number, problem in sorted(problems, key=lambda item: item[0])]
    shown = "; ".join(ordered[:20]) + (f"; … and {len(ordered) - 20} more" if len(ordered) > 20 else "")
    return LabelFileError(f"{path}: {len(ordered)} bad row(s), nothing imported: {shown}")


def _text(value: object) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    return text or None


# --------------------------------------------------------------------------- agreement


@dataclass(frozen=True)
class Reviewed:
    """One labelled answer with STEF's figures for it.

    Attributes:
        correct: the reviewer's label (``True``: correct).
        score: Φ (``None``: STEF gave no score; counts as called incorrect, P(correct) 0).
        p_correct: STEF's P(correct) (``None`` for a scored answer: stored before the warehouse kept
            it, migration 0005; such an answer counts for the call, not for AUROC and ECE).
        category: the reviewer's error category, if any.
    """

    correct: bool
    score: float | None
    p_correct: float | None
    category: str | None = None

    @property
    def called_correct(self) -> bool:
        """STEF's call: Φ ≥ 75."""
        return self.score is not None and self.score >= CORRECT_FROM_SCORE


def agreement(reviewed: Sequence[Reviewed], seed: int = 0, resamples: int = BOOTSTRAP_RESAMPLES) -> dict[str, Any]:
    """STEF's agreement with reviewer labels, with bootstrap 95 % intervals (percentile method,
    ``resamples`` resamples of the answers, seeded; an interval always holds its figure, see
    :func:`_holding`).

    Returns:
        A JSON-ready dict: ``n``, ``base_rate_incorrect``, ``accuracy``, ``kappa`` (Cohen's κ of
        STEF's call and the label), ``auroc`` (of P(correct), correct as the positive class),
        ``ece`` (10 equal-width bins), ``precision_correct``, ``recall_correct``,
        ``precision_incorrect``, ``recall_incorrect``, ``recall_by_category`` (share of the wrong
        answers of each labelled category that STEF called incorrect, with ``n``), and ``ci``: per
        figure its [low, high] (``None`` where undefined). A figure is ``None`` when undefined
        (e.g. AUROC with one class only). AUROC and ECE are of the answers with a P(correct) (an
        unscored answer's is 0; a scored answer stored without one is left out of them).
        ``auroc_undefined`` says why the AUROC is undefined (``every label is correct``), else ``None``;
        ``kappa_undefined`` likewise for κ, which is undefined when every label is of one class (κ
        would be 0 whatever STEF calls: its chance agreement equals its accuracy).

    >>> rows = [Reviewed(True, 80.0, 0.8), Reviewed(True, 40.0, 0.4), Reviewed(False, 30.0, 0.2), Reviewed(False, 90.0, 0.9)]
    >>> figures = agreement(rows, resamples=50)
    >>> figures["n"], figures["accuracy"], figures["kappa"], figures["base_rate_incorrect"]
    (4, 0.5, 0.0, 0.5)
    >>> one_class = agreement([Reviewed(True, 80.0, 0.8), Reviewed(True, 40.0, 0.4)], resamples=50)
    >>> one_class["accuracy"], one_class["kappa"], one_class["kappa_undefined"], "kappa" in one_class["ci"]
    (0.5, None, 'every label is correct', False)
    """
    figures = _figures(reviewed)
    rng = random.Random(seed)
    samples: dict[str, list[float]] = {}
    if len(reviewed) >= 2:
        for _ in range(resamples):
            resample = [reviewed[rng.randrange(len(reviewed))] for _ in reviewed]
            for key, value in _figures(resample).items():
                if isinstance(value, float) and math.isfinite(value):
                    samples.setdefault(key, []).append(value)
    ci: dict[str, list[float] | None] = {}
    for key, value in figures.items():
        if key == "n" or not isinstance(value, float):
            continue
        values = sorted(samples.get(key, []))
        ci[key] = _holding(value, _quantile(values, 0.025), _quantile(values, 0.975)) if values else None
    categories: dict[str, list[bool]] = {}
    for row in reviewed:
        if not row.correct and row.category:
            categories.setdefault(row.category, []).append(not row.called_correct)
    figures_out: dict[str, Any] = {k: (_rounded(v) if isinstance(v, float) else v) for k, v in figures.items()}
    figures_out["recall_by_category"] = {
        name: {"n": len(calls), "recall": round(sum(calls) / len(calls), 4)}
        for name, calls in sorted(categories.items())
    }
    figures_out["ci"] = ci
    figures_out["auroc_undefined"] = _auroc_undefined(reviewed) if reviewed and figures["auroc"] is None else None
    figures_out["kappa_undefined"] = (
        f"every label is {'correct' if reviewed[0].correct else 'incorrect'}"
        if reviewed and figures["kappa"] is None
        else None
    )
    return figures_out


def _auroc_undefined(reviewed: Sequence[Reviewed]) -> str:
    """Why the AUROC of ``reviewed`` (not empty) is undefined: it ranks correct answers against wrong ones.

    >>> _auroc_undefined([Reviewed(True, 80.0, 0.9)] * 3), _auroc_undefined([Reviewed(False, 80.0, None)] * 2)
    ('every label is correct', 'no reviewed answer has a P(correct)')
    """
    with_p = [r for r in reviewed if r.score is None or r.p_correct is not None]
    if not with_p:
        return "no reviewed answer has a P(correct)"
    return f"every label is {'correct' if with_p[0].correct else 'incorrect'}"


def _figures(reviewed: Sequence[Reviewed]) -> dict[str, Any]:
    n = len(reviewed)
    if n == 0:
        return {"n": 0, **dict.fromkeys(_FIGURE_KEYS)}
    tp = sum(1 for r in reviewed if r.correct and r.called_correct)
    tn = sum(1 for r in reviewed if not r.correct and not r.called_correct)
    fp = sum(1 for r in reviewed if not r.correct and r.called_correct)
    fn = sum(1 for r in reviewed if r.correct and not r.called_correct)
    accuracy = (tp + tn) / n
    called = (tp + fp) / n
    actual = (tp + fn) / n
    chance = called * actual + (1 - called) * (1 - actual)
    # labels of one class: κ is 0 whatever STEF calls (its chance agreement equals its accuracy)
    kappa = None if actual in (0.0, 1.0) or chance >= 1.0 else (accuracy - chance) / (1.0 - chance)
    # an unscored answer has P(correct) 0; a scored one stored without its p has none to rank
    with_p = [r for r in reviewed if r.score is None or r.p_correct is not None]
    ps = [0.0 if r.score is None or r.p_correct is None else float(r.p_correct) for r in with_p]
    labels = [r.correct for r in with_p]
    area = auroc(ps, labels) if with_p else math.nan
    return {
        "n": n,
        "base_rate_incorrect": (tn + fp) / n,
        "accuracy": accuracy,
        "kappa": kappa,
        "auroc": None if math.isnan(area) else area,
        "ece": expected_calibration_error(ps, labels) if with_p else None,
        "precision_correct": _ratio(tp, tp + fp),
        "recall_correct": _ratio(tp, tp + fn),
        "precision_incorrect": _ratio(tn, tn + fn),
        "recall_incorrect": _ratio(tn, tn + fp),
    }


_FIGURE_KEYS = (
    "base_rate_incorrect",
    "accuracy",
    "kappa",
    "auroc",
    "ece",
    "precision_correct",
    "recall_correct",
    "precision_incorrect",
    "recall_incorrect",
)


def _holding(estimate: float, low: float, high: float) -> list[float]:
    """The interval ``[low, high]`` widened to hold ``estimate``, rounded (:func:`_rounded`).

    A percentile interval misses its own estimate when the figure is biased under resampling: a
    bootstrap resample repeats answers, which spreads the bins of the ECE, so the resampled ECE
    of a perfectly calibrated sample (ECE 0) is never 0, and its interval was [0.02, 0.25].

    >>> _holding(0.0, 0.0213, 0.25), _holding(0.5, 0.4, 0.6), _holding(0.9, 0.1, 0.85)
    ([0.0, 0.25], [0.4, 0.6], [0.1, 0.9])
    """
    return [_rounded(min(low, estimate)), _rounded(max(high, estimate))]


def _rounded(value: float) -> float:
    """``value`` to 4 decimals, a negative zero as 0.0 (κ of three answers called incorrect, two of
    them labelled correct, computes to −8e-17, which rounds to −0.0).

    >>> _rounded(-8.3e-17), _rounded(0.123456)
    (0.0, 0.1235)
    """
    return round(value, 4) + 0.0  # -0.0 + 0.0 is 0.0


def _ratio(numerator: int, denominator: int) -> float | None:
    return None if denominator == 0 else numerator / denominator


def _quantile(values: Sequence[float], q: float) -> float:
    """Linear-interpolation quantile of sorted ``values`` (numpy's default method)."""
    position = q * (len(values) - 1)
    low = math.floor(position)
    high = min(low + 1, len(values) - 1)
    return values[low] + (values[high] - values[low]) * (position - low)
