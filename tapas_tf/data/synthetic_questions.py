"""Synthetic questions about a table, with their gold cells and operator, for intermediate training.

WikiTableQuestions teaches from answers only: a question like "how many pylons were built in
1931?" says "2" and nothing about which cells hold the two pylons. Small models trained that way
learn how often the answer is a count, not which cells to count (docs/RESULTS.md, issue 25). The
released TAPAS models for WTQ were first fine-tuned on WikiSQL and SQA, where cells and operators
are given; this module makes such examples from any table, the way WikiSQL was made: a random
query `SELECT agg(column) WHERE conditions` executed on the table (`sql_execution.execute_sql`,
the executor of the WikiSQL reader, so the answers follow the same rules), written as a question
by a template.

    table = make_table("t", ["Pylon", "Height (m)", "Year"],
                       [["Pylon A", "310", "1931"], ["Pylon B", "295", "1931"], ["Pylon C", "270", "1967"]])
    for conversation in synthesize(table, random.Random(0), 4):
        for question in conversation:
            print(question.text, "|", describe(question))
    # what was the average year? | AVERAGE of (0, 2), (1, 2), (2, 2) = 1943
    # which pylon had the most year? | NONE: (2, 0)
    # who has the smallest height (m)? | NONE: (2, 0)
    # what is the most year? | NONE: (2, 2)

The templates are not always good English ("the most year"); they teach which words ask for
which operator and which cells, and the fine-tuning on real questions follows.

Kinds of question (`KINDS`), each with several phrasings:
  lookup     what is the {sel} where {col} is {value}?          NONE, the matching cells
  column     what are all the {sel}?                             NONE, the whole column
  extreme    what is the highest {sel} [where ...]?             NONE, the extreme cell (MAX/MIN)
  argmax     which {name} has the lowest {number}?               NONE, a cell of the extreme row
  count      how many {sel} [where ...]?                         COUNT of the matching cells
  sum        what is the total {sel} [where ...]?                SUM of the matching numbers
  average    what is the average {sel} [where ...]?              AVERAGE of them
  followup   a lookup of several rows, then "which of these has the highest {number}?" or
             "what is their {col}?", answered within the first answer's rows (SQA's conversations)

A question is kept only when its answer is unambiguous to execute: conditions match at least one
row (and not every row), numbers are read by `sql_execution.cell_number`, and the answer has at
most `MAX_ANSWER_CELLS` cells.
"""

import dataclasses
import hashlib
import random
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from tapas_tf.data.protos import interaction_pb2
from tapas_tf.data.sql_execution import (AGG_OPS, AVERAGE, COND_OPS, COUNT, NONE, SUM, Condition, SqlResult,
                                         cell_number, execute_sql, format_number, matching_rows)
from tapas_tf.data.text_normalization import collapse_whitespace

KINDS = ("lookup", "column", "extreme", "argmax", "count", "sum", "average", "followup")
# How often each kind is drawn: a column has one "all the X" question in a few phrasings, while
# lookups and comparisons have a question for every value.
KIND_WEIGHTS = {"lookup": 3.0, "column": 0.5, "extreme": 1.5, "argmax": 2.0, "count": 2.0, "sum": 1.0,
                "average": 1.0, "followup": 2.0}
# Answers larger than this are not asked for (SQA's and WTQ's answers are rarely longer).
MAX_ANSWER_CELLS = 20
# A column is numeric when at least this fraction of its non-empty cells hold a plain number.
NUMERIC_FRACTION = 0.8
# Cells longer than this are not used as condition values: nobody quotes a paragraph in a question.
MAX_VALUE_CHARS = 40
_ATTEMPTS_PER_QUESTION = 8

_WHERE = ("where {col} is {value}", "when {col} is {value}", "with {col} {value}", "for {col} {value}")
_GREATER = ("where {col} is more than {value}", "with {col} greater than {value}", "with {col} above {value}")
_LESS = ("where {col} is less than {value}", "with {col} below {value}", "with {col} under {value}")
_PHRASES: Dict[str, Tuple[str, ...]] = {
    "lookup": ("what is the {sel} {cond}?", "which {sel} {cond}?", "name the {sel} {cond}.",
               "what {sel} {cond}?", "list the {sel} {cond}."),
    "column": ("what are all the {sel}?", "list all {sel}.", "what are the {sel}?", "name every {sel}."),
    "MAX": ("what is the highest {sel}{cond}?", "what is the largest {sel}{cond}?",
            "what is the most {sel}{cond}?", "what was the maximum {sel}{cond}?"),
    "MIN": ("what is the lowest {sel}{cond}?", "what is the smallest {sel}{cond}?",
            "what is the least {sel}{cond}?", "what was the minimum {sel}{cond}?"),
    "argmax": ("which {name} has the highest {number}?", "which {name} had the most {number}?",
               "who has the largest {number}?", "what {name} has the top {number}?"),
    "argmin": ("which {name} has the lowest {number}?", "which {name} had the least {number}?",
               "who has the smallest {number}?", "what {name} has the fewest {number}?"),
    "count": ("how many {sel}{cond}?", "what is the number of {sel}{cond}?", "how many rows{cond}?",
              "count the {sel}{cond}.", "how many entries{cond}?"),
    "sum": ("what is the total {sel}{cond}?", "what is the sum of {sel}{cond}?",
            "how many {sel} in total{cond}?", "what is the combined {sel}{cond}?"),
    "average": ("what is the average {sel}{cond}?", "what is the mean {sel}{cond}?",
                "what was the average {sel}{cond}?"),
    "followup_max": ("which of these has the highest {number}?", "of those, which has the most {number}?",
                     "which one has the largest {number}?"),
    "followup_min": ("which of these has the lowest {number}?", "of those, which has the least {number}?",
                     "which one has the smallest {number}?"),
    "followup_column": ("what is their {col}?", "what are their {col}?", "and their {col}?"),
}


@dataclasses.dataclass(frozen=True)
class SyntheticQuestion:
    """One question and its answer.

    Attributes:
      kind: one of `KINDS`.
      text: the question as asked.
      coordinates: (row, column) of the answer's cells, rows counted from 0 in the body.
      aggregation: TAPAS' operator (NONE, SUM, AVERAGE, COUNT of `sql_execution`).
      answer_texts: the answer as texts (cell texts, or the formatted number).
      float_value: the number answered by COUNT, SUM and AVERAGE (and MAX/MIN's cell), else None.
    """

    kind: str
    text: str
    coordinates: Tuple[Tuple[int, int], ...]
    aggregation: int
    answer_texts: Tuple[str, ...]
    float_value: Optional[float] = None


@dataclasses.dataclass(frozen=True)
class _Table:
    """A table as the generator reads it: names and cells as plain text."""

    names: Tuple[str, ...]  # Lower-cased, white space collapsed; "" for a column without a name.
    rows: Tuple[Tuple[str, ...], ...]
    numeric: Tuple[int, ...]  # The columns that hold numbers (`NUMERIC_FRACTION`).
    textual: Tuple[int, ...]  # Named columns with at least two distinct short values.


def seed_of(table_id: str, random_seed: int) -> int:
    """The generator's seed for one table: the same in every process and worker."""
    digest = hashlib.sha256(f"{table_id}\x00{random_seed}".encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big")


def _read_table(table: interaction_pb2.Table) -> _Table:
    names = tuple(collapse_whitespace(c.text).lower() for c in table.columns)
    rows = tuple(tuple(collapse_whitespace(cell.text) for cell in row.cells) for row in table.rows)
    numeric, textual = [], []
    for column, name in enumerate(names):
        if not name:
            continue
        cells = [row[column] for row in rows if column < len(row) and row[column]]
        if not cells:
            continue
        numbers = sum(cell_number(cell) is not None for cell in cells)
        if numbers >= NUMERIC_FRACTION * len(cells) and numbers >= 2:
            numeric.append(column)
        elif len({c.lower() for c in cells if len(c) <= MAX_VALUE_CHARS}) >= 2:
            textual.append(column)
    return _Table(names, rows, tuple(numeric), tuple(textual))


def _condition(table: _Table, rng: random.Random, exclude: int) -> Optional[Tuple[Condition, str]]:
    """A condition on another named column that keeps some rows but not all, and its phrase."""
    columns = [c for c in table.textual + table.numeric if c != exclude]
    if not columns:
        return None
    column = rng.choice(columns)
    values = [row[column] for row in table.rows if row[column] and len(row[column]) <= MAX_VALUE_CHARS]
    if not values:
        return None
    value = rng.choice(values)
    operator = "="
    if column in table.numeric and rng.random() < 0.4:
        operator = rng.choice((">", "<"))
    condition = Condition(column, operator, value)
    matched = matching_rows(table.rows, (condition,))
    if not matched or len(matched) == len(table.rows):
        return None
    phrases = {"=": _WHERE, ">": _GREATER, "<": _LESS}[operator]
    return condition, rng.choice(phrases).format(col=table.names[column], value=value)


def _execute(table: _Table, sel: int, agg: str, condition: Optional[Condition]) -> SqlResult:
    conds = [[condition.column, COND_OPS.index(condition.operator), condition.value]] if condition else []
    return execute_sql(table.names, None, table.rows, sel, AGG_OPS.index(agg), conds)


def _from_result(kind: str, text: str, result: SqlResult) -> Optional[SyntheticQuestion]:
    if not result.coordinates or len(result.coordinates) > MAX_ANSWER_CELLS:
        return None
    if result.sql_aggregation in ("MAX", "MIN") and len(result.coordinates) > 1:
        return None  # A tie: "the highest" names no one cell.
    if result.sql_aggregation in ("SUM", "AVG") and len(result.coordinates) < 2:
        return None  # The sum of one cell is that cell: a lookup in disguise.
    if result.aggregation_function == NONE and not all(result.values):
        return None  # An empty cell is no answer anyone asks for.
    return SyntheticQuestion(kind, text, result.coordinates, result.aggregation_function, result.values,
                             result.float_value)


def _named_columns(table: _Table) -> List[int]:
    return [c for c, name in enumerate(table.names) if name]


def _lookup(table: _Table, rng: random.Random) -> Optional[SyntheticQuestion]:
    sel = rng.choice(_named_columns(table))
    found = _condition(table, rng, exclude=sel)
    if found is None:
        return None
    condition, phrase = found
    text = rng.choice(_PHRASES["lookup"]).format(sel=table.names[sel], cond=phrase)
    return _from_result("lookup", text, _execute(table, sel, "", condition))


def _column(table: _Table, rng: random.Random) -> Optional[SyntheticQuestion]:
    sel = rng.choice(_named_columns(table))
    text = rng.choice(_PHRASES["column"]).format(sel=table.names[sel])
    return _from_result("column", text, _execute(table, sel, "", None))


def _optional_condition(table: _Table, rng: random.Random, sel: int) -> Tuple[Optional[Condition], str]:
    if rng.random() < 0.5:
        return None, ""
    found = _condition(table, rng, exclude=sel)
    return (found[0], " " + found[1]) if found else (None, "")


def _aggregate(kind: str, agg: str, columns: Sequence[int]) -> Callable[[_Table, random.Random],
                                                                       Optional[SyntheticQuestion]]:
    """A generator of `kind` questions: `agg` over one of `columns(table)`, maybe filtered."""

    def generate(table: _Table, rng: random.Random) -> Optional[SyntheticQuestion]:
        candidates = columns(table)
        if not candidates:
            return None
        sel = rng.choice(candidates)
        condition, phrase = _optional_condition(table, rng, sel)
        phrases = _PHRASES[agg if agg in ("MAX", "MIN") else kind]
        text = phrases[rng.randrange(len(phrases))].format(sel=table.names[sel], cond=phrase)
        result = _execute(table, sel, agg, condition)
        if agg in ("SUM", "AVG") and result.skipped_non_numeric:
            return None  # The cells and the number would disagree.
        return _from_result(kind, text, result)

    return generate


def _extreme_row(table: _Table, rows: Sequence[int], number: int, highest: bool) -> Optional[int]:
    """The one row of `rows` with the highest (lowest) number in column `number`; None on a tie."""
    values = [(cell_number(table.rows[r][number]), r) for r in rows]
    values = [(v, r) for v, r in values if v is not None]
    if len(values) < 2:
        return None
    best = (max if highest else min)(v for v, _ in values)
    holders = [r for v, r in values if v == best]
    return holders[0] if len(holders) == 1 else None


def _argmax(table: _Table, rng: random.Random) -> Optional[SyntheticQuestion]:
    if not table.textual or not table.numeric:
        return None
    name, number = rng.choice(table.textual), rng.choice(table.numeric)
    highest = rng.random() < 0.5
    row = _extreme_row(table, range(len(table.rows)), number, highest)
    if row is None or not table.rows[row][name]:
        return None
    text = rng.choice(_PHRASES["argmax" if highest else "argmin"]).format(
        name=table.names[name], number=table.names[number])
    return SyntheticQuestion("argmax", text, ((row, name),), NONE, (table.rows[row][name],), None)


def _followup(table: _Table, rng: random.Random) -> Optional[List[SyntheticQuestion]]:
    """A lookup that selects several rows, then a question about those rows only."""
    first = _lookup(table, rng)
    if first is None or len(first.coordinates) < 2:
        return None
    first = dataclasses.replace(first, kind="followup")
    rows = [r for r, _ in first.coordinates]
    sel = first.coordinates[0][1]
    others = [c for c in table.numeric if c != sel]
    if others and rng.random() < 0.6:
        number, highest = rng.choice(others), rng.random() < 0.5
        row = _extreme_row(table, rows, number, highest)
        if row is None:
            return None
        text = rng.choice(_PHRASES["followup_max" if highest else "followup_min"]).format(number=table.names[number])
        second = SyntheticQuestion("followup", text, ((row, sel),), NONE, (table.rows[row][sel],), None)
    else:
        columns = [c for c in _named_columns(table) if c != sel]
        if not columns:
            return None
        column = rng.choice(columns)
        cells = tuple((r, column) for r in rows)
        if not all(table.rows[r][column] for r in rows):
            return None
        text = rng.choice(_PHRASES["followup_column"]).format(col=table.names[column])
        second = SyntheticQuestion("followup", text, cells, NONE, tuple(table.rows[r][column] for r in rows), None)
    return [first, second]


_GENERATORS = {
    "lookup": _lookup,
    "column": _column,
    "extreme": lambda t, rng: _aggregate("extreme", rng.choice(("MAX", "MIN")), lambda t: t.numeric)(t, rng),
    "argmax": _argmax,
    "count": _aggregate("count", "COUNT", _named_columns),
    "sum": _aggregate("sum", "SUM", lambda t: t.numeric),
    "average": _aggregate("average", "AVG", lambda t: t.numeric),
}


def synthesize(table: interaction_pb2.Table, rng: random.Random, num_questions: int,
               kinds: Sequence[str] = KINDS) -> List[List[SyntheticQuestion]]:
    """Up to `num_questions` conversations about `table`: one question each, two for "followup".

    Kinds are drawn from `kinds` by `KIND_WEIGHTS`; a draw whose question cannot be made on this table (no
    numeric column for a sum, a condition that matches every row, ...) is retried a few times, so a
    table with only text columns yields fewer questions, and a one-row table possibly none.
    Duplicate questions are dropped.
    """
    unknown = sorted(set(kinds) - set(KINDS))
    if unknown:
        raise ValueError(f"unknown kinds of synthetic question {unknown}; known: {list(KINDS)}")
    read = _read_table(table)
    if not read.rows or not _named_columns(read):
        return []
    conversations, seen = [], set()
    kinds = tuple(kinds)
    weights = [KIND_WEIGHTS[kind] for kind in kinds]
    for _ in range(num_questions * _ATTEMPTS_PER_QUESTION):
        if len(conversations) >= num_questions:
            break
        kind = rng.choices(kinds, weights)[0]
        made = _followup(read, rng) if kind == "followup" else _GENERATORS[kind](read, rng)
        conversation = made if isinstance(made, list) else ([made] if made else None)
        if not conversation:
            continue
        key = tuple(q.text for q in conversation)
        if key in seen:
            continue
        seen.add(key)
        conversations.append(conversation)
    return conversations


def to_interaction(table: interaction_pb2.Table, conversation: Sequence[SyntheticQuestion],
                   interaction_id: str) -> interaction_pb2.Interaction:
    """An Interaction of the table and the conversation's questions, with gold cells and operator."""
    interaction = interaction_pb2.Interaction(id=interaction_id)
    interaction.table.CopyFrom(table)
    for position, synthetic in enumerate(conversation):
        question = interaction.questions.add(id=f"{interaction_id}_{position}", original_text=synthetic.text,
                                             text=synthetic.text)
        answer = question.answer
        answer.is_valid = True
        answer.aggregation_function = synthetic.aggregation
        answer.answer_texts.extend(synthetic.answer_texts)
        for row, column in synthetic.coordinates:
            answer.answer_coordinates.add(row_index=row, column_index=column)
        if synthetic.float_value is not None:
            answer.float_value = synthetic.float_value
    return interaction


def describe(question: SyntheticQuestion) -> str:
    """"COUNT of (0, 0), (1, 0) = 2" or "NONE: (0, 0)": for logs and tests."""
    cells = ", ".join(f"({r}, {c})" for r, c in question.coordinates)
    if question.aggregation == NONE:
        return f"NONE: {cells}"
    name = {SUM: "SUM", AVERAGE: "AVERAGE", COUNT: "COUNT"}[question.aggregation]
    return f"{name} of {cells} = {format_number(question.float_value)}"
