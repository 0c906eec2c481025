"""Stage B (SQL side): filter predicates of a WHERE / HAVING / JOIN condition (STEF paper §2.B).

Splits a condition into its predicates (with their negation), turns each into a
:class:`stef.models.FilterPredicate` (column, operator, normalised value) and finds OR
alternatives that are not parenthesised.
"""

from __future__ import annotations

from sqlglot import exp

from stef.models import FilterPredicate
from stef.pipeline.rules import AppRules
from stef.pipeline.sql_trees import render
from stef.pipeline.values import COMPARISON_TYPES, FLIPPED, column_name, normalize_value

NEGATED = {
    "=": "!=",
    "!=": "=",
    ">": "<=",
    ">=": "<",
    "<": ">=",
    "<=": ">",
    "LIKE": "NOT LIKE",
    "IN": "NOT IN",
    "IS NULL": "IS NOT NULL",
    "BETWEEN": "NOT BETWEEN",
}


def _literal_text(node: exp.Expr | None) -> str | None:
    if isinstance(node, exp.Literal):
        text: str = node.this
        return text
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal):
        return f"-{node.this.this}"
    if isinstance(node, exp.Boolean):
        return "1" if node.this else "0"
    if isinstance(node, (exp.Cast, exp.TryCast)):
        return _literal_text(node.this)
    if isinstance(node, exp.Paren):
        return _literal_text(node.this)
    return None


def _quoted_name_value(node: exp.Expr, other: exp.Expr) -> str | None:
    """The text of a double-quoted name compared with a column (``Citizenship != "France"``).

    In SQLite a double-quoted token that names no column is a string literal, and agents write
    string values that way; sqlglot's identifier-quoting dialects read it as a column. An
    unqualified quoted name on the value side of a comparison with a column is taken as a
    candidate value unless the query uses that name as a column elsewhere (a self-join on
    ``"a" = "b"``). Dialects that quote strings with ``"`` (MySQL) already parse it as a literal.

    >>> import sqlglot
    >>> _quoted_name_value(*(lambda c: (c.expression, c.this))(sqlglot.parse_one('SELECT a FROM t WHERE "c" = "France"').find(sqlglot.exp.EQ)))
    'France'
    >>> _quoted_name_value(*(lambda c: (c.expression, c.this))(sqlglot.parse_one('SELECT b FROM t WHERE "c" = "b"').find(sqlglot.exp.EQ))) is None
    True
    """
    if not (
        isinstance(node, exp.Column) and not node.table and isinstance(node.this, exp.Identifier) and node.this.quoted
    ):
        return None
    if not isinstance(other, exp.Column) and _first_column(other) is None:
        return None
    name = node.name
    if not name.strip():
        return None
    root = node.root()
    for column in root.find_all(exp.Column):
        if column is not node and column is not other and column.name == name:
            return None
    return name


def unparenthesised_alternatives(condition: exp.Expr, dialect: str = "") -> list[str]:
    """ORs of a filter with an unparenthesised AND on one side whose other side tests a column
    of that AND: ``sex = 'M' AND alb < 3.5 OR alb >= 5.5`` reads ``(sex = 'M' AND alb < 3.5) OR
    alb >= 5.5`` (AND binds tighter), so ``sex = 'M'`` holds for one alternative only. Returns
    the SQL of each such OR; subqueries are not entered.

    >>> import sqlglot
    >>> unparenthesised_alternatives(sqlglot.parse_one("SELECT 1 FROM t WHERE sex = 'M' AND alb < 3.5 OR alb >= 5.5").args["where"].this)
    ["sex = 'M' AND alb < 3.5 OR alb >= 5.5"]
    >>> unparenthesised_alternatives(sqlglot.parse_one("SELECT 1 FROM t WHERE sex = 'M' AND (alb < 3.5 OR alb >= 5.5)").args["where"].this)
    []
    """
    found: list[str] = []
    stack = [condition]
    while stack:
        node = stack.pop()
        if isinstance(node, (exp.Paren, exp.Not)):
            stack.append(node.this)
        elif isinstance(node, exp.Connector):
            left, right = node.this, node.expression
            stack.extend((left, right))
            if isinstance(node, exp.Or):
                for side, other in ((left, right), (right, left)):
                    if isinstance(side, exp.And) and not isinstance(other, exp.And):
                        names = {c.name.lower() for c in other.find_all(exp.Column)}
                        if names and names & {c.name.lower() for c in side.find_all(exp.Column)}:
                            found.append(render(node, dialect)[:300])
                            break
    return found


def _first_column(node: exp.Expr) -> exp.Column | None:
    if isinstance(node, exp.Column):
        return node
    return next(iter(node.find_all(exp.Column)), None)


def _predicates(condition: exp.Expr) -> list[tuple[exp.Expr, bool]]:
    """Flatten AND/OR/NOT into (predicate, negated) pairs without copying."""
    out: list[tuple[exp.Expr, bool]] = []
    stack: list[tuple[exp.Expr, bool]] = [(condition, False)]
    while stack:
        node, negated = stack.pop()
        if isinstance(node, exp.Paren):
            stack.append((node.this, negated))
        elif isinstance(node, exp.Connector):
            stack.append((node.right, negated))
            stack.append((node.left, negated))
        elif isinstance(node, exp.Not):
            stack.append((node.this, not negated))
        else:
            out.append((node, negated))
    return out


def _filter_from_predicate(
    node: exp.Expr, negated: bool, clause: str, rules: AppRules | None, dialect: str
) -> FilterPredicate | None:
    operator: str | None = None
    left: exp.Expr | None = None
    values: list[str] = []
    quoted_raw: list[str] = []
    for node_type, symbol in COMPARISON_TYPES.items():
        if type(node) is node_type:
            operator = symbol
            left, right = node.this, node.expression
            left_value, right_value = _literal_text(left), _literal_text(right)
            if left_value is not None and right_value is None:
                left, right = right, left
                operator = FLIPPED[symbol]
                right_value = left_value
            elif left_value is None and right_value is None:
                right_value = _quoted_name_value(right, left)
                if right_value is not None:
                    quoted_raw.append(right_value)
            if right_value is not None:
                values = [normalize_value(right_value, rules)]
            break
    if operator is None:
        if isinstance(node, exp.In):
            operator, left = "IN", node.this
            texts = [_literal_text(e) for e in node.expressions]
            if all(text is None for text in texts):
                texts = [_quoted_name_value(e, node.this) for e in node.expressions]
                quoted_raw.extend(text for text in texts if text is not None)
            values = [normalize_value(v, rules) for v in texts if v is not None]
        elif isinstance(node, exp.Between):
            operator, left = "BETWEEN", node.this
            values = [
                normalize_value(v, rules)
                for v in (_literal_text(node.args.get("low")), _literal_text(node.args.get("high")))
                if v is not None
            ]
        elif isinstance(node, exp.Is):
            left = node.this
            operator = "IS NULL" if isinstance(node.expression, exp.Null) else "IS"
        elif isinstance(node, exp.Column):
            left, operator = node, "IS TRUE"
        else:
            return None
    if left is None:
        return None
    column = _first_column(left)
    if column is None and not (isinstance(left, exp.Count) and isinstance(left.this, exp.Star)):
        return None
    if negated:
        operator = NEGATED.get(operator, f"NOT {operator}")
    raw_values = (*(n.this for n in node.find_all(exp.Literal) if n.is_string), *quoted_raw)
    return FilterPredicate(
        column=column_name(column, rules) if column is not None else "count(*)",  # HAVING COUNT(*) > 1
        raw_values=raw_values,
        operator=operator,
        value=values[0] if len(values) == 1 else None,
        values=tuple(values),
        clause=clause,
        negated=negated,
        sql=render(node, dialect)[:500],
    )
