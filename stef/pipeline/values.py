"""Values, counts, column names and comparison operators as both extractors of stage B normalise them.

The SQL extractor (:mod:`stef.pipeline.extract_sql`) and the language extractor
(:mod:`stef.pipeline.extract_nl`, :mod:`stef.pipeline.hints`) compare what they find by these
normal forms: values case- and whitespace-normalised (dates and numbers canonical), column names
unqualified, lower case, quotes removed, R_app column mappings applied.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

from sqlglot import exp

from stef.pipeline.rules import AppRules

COMPARISON_TYPES: dict[type[exp.Expr], str] = {
    exp.EQ: "=",
    exp.NEQ: "!=",
    exp.GT: ">",
    exp.GTE: ">=",
    exp.LT: "<",
    exp.LTE: "<=",
    exp.Like: "LIKE",
    exp.ILike: "LIKE",
    exp.Glob: "LIKE",
    exp.NullSafeEQ: "=",
    exp.NullSafeNEQ: "!=",
}
FLIPPED = {"=": "=", "!=": "!=", ">": "<", ">=": "<=", "<": ">", "<=": ">=", "LIKE": "LIKE"}


MAX_COUNT_DIGITS = 18
"""Longest run of digits read as a LIMIT, FETCH or top-k count (beyond it the text is not a
usable count; ``int()`` of 4,301+ digits would raise)."""


def parse_count(text: str | None) -> int | None:
    """A non-negative count written with decimal digits of any script (``"10"``, ``"٣"``), else
    ``None`` (``"²"`` is a digit but not a decimal one, ``"-3"``, a thousand digits, ``None``).

    >>> parse_count("10"), parse_count("٣"), parse_count("²"), parse_count("1" * 5000)
    (10, 3, None, None)
    """
    if not text or len(text) > MAX_COUNT_DIGITS or not text.isdecimal():
        return None
    return int(text)


def normalize_value(value: str, rules: AppRules | None = None) -> str:
    """Case/whitespace-normalise a literal value, then apply R_app value aliases.

    >>> normalize_value("  New   York ")
    'new york'
    >>> normalize_value("2.50")
    '2.5'
    """
    if rules is None or (
        not rules.value_normalization.get("value_aliases")
        and rules.value_normalization.get("lowercase", True)
        and rules.value_normalization.get("collapse_whitespace", True)
    ):
        return _default_normalized(value)
    options = rules.value_normalization
    text = compatible_text(value)
    if options.get("collapse_whitespace", True):
        text = " ".join(text.split())
    if options.get("lowercase", True):
        text = text.lower()
    text = _canonical_date(_canonical_number(text))
    aliases = options.get("value_aliases") or {}
    normalized: str = aliases.get(text, text)
    return normalized


_YMD = re.compile(r"^(\d{4})[/.-](\d{1,2})[/.-](\d{1,2})$")
_MDY = re.compile(r"^(\d{1,2})/(\d{1,2})/(\d{4})$")


def _canonical_date(text: str) -> str:
    """``2012/8/25`` and ``8/25/2012`` (US order) -> ``2012-08-25``; anything else unchanged.

    >>> _canonical_date("2012/8/25"), _canonical_date("1/10/2019"), _canonical_date("2019-01-10 00:00")
    ('2012-08-25', '2019-01-10', '2019-01-10 00:00')
    """
    match = _YMD.match(text)
    if match:
        year, month, day = match.groups()
    else:
        match = _MDY.match(text)
        if not match:
            return text
        month, day, year = match.groups()
    if not (1 <= int(month) <= 12 and 1 <= int(day) <= 31):
        return text
    return f"{year}-{int(month):02d}-{int(day):02d}"


@lru_cache(maxsize=65536)
def _default_normalized(value: str) -> str:
    """:func:`normalize_value` under the default options (cached: literals repeat a lot)."""
    return _canonical_date(_canonical_number(" ".join(compatible_text(value).split()).lower()))


WIDTH_FOLD: dict[int, int | str] = {
    **{code: code - 0xFEE0 for code in range(0xFF01, 0xFF5F)},  # fullwidth ASCII (an input method's)
    0x3000: 0x20,  # ideographic space
    0x00A0: 0x20,  # no-break space
    0x2007: 0x20,  # figure space
    0x202F: 0x20,  # narrow no-break space
    **{  # halfwidth katakana, Hangul and their marks, fullwidth signs (¥, ¢): each as NFKC reads it
        code: unicodedata.normalize("NFKC", chr(code))
        for code in range(0xFF61, 0xFFEF)
        if len(unicodedata.normalize("NFKC", chr(code))) == 1 and unicodedata.normalize("NFKC", chr(code)) != chr(code)
    },
}
"""Characters read as their ASCII or full-width counterparts, as an input method may type either:
fullwidth ASCII and spaces; halfwidth katakana (``ｶﾞｽ`` is ``ガス`` once composed: the halfwidth
voiced mark becomes the combining one), halfwidth Hangul, fullwidth ``￥``. Not all of NFKC:
``10³`` stays ``10³``, not ``103``."""


def compatible_text(text: str) -> str:
    r"""``text`` composed (Unicode NFC: an accent typed as a combining mark joins its letter) and
    width-folded (:data:`WIDTH_FOLD`: fullwidth letters and digits, no-break spaces), as the
    questions and the SQL's literals are compared.

    >>> compatible_text("Ala\u0301meda"), compatible_text("Ｆｒｅｓｎｏ"), compatible_text("10³ on\xa0Monday")
    ('Alámeda', 'Fresno', '10³ on Monday')
    >>> compatible_text("ｶﾞｽ"), compatible_text("ガス") == compatible_text("ｶﾞｽ")
    ('ガス', True)
    """
    return text if text.isascii() else unicodedata.normalize("NFC", text.translate(WIDTH_FOLD))


def _canonical_number(text: str) -> str:
    try:
        number = float(text)
    except ValueError:
        return text
    if number != number or number in (float("inf"), float("-inf")):
        return text
    if number.is_integer() and abs(number) < 1e15:
        return str(int(number))
    return repr(number)


def column_name(column: exp.Column | exp.Identifier | str, rules: AppRules | None = None) -> str:
    """Normalised column name: unqualified, lower case, whitespace collapsed, R_app mapping applied."""
    name = column if isinstance(column, str) else column.name
    name = " ".join(name.split()).lower()
    return rules.canonical_column(name) if rules is not None else name
