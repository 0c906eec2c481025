"""User data shown as text: one-line labels, truncation, Markdown escaping (issue 13).

Agent ids, versions, run ids, questions, SQL, reasons, evidence and file names come from the
agents' logs or the operator's command line; wherever STEF shows them (terminal tables, the
weekly report, Prefect artifacts) they must read as the text they are, never as markup. This
module holds the text side of that rule, with no dependency beyond the standard library:

* :func:`one_line` folds line breaks and makes control characters visible; :func:`visible_text`
  makes them visible and keeps the line breaks (a SQL statement in an HTML ``<pre>``);
* :func:`shorten` also truncates a long label with an ellipsis (the full text goes elsewhere:
  an HTML ``title`` attribute, the JSON output);
* :func:`md_text`, :func:`md_code`, :func:`md_code_block` and :func:`md_table` build Markdown in
  which user data cannot open a tag, an image, a link, a heading, a list, a table cell or close a
  code span. Their results are :class:`Markdown` strings, which the escaping functions pass through
  unchanged, so Markdown built by STEF is never escaped twice;
* :func:`spreadsheet_text` (a Python value) and :func:`spreadsheet_text_sql` (a DuckDB expression)
  guard a CSV cell that a spreadsheet would run as a formula (``stef review sample``, ``stef export``).

The HTML side is Jinja's autoescape after :func:`visible_text` (``stef/monitor/rendering.py``); the
terminal side is a rich console with markup and emoji codes off (``flows/cli/common.py``).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

DISPLAY_WIDTH = 48
"""Characters of a name (agent id, version, run id) shown in a table cell, a heading or a chart."""
ELLIPSIS = "…"

_LINE_BREAKS = frozenset("\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029\t")
"""What :meth:`str.splitlines` splits at, and the tab: each becomes one space in a one-line label."""
_BIDI_CONTROLS = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
"""Bidirectional formatting characters: they reorder the text around them (shown escaped)."""
_MD_ALWAYS = frozenset("\\`*_{}[]()#!|~$&<>")
"""ASCII punctuation escaped with a backslash wherever it occurs (CommonMark: any ASCII
punctuation may be escaped): emphasis, code spans, links and images, headings, table cells,
strikethrough, math; and ``&``, ``<``, ``>``: no entity, no raw HTML, no autolink, no block
quote, while the raw Markdown file still reads ``a \\> 2``, not ``a &gt; 2``."""
_MD_BLOCK_START = re.compile(r"^(\s*)(?:([-+=])|([0-9]+)([.)]))")
"""A list marker, a setext underline or a thematic break at the start of a value: escaped, so a
value rendered on its own (a Prefect table cell is rendered as one Markdown document) stays text."""
_BACKTICKS = re.compile(r"`+")


class Markdown(str):
    """A string that is already Markdown, built by STEF: the escaping functions leave it as it is.

    >>> md_text(Markdown("**drift**")), md_text("**drift**")
    ('**drift**', '\\\\*\\\\*drift\\\\*\\\\*')
    """

    __slots__ = ()


def _visible(char: str) -> str:
    """A control or bidirectional character as a visible escape (``\\x1b``, ``\\u202e``); others unchanged."""
    if char in _BIDI_CONTROLS or unicodedata.category(char) == "Cc":
        code = ord(char)
        return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
    return char


def one_line(value: object) -> str:
    """``str(value)`` on one line: every line break and tab becomes a space, control and
    bidirectional characters become visible escapes (``\\x1b``), nothing else changes.

    >>> one_line("a\\r\\nb\\u2028c\\x1b[31m")
    'a  b c\\\\x1b[31m'
    """
    return "".join(" " if char in _LINE_BREAKS else _visible(char) for char in str(value))


def visible_lines(value: object) -> str:
    """``str(value)`` with its line breaks kept and every other control or bidirectional character
    made visible, line by line as :func:`one_line` (for multi-line messages such as errors that quote
    user data: a raw ``ESC`` of a file name must not reach the terminal).

    >>> visible_lines("bad: a\\x1b[31m.jsonl\\n  hint")
    'bad: a\\\\x1b[31m.jsonl\\n  hint'
    """
    return "\n".join(one_line(part) for part in str(value).split("\n"))


def visible_text(value: object) -> str:
    """``str(value)`` with its line feeds and tabs kept (``\\r\\n`` and ``\\r`` become ``\\n``) and every
    other control or bidirectional character made visible (``\\x1b``, ``\\u202e``), for a text shown
    whole on several lines: a SQL statement in a fenced code block or an HTML ``<pre>``.

    >>> visible_text("SELECT 1\\r\\n\\tFROM t -- \\u202e\\x1b[2J")
    'SELECT 1\\n\\tFROM t -- \\\\u202e\\\\x1b[2J'
    """
    body = str(value).replace("\r\n", "\n").replace("\r", "\n")
    return "".join(char if char in "\n\t" else _visible(char) for char in body)


def shorten(value: object, width: int = DISPLAY_WIDTH) -> str:
    """:func:`one_line` of ``value``, cut to ``width`` characters with a final ``…`` when longer.

    Args:
        value: any value (``str()`` is taken).
        width: most characters of the result, the ellipsis included (at least 1).

    >>> shorten("bird-analyst"), shorten("x" * 100, 10)
    ('bird-analyst', 'xxxxxxxxx…')
    """
    text = one_line(value)
    width = max(1, width)
    return text if len(text) <= width else text[: width - 1] + ELLIPSIS


def quoted(value: object, width: int | None = None) -> str:
    r"""``str(value)`` as a quoted string literal (:func:`repr`) for a message: every control, line
    break, bidirectional or other unprintable character escaped once (``\x1b``, ``\n``,
    ``\u202e``), a backslash doubled; a value longer than ``width`` characters is first cut with a
    final ``…`` (as :func:`shorten`). Not :func:`shorten` then :func:`repr`, which escaped the
    escapes (``'\\x1b'``).

    >>> print(quoted("20\x1b[31m26"))
    '20\x1b[31m26'
    >>> print(quoted("a\nb" + "c" * 20, 6))
    'a\nbcc…'
    """
    text = str(value)
    if width is not None and len(text) > max(1, width):
        text = text[: max(1, width) - 1] + ELLIPSIS
    return repr(text)


def md_text(value: object) -> Markdown:
    """``value`` as Markdown text that renders as exactly its characters, on one line.

    :func:`one_line` first; then the punctuation of :data:`_MD_ALWAYS` (backslash, backtick,
    ``*``, ``_``, braces, brackets, parentheses, ``#``, ``!``, ``|``, ``~``, ``$``, ``&``, ``<``,
    ``>``) gets a backslash, and so do a list marker, a setext underline or
    a thematic break at the start (``-``, ``+``, ``=``, ``1.``, ``1)``). Safe inside a table cell,
    inline text, a heading and a list item. A :class:`Markdown` value is returned unchanged.

    >>> md_text("<script>x</script> | ![](http://t/x.png)")
    '\\\\<script\\\\>x\\\\</script\\\\> \\\\| \\\\!\\\\[\\\\]\\\\(http://t/x.png\\\\)'
    >>> md_text("- 1. a"), md_text("12) b")
    ('\\\\- 1. a', '12\\\\) b')
    """
    if isinstance(value, Markdown):
        return value
    text = "".join("\\" + char if char in _MD_ALWAYS else char for char in one_line(value))
    match = _MD_BLOCK_START.match(text)
    if match:
        lead, marker, digits, delimiter = match.groups()
        head = f"{lead}\\{marker}" if marker else f"{lead}{digits}\\{delimiter}"
        text = head + text[match.end() :]
    return Markdown(text)


def md_code(value: object) -> Markdown:
    """``value`` as an inline code span that no character of it can close (one line).

    The fence is one backtick longer than the longest backtick run of the text; a text that starts
    or ends with a backtick or a space is padded with one space on each side (CommonMark strips
    them again). HTML and Markdown inside a code span are shown literally. Not for table cells (a
    ``|`` in a code span still splits a GFM table cell): use :func:`md_text` there.

    >>> md_code("run-1"), md_code("a`b"), md_code("`x"), md_code("")
    ('`run-1`', '``a`b``', '`` `x ``', '')
    """
    text = one_line(value)
    if not text:
        return Markdown("")  # "``" would show two backticks
    fence = "`" * (max((len(run) for run in _BACKTICKS.findall(text)), default=0) + 1)
    pad = " " if text[:1] in ("`", " ") or text[-1:] in ("`", " ") else ""
    return Markdown(f"{fence}{pad}{text}{pad}{fence}")


def md_code_block(text: object, info: str = "") -> Markdown:
    """``text`` as a fenced code block that no line of it can close.

    The fence is a backtick run longer than any inside the text (at least three); line endings are
    normalised to ``\\n``, control characters other than tabs and line feeds are shown escaped.

    Args:
        text: the block's content (``str()`` is taken), e.g. a SQL statement.
        info: the info string (a language name such as ``sql``); :func:`one_line`, and backticks
            removed (they would end the fence line).

    >>> print(md_code_block("SELECT '```'", "sql"))
    ````sql
    SELECT '```'
    ````
    """
    body = visible_text(text)
    fence = "`" * max(3, max((len(run) for run in _BACKTICKS.findall(body)), default=0) + 1)
    return Markdown(f"{fence}{one_line(info).replace('`', '')}\n{body}\n{fence}")


def md_table(header: Sequence[object], rows: Iterable[Sequence[object]], align: str | None = None) -> Markdown:
    """A GFM table: every cell through :func:`md_text` (a :class:`Markdown` cell as it is).

    Args:
        header: the column names.
        rows: the cells of each row (as many as the header).
        align: one character per column: ``l`` left, ``r`` right, ``c`` centred (default: all ``l``).

    Raises:
        ValueError: a row or ``align`` does not have one entry per column.

    >>> print(md_table(["agent", "n"], [["a|b", 3]], "lr"))
    | agent | n |
    |---|---:|
    | a\\|b | 3 |
    """
    marks = {"l": "---", "r": "---:", "c": ":---:"}
    align = align or "l" * len(header)
    if len(align) != len(header) or set(align) - set(marks):
        raise ValueError(f"align {align!r} needs one of l, r, c per column ({len(header)} columns)")
    lines = ["| " + " | ".join(md_text(h) for h in header) + " |", "|" + "|".join(marks[a] for a in align) + "|"]
    for row in rows:
        if len(row) != len(header):
            raise ValueError(f"a table row has {len(row)} cells for {len(header)} columns")
        lines.append("| " + " | ".join(md_text(cell) for cell in row) + " |")
    return Markdown("\n".join(lines))


def md_cells(rows: Iterable[Mapping[str, Any]], width: int | None = DISPLAY_WIDTH) -> list[dict[str, Any]]:
    """Rows for a Prefect table artifact: every string value :func:`shorten`-ed and :func:`md_text`-escaped.

    The Prefect UI renders each string cell of a table artifact as a Markdown document; numbers,
    ``None`` and booleans are shown as they are and pass through unchanged.

    Args:
        rows: the table's rows.
        width: longest cell shown (``None``: no truncation).

    >>> md_cells([{"agent": "<b>a</b>", "n": 3}])
    [{'agent': '\\\\<b\\\\>a\\\\</b\\\\>', 'n': 3}]
    """

    def cell(value: Any) -> Any:
        if not isinstance(value, str):
            return value
        return str(md_text(value if width is None or isinstance(value, Markdown) else shorten(value, width)))

    return [{key: cell(value) for key, value in row.items()} for row in rows]


FORMULA_STARTS: tuple[str, ...] = ("=", "+", "-", "@", "\t", "\r", "\0", "\uff1d", "\uff0b", "\uff0d", "\uff20")
"""First characters that make a spreadsheet (Excel, Sheets, LibreOffice) read a CSV cell as a
formula (OWASP CSV injection, OWASP ASVS 1.2.10): ``=``, ``+``, ``-``, ``@``, tab, carriage return
and NUL, and the full-width ``＝ ＋ － ＠`` that East Asian input methods type and some spreadsheets
take for their ASCII forms."""

FORMULA_SKIPPED_PREFIX = " \n\u00a0\u3000"
"""Characters a spreadsheet may skip before a formula's first character (space, line feed,
no-break space, ideographic space): ``" =1+1"`` is guarded as ``"=1+1"`` is."""


def looks_like_formula(text: str) -> bool:
    """Whether a spreadsheet could read ``text`` as a formula once any leading ``'`` were taken off:
    ``'`` characters (none too), then characters of :data:`FORMULA_SKIPPED_PREFIX` (none too), then
    one of :data:`FORMULA_STARTS`.

    >>> looks_like_formula("=1"), looks_like_formula("''+1"), looks_like_formula("'a"), looks_like_formula("a=1")
    (True, True, False, False)
    >>> looks_like_formula("  =1"), looks_like_formula("\uff1dcmd"), looks_like_formula("\\n-1"), looks_like_formula(" a")
    (True, True, True, False)
    """
    return text.lstrip("'").lstrip(FORMULA_SKIPPED_PREFIX).startswith(FORMULA_STARTS)


def spreadsheet_text(value: object) -> object:
    """A CSV cell that a spreadsheet would run as a formula (``=HYPERLINK(…)``, ``+1``, ``@SUM``)
    prefixed with ``'``, so Excel and Sheets show it as text (OWASP CSV injection).

    Only a string is guarded (a number stays a number); ``None`` becomes ``""``. A text that is
    ``'`` characters followed by a formula start gets one more ``'`` as well
    (:func:`looks_like_formula`), so that taking exactly one ``'`` off such a cell (``stef review
    import``) gives every text back unchanged: ``=x`` → ``'=x``, ``'=x`` → ``''=x``.

    >>> print(spreadsheet_text('=HYPERLINK("http://x")'), spreadsheet_text("SELECT 1"), spreadsheet_text(-3.0))
    '=HYPERLINK("http://x") SELECT 1 -3.0
    >>> print(spreadsheet_text("'=x"), spreadsheet_text("'x"), spreadsheet_text("-1"))
    ''=x 'x '-1
    """
    if value is None:
        return ""
    if isinstance(value, str) and looks_like_formula(value):
        return "'" + value
    return value


def spreadsheet_text_sql(expression: str) -> str:
    """:func:`spreadsheet_text` as a DuckDB SQL expression over the ``VARCHAR`` SQL ``expression``:
    its value with a leading ``'`` when :func:`looks_like_formula` holds (past any leading ``'``
    and :data:`FORMULA_SKIPPED_PREFIX` characters, the text starts with one of
    :data:`FORMULA_STARTS`), else unchanged (``NULL`` stays ``NULL``). DuckDB computes it, so a
    ``COPY … TO`` stays streamed.

    Args:
        expression: SQL of a text column, e.g. ``r.question`` (written by STEF, never user data).

    Returns:
        A SQL ``CASE`` expression.

    >>> print(spreadsheet_text_sql("r.sql"))  # doctest: +NORMALIZE_WHITESPACE
    CASE WHEN left(ltrim(ltrim(r.sql, chr(39)), chr(32) || chr(10) || chr(160) || chr(12288)), 1) IN (chr(61), chr(43),
    chr(45), chr(64), chr(9), chr(13), chr(0), chr(65309), chr(65291), chr(65293), chr(65312)) THEN chr(39) || r.sql
    ELSE r.sql END
    """
    starts = ", ".join(f"chr({ord(c)})" for c in FORMULA_STARTS)
    skipped = " || ".join(f"chr({ord(c)})" for c in FORMULA_SKIPPED_PREFIX)
    core = f"ltrim(ltrim({expression}, chr(39)), {skipped})"
    return f"CASE WHEN left({core}, 1) IN ({starts}) THEN chr(39) || {expression} ELSE {expression} END"


def json_kind(value: object) -> str:
    """What a JSON value is, in words (for a reason shown to users, in JSON's terms, not Python's):
    ``an object``, ``a list``, ``a string``, ``a number``, ``true``/``false``, ``null``.

    >>> json_kind([1]), json_kind("x"), json_kind(False), json_kind(None), json_kind(2.5), json_kind({})
    ('a list', 'a string', 'false', 'null', 'a number', 'an object')
    """
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "a list" if isinstance(value, list) else "an object" if isinstance(value, dict) else type(value).__name__


def json_line(value: object, **options: Any) -> str:
    """``json.dumps(value, ensure_ascii=False, **options)`` for a terminal or a pipe: with the
    characters it leaves raw that a terminal acts on (DEL and the C1 controls such as ``\\x9b``,
    an 8-bit CSI; bidirectional formatting; the line and paragraph separators) written as
    ``\\uXXXX`` escapes. The text stays valid JSON that decodes to ``value``: outside strings JSON
    is ASCII, and inside them an escape is the character.

    >>> json_line({"raw": "ok\\x9b2J \\u202etxt.exe \\u2028é"})
    '{"raw": "ok\\\\u009b2J \\\\u202etxt.exe \\\\u2028é"}'
    """
    import json

    text = json.dumps(value, ensure_ascii=False, **options)
    return "".join(
        f"\\u{ord(char):04x}"
        if char in _BIDI_CONTROLS or char in "\u2028\u2029" or unicodedata.category(char) == "Cc"
        else char
        for char in text
    )
