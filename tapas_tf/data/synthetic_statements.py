"""Synthetic and counterfactual statements about a table: intermediate pre-training for TabFact.

Eisenschlos et al. (Findings of EMNLP 2020) taught TAPAS to verify statements before it saw
TabFact: statements made from templates over any table (a lookup, a count, a superlative, a
comparison, a total or an average), each in a true and a false version, and counterfactual
statements (a true statement with one of its table's entities swapped for another). A small model
fine-tuned on TabFact alone stays at chance (the pairs are minimal edits); these teach it to read
the table first.

    table = StatementTable.from_rows(header, rows)
    for statement in synthetic_statements(table, random.Random(seed), pairs=8):
        statement.text, statement.label, statement.kind    # label 1 = entailed, 0 = refuted
    counterfactual(table, "the most points was 98 on april 19th", rng)   # a refuted twin, or None

Every template yields its statements in pairs, a true one and a false one about the same table
and columns, so that the labels stay balanced and the false statement differs from the true one
in the value that decides it, as in TabFact. Text is lowercased like the release's tables.
"""

import dataclasses
import functools
import random
import re
from typing import Callable, Dict, List, Optional, Sequence, Tuple

ENTAILED, REFUTED = 1, 0
_NUMBER = re.compile(r"^-?\d{1,3}(,\d{3})+(\.\d+)?$|^-?\d+(\.\d+)?$")
_NUMBER_WORDS = ("zero one two three four five six seven eight nine ten").split()
TOTAL_WORDS = frozenset(("total", "totals", "grand total", "overall", "all"))
# A cell's text must be at least this long to be swapped into or out of a statement: shorter ones
# ("a", "1") occur inside unrelated words and numbers.
MIN_SWAP_CHARACTERS = 2


@dataclasses.dataclass(frozen=True)
class Statement:
    text: str
    label: int  # ENTAILED or REFUTED.
    kind: str  # The template ("lookup", "count", ...) or "counterfactual".


def parse_number(text: str) -> Optional[float]:
    """The number a whole cell holds ("1,234", "-3.5"), else None (dates, "12 km", names)."""
    text = text.strip()
    if not _NUMBER.match(text):
        return None
    return float(text.replace(",", ""))


def format_number(value: float) -> str:
    """An integer without a point, anything else to two decimals without trailing zeros."""
    if abs(value - round(value)) < 1e-9:
        return str(int(round(value)))
    return f"{value:.2f}".rstrip("0").rstrip(".")


@dataclasses.dataclass
class StatementTable:
    """A table as templates read it: lowercased header and rows of stripped cell texts."""

    header: List[str]
    rows: List[List[str]]

    @classmethod
    def from_rows(cls, header: Sequence[str], rows: Sequence[Sequence[str]]) -> "StatementTable":
        width = len(header)
        rows = [[cell.strip().lower() for cell in row] for row in rows if len(row) == width]
        return cls([name.strip().lower() for name in header], rows)

    def column(self, index: int) -> List[str]:
        return [row[index] for row in self.rows]

    def numeric_columns(self) -> List[int]:
        """Columns whose every non-empty cell is a number, with at least three numbers."""
        return list(self._numeric_columns)

    def key_column(self) -> Optional[int]:
        """The first non-numeric column whose cells name their rows (all distinct, non-empty)."""
        return self._key_column

    # Every template asks for these, several times per table: each cell is parsed once.
    @functools.cached_property
    def _numeric_columns(self) -> Tuple[int, ...]:
        found = []
        for index in range(len(self.header)):
            values = [cell for cell in self.column(index) if cell not in ("", "-")]
            if len(values) >= 3 and all(parse_number(cell) is not None for cell in values):
                found.append(index)
        return tuple(found)

    @functools.cached_property
    def _key_column(self) -> Optional[int]:
        for index in range(len(self.header)):
            values = self.column(index)
            if index not in self._numeric_columns and all(values) and len(set(values)) == len(values):
                return index
        return None


def _number_text(count: int, rng: random.Random) -> str:
    """A small count as a word or digits, both as TabFact writes them."""
    if count < len(_NUMBER_WORDS) and rng.random() < 0.5:
        return _NUMBER_WORDS[count]
    return str(count)


def _wrong_number(value: float, rng: random.Random) -> float:
    """A nearby number that is not `value`: off by a few units or a few percent."""
    if abs(value) >= 20 and rng.random() < 0.5:
        wrong = value * rng.choice((0.8, 0.9, 1.1, 1.25))
    else:
        wrong = value + rng.choice((-3, -2, -1, 1, 2, 3))
    if abs(value - round(value)) < 1e-9:
        wrong = round(wrong)
    return wrong if abs(wrong - value) > 1e-9 else value + 1


def _pair(true_text: str, false_text: str, kind: str) -> Tuple[Statement, Statement]:
    return Statement(true_text, ENTAILED, kind), Statement(false_text, REFUTED, kind)


def _lookup(table: StatementTable, rng: random.Random) -> Optional[Tuple[Statement, Statement]]:
    """"the <column> of <key> is <value>", and the same with another value of the column."""
    key = table.key_column()
    if key is None:
        return None
    columns = [c for c in range(len(table.header)) if c != key and table.header[c]]
    if not columns:
        return None
    column = rng.choice(columns)
    row = rng.choice(table.rows)
    value = row[column]
    others = sorted({v for v in table.column(column) if v and v != value})
    if not value or not others:
        return None
    wrong = rng.choice(others)
    template = rng.choice(("the {c} of {k} is {v}", "{k} has a {c} of {v}", "{k} 's {c} is {v}",
                           "when the {kc} is {k} , the {c} is {v}"))
    fill = dict(c=table.header[column], k=row[key], kc=table.header[key])
    return _pair(template.format(v=value, **fill), template.format(v=wrong, **fill), "lookup")


def _count(table: StatementTable, rng: random.Random) -> Optional[Tuple[Statement, Statement]]:
    """"<value> appears <n> times in the <column> column" (a value held by several rows)."""
    candidates = []
    for column in range(len(table.header)):
        values = table.column(column)
        for value in sorted(set(values)):
            if value and values.count(value) >= 2:
                candidates.append((column, value, values.count(value)))
    if not candidates:
        return None
    column, value, count = rng.choice(candidates)
    wrong = max(1, count + rng.choice((-2, -1, 1, 2)))
    if wrong == count:
        wrong = count + 1
    template = rng.choice(("there are {n} {c} of {v}", "{v} appears {n} times in the {c} column",
                           "{n} of the rows have a {c} of {v}"))
    true_text = template.format(n=_number_text(count, rng), c=table.header[column], v=value)
    false_text = template.format(n=_number_text(wrong, rng), c=table.header[column], v=value)
    return _pair(true_text, false_text, "count")


def _numeric_rows(table: StatementTable, column: int) -> List[Tuple[float, List[str]]]:
    """The rows with a number in `column`, but not a table's own total row (it would count twice)."""
    return [(parse_number(row[column]), row) for row in table.rows
            if parse_number(row[column]) is not None and not is_total_row(row)]


def is_total_row(row: Sequence[str]) -> bool:
    """A row some cell of which names it a total ("total", "totals", "grand total")."""
    return any(cell in TOTAL_WORDS for cell in row)


def _key_and_numbers(table: StatementTable, rng: random.Random
                     ) -> Optional[Tuple[int, int, List[Tuple[float, List[str]]]]]:
    """(key column, a numeric column chosen at random, its rows with their numbers), or None when the
    table has no column naming its rows or no numeric column."""
    key, numeric = table.key_column(), table.numeric_columns()
    if key is None or not numeric:
        return None
    column = rng.choice(numeric)
    return key, column, _numeric_rows(table, column)


def _superlative(table: StatementTable, rng: random.Random) -> Optional[Tuple[Statement, Statement]]:
    """"<key> has the highest <column>" for the row that has it, and for another row."""
    picked = _key_and_numbers(table, rng)
    if picked is None:
        return None
    key, column, rows = picked
    highest = rng.random() < 0.5
    best = (max if highest else min)(value for value, _ in rows)
    winners = [row for value, row in rows if value == best]
    losers = [row for value, row in rows if value != best]
    if len(winners) != 1 or not losers:
        return None
    template = rng.choice(("{k} has the {s} {c}", "the {s} {c} is for {k}", "{k} had the {s} {c} of all"))
    word = "highest" if highest else "lowest"
    fill = dict(s=word, c=table.header[column])
    loser = rng.choice(losers)
    return _pair(template.format(k=winners[0][key], **fill), template.format(k=loser[key], **fill),
                 "superlative")


def _comparison(table: StatementTable, rng: random.Random) -> Optional[Tuple[Statement, Statement]]:
    """"<key a> has a higher <column> than <key b>", true one way round and false the other."""
    picked = _key_and_numbers(table, rng)
    if picked is None:
        return None
    key, column, rows = picked
    if len(rows) < 2:
        return None
    (value_a, row_a), (value_b, row_b) = rng.sample(rows, 2)
    if value_a == value_b:
        return None
    if value_a < value_b:
        row_a, row_b = row_b, row_a
    word = rng.choice(("higher", "more", "greater"))
    template = "{a} has a {w} {c} than {b}" if word != "more" else "{a} has {w} {c} than {b}"
    fill = dict(w=word, c=table.header[column])
    return _pair(template.format(a=row_a[key], b=row_b[key], **fill),
                 template.format(a=row_b[key], b=row_a[key], **fill), "comparison")


def _aggregate(table: StatementTable, rng: random.Random) -> Optional[Tuple[Statement, Statement]]:
    """"the total <column> is <sum>" or "the average <column> is <mean>", and a wrong number."""
    numeric = table.numeric_columns()
    if not numeric:
        return None
    column = rng.choice(numeric)
    values = [value for value, _ in _numeric_rows(table, column)]
    if rng.random() < 0.5:
        word, value = "total", sum(values)
    else:
        word, value = "average", sum(values) / len(values)
    template = rng.choice(("the {w} {c} is {v}", "the {c} adds up to {v}" if word == "total" else
                           "the {c} is {v} on average"))
    fill = dict(w=word, c=table.header[column])
    return _pair(template.format(v=format_number(value), **fill),
                 template.format(v=format_number(_wrong_number(value, rng)), **fill), "aggregate")


def _value_superlative(table: StatementTable, rng: random.Random) -> Optional[Tuple[Statement, Statement]]:
    """"the highest <column> is <max>", and another value of the column."""
    numeric = table.numeric_columns()
    if not numeric:
        return None
    column = rng.choice(numeric)
    values = sorted({value for value, _ in _numeric_rows(table, column)})
    if len(values) < 2:
        return None
    highest = rng.random() < 0.5
    best = values[-1] if highest else values[0]
    wrong = rng.choice(values[:-1] if highest else values[1:])
    template = rng.choice(("the {s} {c} is {v}", "{v} is the {s} {c}"))
    fill = dict(s="highest" if highest else "lowest", c=table.header[column])
    return _pair(template.format(v=format_number(best), **fill),
                 template.format(v=format_number(wrong), **fill), "superlative_value")


TEMPLATES: Dict[str, Callable[[StatementTable, random.Random], Optional[Tuple[Statement, Statement]]]] = {
    "lookup": _lookup,
    "count": _count,
    "superlative": _superlative,
    "comparison": _comparison,
    "aggregate": _aggregate,
    "superlative_value": _value_superlative,
}


def synthetic_statements(table: StatementTable, rng: random.Random, pairs: int) -> List[Statement]:
    """Up to `pairs` true/false pairs about `table` from TEMPLATES chosen at random, no statement twice.

    A template that does not fit the table (no numeric column, no column naming the rows) is
    tried again with another; after `4 * pairs` attempts the pairs found so far are returned.
    """
    found: List[Statement] = []
    seen = set()
    names = sorted(TEMPLATES)
    for _ in range(4 * pairs):
        if len(found) >= 2 * pairs:
            break
        pair = TEMPLATES[rng.choice(names)](table, rng)
        if pair is None or pair[0].text in seen or pair[1].text in seen:
            continue
        seen.update(statement.text for statement in pair)
        found.extend(pair)
    return found


def _mentions(statement: str, cell: str) -> bool:
    """True if `cell` occurs in `statement` as whole words."""
    return re.search(r"(?<![\w])" + re.escape(cell) + r"(?![\w])", statement) is not None


def counterfactual(table: StatementTable, statement: str, rng: random.Random) -> Optional[Statement]:
    """A refuted twin of an entailed `statement`: the longest cell it mentions swapped for another
    value of the same column that it does not mention. None if it mentions no swappable cell."""
    statement = statement.lower()
    mentioned = []
    rows = [row for row in table.rows if not is_total_row(row)]
    for column in range(len(table.header)):
        values = sorted({row[column] for row in rows})
        for cell in values:
            if len(cell) >= MIN_SWAP_CHARACTERS and _mentions(statement, cell):
                others = [v for v in values if len(v) >= MIN_SWAP_CHARACTERS and v != cell
                          and not _mentions(statement, v) and v not in cell and cell not in v]
                if others:
                    mentioned.append((len(cell), cell, column, others))
    if not mentioned:
        return None
    longest = max(length for length, *_ in mentioned)
    _, cell, _, others = rng.choice([m for m in mentioned if m[0] == longest])
    swapped = re.sub(r"(?<![\w])" + re.escape(cell) + r"(?![\w])", lambda _: rng.choice(others), statement,
                     count=1)
    return Statement(swapped, REFUTED, "counterfactual")
