"""Weak supervision for WikiTableQuestions: from answer texts to answer cells.

WTQ gives each question its answer as texts only. Training the cell selection
needs the cells, so each answer text is matched against the body cells of the
table, from strict to loose normalisation (`LEVELS`):

  exact     the texts with outer white space stripped are equal
  case      ... lower-cased, runs of white space collapsed
  official  ... the WTQ evaluator's normalisation (`normalize_answer_text`):
            accents and typographic quotes folded, trailing "[1]", "†" and
            " (...)" removed, outer quotes and a final period removed
  number    both texts (after `official`) are the same plain number
            ("1,000" = "1000", "2.50" = "2.5"), or the same whole-text date
            ("1998-11-10" = "November 10, 1998"; WTQ's "xx" parts allowed:
            `wtq_dates.parse_date` with written dates)

The rule. A cell and an answer match at the strictest level where their keys
meet; that level's index is the cost of pairing them. For k = 0, 1, ... the
answers are assigned to DISTINCT cells with `linear_sum_assignment`, using only
pairs that match at a level <= k, minimising the summed cost (so strict pairs
win over loose ones). The first k where every answer gets a cell decides: its
name is the result's `level`. The match is AMBIGUOUS when another assignment
at that k has the same minimal cost but a different SET of cells (the same
cells given to answers in another order is not ambiguous). Otherwise it is
MATCHED, with one coordinate per answer, in answer order. No such k: NO_MATCH.

  | Team   | Points |   answer "Lions"  -> (0, 0), level exact
  |--------|--------|   answer "lions"  -> (0, 0), level case
  | Lions  | 1,000  |   answer "1000"   -> (0, 1), level number
  | Tigers | 12     |   answer "12"     -> ambiguous: (1, 1) and (2, 0) both
  | 12     | 7 [1]  |                      match exactly, so the cell is a guess
  answers "7", "12": (2, 1) at level official and (1, 1) or (2, 0) at exact:
  two optimal cell sets, ambiguous. Answers "Tigers", "Tigers": no_match
  (one cell cannot serve two answers).

Coordinates are `(row, column)` of body cells, rows counted from the first
body row (as `AnswerCoordinate.row_index` / `column_index`). Empty texts never
match. Numbers are compared exactly as parsed floats: both sides are written
numbers, not computed ones.

`apply_weak_supervision` writes the result into the questions of an
Interaction. A question whose single answer is a number (`float_answer`) is
never dropped: when its cells are not found or are ambiguous, its coordinates
stay empty and the model learns the number through the answer loss.
"""

import collections
import dataclasses
import functools
import math
from typing import Callable, Dict, FrozenSet, Hashable, List, Optional, Sequence, Tuple

import numpy as np
from scipy.optimize import linear_sum_assignment

from tapas_tf.data.number_parsing import parse_plain_number
from tapas_tf.data.protos import interaction_pb2
from tapas_tf.data.text_normalization import collapse_whitespace, normalize_answer_text
from tapas_tf.data.wtq_dates import parse_date

MATCHED = "matched"
NO_MATCH = "no_match"
AMBIGUOUS = "ambiguous"
TRAIN = "train"
EVAL = "eval"
MODES = (TRAIN, EVAL)
# Drop reasons returned by `apply_weak_supervision` in train mode.
DROP_NO_MATCH = "no_match"
DROP_AMBIGUOUS = "ambiguous_match"

Keys = FrozenSet[Hashable]
Coordinate = Tuple[int, int]

# The cost of a forbidden pair: larger than any sum of level costs.
_FORBIDDEN = 1e9
_CACHE_SIZE = 1 << 16


def _single(text: str) -> Keys:
    return frozenset((text,)) if text else frozenset()


@functools.lru_cache(maxsize=_CACHE_SIZE)
def exact_keys(text: str) -> Keys:
    """The text with outer white space stripped."""
    return _single(text.strip())


@functools.lru_cache(maxsize=_CACHE_SIZE)
def case_keys(text: str) -> Keys:
    """The text lower-cased, with white space collapsed."""
    return _single(collapse_whitespace(text).lower())


@functools.lru_cache(maxsize=_CACHE_SIZE)
def official_keys(text: str) -> Keys:
    """The WTQ evaluator's normal form of the text (`normalize_answer_text`)."""
    return _single(normalize_answer_text(text))


@functools.lru_cache(maxsize=_CACHE_SIZE)
def number_keys(text: str) -> Keys:
    """The plain number and the whole-text date of the text's official form."""
    normalized = normalize_answer_text(text)
    if not normalized:
        return frozenset()
    keys: List[Hashable] = []
    date = parse_date(normalized, written=True)
    if date is not None:
        keys.append(("date", date))
    number = parse_plain_number(normalized)
    if number is not None:
        keys.append(("number", 0.0 if number == 0 else number))  # -0.0 == 0.0, one key.
    return frozenset(keys)


@dataclasses.dataclass(frozen=True)
class Level:
    """A normalisation level: its name and the match keys of a text (empty: matches nothing)."""

    name: str
    keys: Callable[[str], Keys]


LEVELS: Tuple[Level, ...] = (
    Level("exact", exact_keys),
    Level("case", case_keys),
    Level("official", official_keys),
    Level("number", number_keys),
)


@dataclasses.dataclass(frozen=True)
class MatchResult:
    """The cells found for the answers of one question.

    Attributes:
      coordinates: one (row, column) per answer, in answer order; empty unless matched.
      level: the name of the loosest level the chosen match needs (None for no_match).
      status: MATCHED, NO_MATCH or AMBIGUOUS.
      reason: a counter name, e.g. "matched_exact", "no_match_answer_not_found",
        "no_match_answers_share_cells", "no_match_no_answers", "ambiguous_number".
    """

    coordinates: Tuple[Coordinate, ...]
    level: Optional[str]
    status: str
    reason: str


def body_cells(table: interaction_pb2.Table) -> List[Tuple[Coordinate, str]]:
    """The ((row, column), text) of every body cell, row by row."""
    return [((r, c), cell.text) for r, row in enumerate(table.rows) for c, cell in enumerate(row.cells)]


def cost_matrix(cell_texts: Sequence[str], answer_texts: Sequence[str]) -> np.ndarray:
    """costs[i, j]: the index of the strictest level at which answer i matches cell j, else inf."""
    costs = np.full((len(answer_texts), len(cell_texts)), np.inf)
    for index, level in enumerate(LEVELS):
        cells_by_key: Dict[Hashable, List[int]] = collections.defaultdict(list)
        for j, text in enumerate(cell_texts):
            for key in level.keys(text):
                cells_by_key[key].append(j)
        for i, answer in enumerate(answer_texts):
            for key in level.keys(answer):
                for j in cells_by_key.get(key, ()):
                    costs[i, j] = min(costs[i, j], index)
    return costs


def _assign(costs: np.ndarray) -> Optional[Tuple[float, np.ndarray]]:
    """(total cost, cell of each answer) of an optimal assignment to distinct cells, or None."""
    if costs.shape[0] > costs.shape[1]:
        return None
    finite = np.where(np.isfinite(costs), costs, _FORBIDDEN)
    rows, cols = linear_sum_assignment(finite)
    if np.any(finite[rows, cols] >= _FORBIDDEN):
        return None
    return float(finite[rows, cols].sum()), cols[np.argsort(rows)]


def _has_other_optimum(costs: np.ndarray, total: float, cells: np.ndarray) -> bool:
    """True if an assignment of the same total uses a different set of cells.

    Such an assignment leaves out some chosen cell; forbidding each chosen cell
    in turn and solving again finds it, if there is one.
    """
    for cell in set(cells.tolist()):
        without = costs.copy()
        without[:, cell] = np.inf
        other = _assign(without)
        if other is not None and math.isclose(other[0], total):
            return True
    return False


def match_answers(table: interaction_pb2.Table, answer_texts: Sequence[str]) -> MatchResult:
    """Finds one distinct body cell per answer text (see the module docstring for the rule)."""
    if not answer_texts:
        return MatchResult((), None, NO_MATCH, "no_match_no_answers")
    cells = body_cells(table)
    costs = cost_matrix([text for _, text in cells], answer_texts)
    if not np.all(np.isfinite(costs).any(axis=1)):
        return MatchResult((), None, NO_MATCH, "no_match_answer_not_found")
    for index, level in enumerate(LEVELS):
        allowed = np.where(costs <= index, costs, np.inf)
        found = _assign(allowed)
        if found is None:
            continue
        total, chosen = found
        if _has_other_optimum(allowed, total, chosen):
            return MatchResult((), level.name, AMBIGUOUS, f"ambiguous_{level.name}")
        coordinates = tuple(cells[j][0] for j in chosen.tolist())
        return MatchResult(coordinates, level.name, MATCHED, f"matched_{level.name}")
    return MatchResult((), None, NO_MATCH, "no_match_answers_share_cells")


def float_answer(answer_texts: Sequence[str]) -> Optional[float]:
    """The number of a single answer that is a plain number ("1,000", "-3.5"), else None."""
    if len(answer_texts) != 1:
        return None
    return parse_plain_number(answer_texts[0])


class MatchCounts(collections.Counter):
    """Counts of weak supervision outcomes.

    Keys: "questions"; "kept" or "dropped_<drop reason>"; and each `MatchResult.reason`.
    """

    def add(self, result: MatchResult, drop_reason: Optional[str]) -> None:
        self["questions"] += 1
        self["kept" if drop_reason is None else f"dropped_{drop_reason}"] += 1
        self[result.reason] += 1

    @property
    def kept_fraction(self) -> float:
        return self["kept"] / self["questions"] if self["questions"] else 0.0


def supervise_question(table: interaction_pb2.Table, question: interaction_pb2.Question,
                       mode: str) -> Tuple[MatchResult, Optional[str]]:
    """Sets the answer coordinates and `is_valid` of one question; returns (match, drop reason).

    The drop reason is None in eval mode, and in train mode when the question is kept.
    """
    answer = question.answer
    result = match_answers(table, list(answer.answer_texts))
    has_float = answer.HasField("float_value") and math.isfinite(answer.float_value)
    del answer.answer_coordinates[:]
    for row, column in result.coordinates:
        answer.answer_coordinates.add(row_index=row, column_index=column)
    usable = result.status == MATCHED or has_float
    # An evaluation question is scored on its answer texts, so it is always predicted: its
    # coordinates are a best effort, not a label the conversion should refuse.
    answer.is_valid = usable or mode == EVAL
    if answer.is_valid:
        return result, None
    return result, DROP_AMBIGUOUS if result.status == AMBIGUOUS else DROP_NO_MATCH


def apply_weak_supervision(interaction: interaction_pb2.Interaction, mode: str,
                           counts: Optional[MatchCounts] = None) -> Optional[str]:
    """Fills the answer coordinates of every question of `interaction` from its answer texts.

    Args:
      interaction: modified in place: `answer_coordinates` and `is_valid` are set (in eval
        mode `is_valid` is always true: every question is predicted),
        `answer_texts` and `float_value` are left as they are.
      mode: "train": returns a drop reason ("no_match" or "ambiguous_match") for the
        first question that has neither a unique match nor a float answer; "eval":
        keeps every question (unmatched ones have no coordinates) and returns None.
      counts: if given, every question's outcome is added to it.

    Returns:
      None when the interaction is kept, else why it should be dropped.
    """
    if mode not in MODES:
        raise ValueError(f"unknown weak supervision mode {mode!r}, expected one of {MODES}")
    drop = None
    for question in interaction.questions:
        result, reason = supervise_question(interaction.table, question, mode)
        if counts is not None:
            counts.add(result, reason)
        drop = drop or reason
    return drop
