"""Plain-word notes on an answer whose computation does not fit its question.

    answer_notes(result, has_aggregation_head=True, follow_up=False)
    # ('This question asks for a total: the model counted the 11 selected cells (COUNT = 11); if the
    #   total of their values is meant, their values add up to 23.',)

TAPAS selects cells and may COUNT, SUM or AVERAGE them. A small model often picks the wrong
operator, and no operator computes a difference or a ratio. These notes say so, in the answer
itself (the CLI, the JSON's `notes`, `AskResult.notes`, the web page), with the value the selected
cells would give where the question's words ask for another operation. The question's words come
from `question_hints.question_kind`; nothing here changes the model's answer.
"""

from typing import AbstractSet, List, Sequence, Tuple

from tapas_tf.qa.ask_results import AskResult, format_number
from tapas_tf.qa.question_hints import question_kind

# How the note of a model without an aggregation head begins (`TableQA` replaces it in a pair).
CANNOT_AGGREGATE = "This model can only select cells"
# How to start over, in each place a user asks.
NEW_CONVERSATION = ('start a new conversation (":new" in `ask`, "New conversation" on the web page, '
                    "`Conversation.reset()` in Python) and ask it on its own")
_ASKED = {"sum": "a total", "average": "an average", "count": "how many"}
# A body row with a cell that says only this is the table's own total (or overall) row.
TOTAL_ROW_WORDS = frozenset({"total", "totals", "sum", "overall", "all", "grand total", "total:"})


def total_rows(rows: Sequence[Sequence[str]]) -> Tuple[int, ...]:
    """Indices of the rows (lists of cell texts) that are a table's total row ("Total", "Overall")."""
    return tuple(i for i, row in enumerate(rows)
                 if any(" ".join(text.lower().split()) in TOTAL_ROW_WORDS for text in row))


def answer_notes(result: AskResult, has_aggregation_head: bool, follow_up: bool,
                 table_total_rows: AbstractSet[int] = frozenset()) -> Tuple[str, ...]:
    """The notes for `result`, or () when its computation fits its question.

    Args:
      result: the decoded answer (its question, cells, operator and value).
      has_aggregation_head: whether the model that answered can count, add and average.
      follow_up: whether the question was asked after an earlier answer in a conversation.
      table_total_rows: the rows (user's indices) that are the table's own total row (`total_rows`):
        a count or a sum over cells that include it counts the total twice.
    """
    kind = question_kind(result.question)
    if kind == "comparison":
        return (_comparison_note(result),)
    if kind not in _ASKED:
        return ()
    if not has_aggregation_head:
        notes = [_cannot_aggregate_note(result, kind, follow_up)]
    else:
        notes = [_operator_note(result, kind)]
    notes.append(_total_row_note(result, kind, table_total_rows))
    return tuple(note for note in notes if note)


def _total_row_note(result: AskResult, kind: str, table_total_rows: AbstractSet[int]) -> str:
    """When a total or count covers the table's own total row: what that row holds."""
    in_total = [cell for cell in result.cells if cell.row in table_total_rows]
    if not in_total or len(result.cells) < 2 or kind not in ("sum", "count"):
        return ""
    cell = in_total[0]
    rest = [c for c in result.cells if c.row not in table_total_rows]
    note = (f"The selected cells include the table's own total row (row {cell.row}), whose "
            f"{cell.column_name or 'cell'} is {cell.text}: that may be the answer")
    numbers = [c.number for c in rest if c.number is not None]
    if kind == "sum" and numbers and len(numbers) == len(rest):
        note += f"; the other {_cells(len(rest))} add up to {format_number(sum(numbers))}"
    elif kind == "count":
        note += f"; without it, {_cells(len(rest))} remain" + ("s" if len(rest) == 1 else "")
    return note + "."


def _numbers(result: AskResult) -> List[float]:
    return [cell.number for cell in result.cells if cell.number is not None]


def _all_numbers(result: AskResult) -> List[float]:
    """The selected cells' numbers when every selected cell holds one, else []."""
    numbers = _numbers(result)
    return numbers if result.cells and len(numbers) == len(result.cells) else []


def _cells(count: int) -> str:
    return f"{count} selected cell" + ("" if count == 1 else "s")


def _what_they_give(kind: str, numbers: Sequence[float]) -> str:
    if kind == "sum":
        return f"their values add up to {format_number(sum(numbers))}"
    if kind == "average":
        return f"their values average {format_number(sum(numbers) / len(numbers))}"
    return f"there are {len(numbers)}"


def _comparison_note(result: AskResult) -> str:
    note = ("This question asks for a difference, a ratio or a comparison, which TAPAS cannot compute: it "
            "can only select cells and count, add or average them")
    if result.operator != "NONE":
        note += f"; the {result.operator} shown is not the answer asked for"
    numbers = _numbers(result)
    if len(result.cells) == 2 and len(numbers) == 2:
        low, high = sorted(numbers)
        note += (f". The two selected cells hold {format_number(numbers[0])} and "
                 f"{format_number(numbers[1])}: they differ by {format_number(high - low)}")
        if low > 0:
            note += f", and one is {format_number(high / low)} times the other"
    elif result.cells:
        note += ". The answer shows the cells it found; compute the rest from them"
    return note + "."


def _cannot_aggregate_note(result: AskResult, kind: str, follow_up: bool) -> str:
    if follow_up:
        note = ("Counting, totals and averages are computed only for a first question, not a follow-up: "
                f"this answer shows cells. To compute it, {NEW_CONVERSATION}")
    else:
        note = (f"{CANNOT_AGGREGATE}, not count, add or average them, so this answer shows "
                "cells. For a computed answer, pair it with a model that aggregates "
                "(--aggregation_model_dir, as the default model is paired)")
    numbers = _all_numbers(result)
    if kind == "count" and len(result.cells) > 1:
        note += f". There are {len(result.cells)} selected cells"
    elif kind in ("sum", "average") and len(numbers) > 1:
        note += f". Of the {_cells(len(numbers))}, {_what_they_give(kind, numbers)}"
    return note + "."


def _operator_note(result: AskResult, kind: str) -> str:
    """A note when the model's operator is not the one the question's words ask for, else ""."""
    numbers = _all_numbers(result)
    asked = _ASKED[kind]
    if kind in ("sum", "average") and numbers:
        done = {"COUNT": "counted", "NONE": "selected", "SUM": "added",
                "AVERAGE": "averaged"}[result.operator]
        wanted = {"sum": "SUM", "average": "AVERAGE"}[kind]
        if result.operator == wanted or (result.operator == "NONE" and len(numbers) == 1):
            return ""
        if kind == "sum" and result.operator == "COUNT":
            # "how many medals in total" may mean a count of rows or a sum of the medal column.
            return (f"This question asks for a total: the model counted the {_cells(len(numbers))} (COUNT = "
                    f"{len(numbers)}); if the total of their values is meant, "
                    f"{_what_they_give(kind, numbers)}.")
        return (f"This question asks for {asked}, but the model {done} the {_cells(len(numbers))} "
                f"({result.operator}) instead; {_what_they_give(kind, numbers)}.")
    if kind == "count" and result.operator == "NONE" and len(result.cells) > 1:
        return (f"This question asks how many, but the model selected {len(result.cells)} cells without "
                f"counting them: there are {len(result.cells)}.")
    return ""
