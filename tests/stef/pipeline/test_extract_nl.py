"""Tests of the question features (stef.pipeline.extract_nl, stage C): the lexicon, hint
definitions and bindings, and the fast paths that must match their plain regular expressions.
"""

from __future__ import annotations

import pytest

from stef.pipeline.extract_nl import extract_question_spec
from stef.pipeline.hints import hint_definitions
from stef.pipeline.rules import default_rules, parse_rules
from tests.stef.pipeline.stages import STAGES, Case, check_rejection, stage_cases


def test_hint_definitions_are_parsed_with_sqlglot() -> None:
    definitions = hint_definitions(
        "male refers to gender = 'M'; high cholesterol refers to `T-CHO` >= 250; ratio = DIVIDE(SUM(salary), COUNT(id)); "
        "element = 'cl' means Chlorine, element = 'c' means Carbon",
        "sqlite",
    )
    assert [d.phrase for d in definitions] == ["male", "high cholesterol", "ratio", "Chlorine", "Carbon"]
    assert definitions[1].expression.sql("sqlite") == 'SELECT "T-CHO" >= 250'


def test_enriched_spec_splits_requested_and_optional() -> None:
    question = "How many carcinogenic molecules contain Chlorine?"
    enriched = question + " label = '+' means carcinogenic; element = 'cl' means Chlorine; element = 'c' means Carbon"
    spec = extract_question_spec(enriched, "sqlite", reference=question)
    assert ("label", "=", "+") in spec.value_bindings
    assert ("element", "=", "cl") in spec.value_bindings
    assert ("element", "=", "c") in spec.optional_bindings
    assert spec.count_asked


@pytest.mark.parametrize(
    ("text", "field", "expected"),
    [
        pytest.param("Show the top 5 products by revenue", "top_k", 5, id="top_k_digit"),
        pytest.param("Name the three oldest players", "top_k", 3, id="top_k_stated_with_a_superlative"),
        pytest.param("Name the oldest players of the three teams", "top_k", None, id="no_top_k_without_a_ranked_count"),
        pytest.param("List the different cities", "distinct", True, id="distinct"),
        pytest.param("What is the lowest price?", "ordering", "ASC", id="ascending"),
        pytest.param("Which users have at least 10 posts?", "comparison_ops", (">=",), id="at_least"),
        pytest.param("What percentage of orders shipped?", "percentage", True, id="percentage"),
        pytest.param("Average salary for each department", "grouping", True, id="grouping"),
    ],
)
def test_question_lexicon(text: str, field: str, expected: object) -> None:
    assert getattr(extract_question_spec(text), field) == expected


@pytest.mark.parametrize(
    "text",
    [
        "the TOP 5",
        "Top\u00a05 rows",
        "%top 4",
        "best-selling",
        "worst ten",
        "top_5",
        "topics 3",
        "first\ttwo",
        "TOP 10 in Zürich",
        "fırst 3 rows",
        "firſt two",
        "\u212aelvin top 2",
        "last one",
        "LOWEST   twenty",
        "",
    ],
)
def test_top_k_fast_path_matches_the_case_insensitive_pattern(text: str) -> None:
    """The ASCII fast path finds exactly what the IGNORECASE pattern finds (also on the four
    non-ASCII letters IGNORECASE folds to ASCII)."""
    from stef.pipeline.question_phrases import _TOP_K, _top_k_token

    match = _TOP_K.search(text)
    assert _top_k_token(text) == (match.group(1).lower() if match else None)


_ASSERTION_FIRST_TEXTS = [
    "How many 'Golden State Warriors' players were born after 1990?",
    "O'Brien's 'x' and 'a''b'",
    "“Quoted” text; it's 'here'",
    "x='y'",
    "aBc Def",
    "_Abc Bank of America",
    "éAbc",
    "1999",
    "a1999 1999b _2001 2001_ x.2005 (1850)",
    "In 1890 and 2099.",
    "end. Next",
    "a) b",
    "no!  yes",
    "'.' x",
    "ab;cd\nef",
    "Mr. Smith? yes! ok.",
    "x\u2003.\u2003y",
    "`t`.  Then",
    "",
]


@pytest.mark.parametrize("text", _ASSERTION_FIRST_TEXTS)
def test_patterns_checked_after_their_first_character_match_the_plain_patterns(text: str) -> None:
    """The quoted-value, year, capitalised-name and clause-break patterns check their leading
    boundary after the first character (so the regex engine can skip ahead); they find exactly
    what the plain patterns find."""
    import re

    from stef.pipeline import hints, question_phrases

    plain = {
        question_phrases._QUOTED: re.compile(r"(?<![\w'])'([^']{1,200}?)'(?![\w'])|\"([^\"]{1,200})\"|“([^”]{1,200})”"),
        question_phrases._YEAR: re.compile(r"\b(1[89]\d\d|20\d\d)\b"),
        question_phrases._CAPITALISED: re.compile(
            r"\b([A-Z][\w'.-]*(?:\s+(?:(?:of|de|la|the|and)\s+)?[A-Z][\w'.-]*)*)"
        ),
    }
    for pattern, reference in plain.items():
        assert pattern.findall(text) == reference.findall(text)
        assert pattern.sub(" ", text) == reference.sub(" ", text)
    assert hints._CLAUSE_BREAK.split(text) == re.split(r";|(?<=[A-Za-z0-9)'\"`])[.?!]\s+|\n", text)


@pytest.mark.parametrize(
    "text", ["over the overall total; moreover over", "more than 5, no more than 6", "aaaa", "a a", "", "how many?"]
)
@pytest.mark.parametrize("phrase", ["over", "more than", "no more than", "a", "aa", "how many", " per ", ""])
def test_phrase_search_matches_the_bounded_pattern(text: str, phrase: str) -> None:
    import re

    from stef.pipeline.question_phrases import _has_phrase, _phrase_ends

    reference = [m.end() for m in re.finditer(rf"(?<![a-z]){re.escape(phrase.strip())}(?![a-z])", text)]
    assert list(_phrase_ends(text, phrase)) == reference
    assert _has_phrase(text, phrase) == bool(reference)


def test_hint_bindings_take_the_compared_literal_not_the_format_string() -> None:
    spec = extract_question_spec(
        "from August to October 2008 refers to strftime('%Y-%m', date) BETWEEN '2008-08' AND '2008-10'; big refers to 5 < size",
        "sqlite",
    )
    assert spec.value_bindings == (("date", "BETWEEN", "2008-08"), ("date", "BETWEEN", "2008-10"), ("size", ">", "5"))


def test_hint_null_conditions_read_through_parentheses_and_skip_disjunctions() -> None:
    assert extract_question_spec("has a record refers to NOT (time IS NULL)").null_conditions == (
        ("time", "IS NOT NULL"),
    )
    assert extract_question_spec("missing refers to weight IS NULL OR weight = 0").null_conditions == ()


def test_a_hint_naming_a_column_and_its_table_keeps_the_column() -> None:
    """BIRD-style evidence "X FROM table" names a column; it is read whatever sqlglot calls the FROM arg."""
    spec = extract_question_spec(
        "Identify the latest badge of Emmett. the latest badge refers to Name FROM badges where MAX(Date);",
        "sqlite",
        reference="Identify the latest badge of Emmett.",
    )
    assert spec.column_mentions == ("name", "date")


def test_hint_features_are_remembered_per_rule_set() -> None:
    """A clause's features are remembered per rule set: the same clause under another column
    mapping gives that mapping's column, and a repeat gives the remembered result."""
    from stef.pipeline.hints import analysed_definitions

    clause = "male refers to gender = 'M'"
    base = default_rules()
    mapped = parse_rules({"column_mappings": {"gender": "sex"}}, "mapped.json")
    assert [f.bindings for _, f in analysed_definitions(clause, "sqlite", base)] == [(("gender", "=", "m"),)]
    assert [f.bindings for _, f in analysed_definitions(clause, "sqlite", mapped)] == [(("sex", "=", "m"),)]
    assert [f.bindings for _, f in analysed_definitions(clause, "sqlite", None)] == [(("gender", "=", "m"),)]
    first, again = analysed_definitions(clause, "sqlite", base), analysed_definitions(clause, "sqlite", base)
    assert first[0][1] is again[0][1]
    spec = extract_question_spec(f"How many patients? {clause}", "sqlite", mapped, reference="How many male patients?")
    assert spec.value_bindings == (("sex", "=", "m"),)
    mapped.column_mappings["gender"] = "sex_code"  # a rule set changed in place is a new one
    assert [f.bindings for _, f in analysed_definitions(clause, "sqlite", mapped)] == [(("sex_code", "=", "m"),)]


def test_question_specs_are_remembered_per_text_and_rule_set() -> None:
    """A repeated question gives the remembered spec; another rule set, dialect or reference, or
    a rule set changed in place, reads the text again and gives that input's spec."""
    question = "How many patients live in 'North Bohemia'?"
    base = parse_rules({}, "base.json")
    aliased = parse_rules({"value_normalization": {"value_aliases": {"north bohemia": "NB"}}}, "aliased.json")
    first = extract_question_spec(question, "sqlite", base)
    assert extract_question_spec(question, "sqlite", base) is first
    assert first.filter_values == ("north bohemia",)
    # the alias is normalised as values are (lower case): it then matches the SQL's 'NB', read as nb
    assert extract_question_spec(question, "sqlite", aliased).filter_values == ("nb",)
    assert extract_question_spec(question, "sqlite", base, reference="How many patients?").filter_values == ()
    base.value_normalization["lowercase"] = False  # changed in place: a new rule set
    assert extract_question_spec(question, "sqlite", base).filter_values == ("North Bohemia",)
    long_question = question + " Answer in full." * 200  # past the memo's length cap: read each time
    assert extract_question_spec(long_question, "sqlite", base) is not extract_question_spec(
        long_question, "sqlite", base
    )
    assert extract_question_spec(long_question, "sqlite", base) == extract_question_spec(long_question, "sqlite", base)


@pytest.mark.parametrize("case", stage_cases("question_spec"))
def test_question_spec_golden(case: Case) -> None:
    """stage C on each case of ``tests/fixtures/stages/question_spec.jsonl`` gives the recorded output."""
    assert STAGES["question_spec"](case["input"]) == case["expected"]


@pytest.mark.parametrize("case", stage_cases("question_spec", invalid=True))
def test_question_spec_golden_rejections(case: Case) -> None:
    """Each input of ``tests/fixtures/stages/question_spec__invalid.jsonl`` is rejected as recorded."""
    check_rejection("question_spec", case)
