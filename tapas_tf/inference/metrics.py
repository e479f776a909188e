"""Answer accuracy: denotation matching (WTQ, WikiSQL) and SQA sequence metrics.

Denotation matching follows the conventions of the WikiTableQuestions
evaluator: every answer string is normalised (`normalize_answer_text`) and read
as a number if it parses as one, else as a date if it is one in the evaluator's
"yyyy-mm-dd" form (`wtq_dates.parse_date`: "2001-5-3", "xx-05-03"; a date of
only a year, "1998-xx-xx", is that number), else as a string. Written dates
("May 3, 2001") are strings, as they are to the evaluator. Two values match
when their normalised strings are equal, or both are numbers within the
tolerance, or both are the same date. Answers are lists compared order-free,
as multisets: the same number of values, each predicted value paired with a
distinct gold value.

Pure Python: nothing here needs TensorFlow.
"""

import collections
import dataclasses
import json
import math
import os
import re
from typing import Any, Iterable, Mapping, Optional, Sequence, Union

import numpy as np

from tapas_tf.data.number_parsing import DateTuple, parse_plain_number
from tapas_tf.data.text_normalization import normalize_answer_text
from tapas_tf.data.wtq_dates import parse_date

# Numbers match within this relative tolerance; the absolute one only matters
# next to zero, where a relative tolerance alone would demand exact equality.
RELATIVE_TOLERANCE = 1e-6
ABSOLUTE_TOLERANCE = 1e-9

_SQA_QUESTION_ID = re.compile(r"^(?P<sequence>.+-\d+)_(?P<position>\d+)$")


@dataclasses.dataclass(frozen=True)
class _Value:
    """An answer value: its normalised text and, if any, its number or date."""

    text: Optional[str]
    number: Optional[float] = None
    date: Optional[DateTuple] = None

    def matches(self, other: "_Value") -> bool:
        if self.text is not None and self.text == other.text:
            return True
        if self.number is not None and other.number is not None:
            return numbers_match(self.number, other.number)
        return self.date is not None and self.date == other.date


def numbers_match(a: float, b: float) -> bool:
    """True when two finite numbers are equal within the tolerances."""
    return math.isclose(a, b, rel_tol=RELATIVE_TOLERANCE, abs_tol=ABSOLUTE_TOLERANCE)


def parse_answer_number(text: str) -> Optional[float]:
    """The number of an answer string after normalisation ("1,000." -> 1000.0, "1998-xx-xx" -> 1998.0)."""
    return _to_value(text).number


def _to_value(text: str) -> _Value:
    """The value of an answer string (see the module docstring)."""
    normalized = normalize_answer_text(text)
    number = parse_plain_number(normalized)
    if number is not None:
        return _Value(normalized, number=number)
    date = parse_date(normalized)
    if date is not None and date[1:] == (None, None):
        # The official evaluator reads a date of only a year ("1998-xx-xx") as that number.
        return _Value(normalized, number=float(date[0]))
    return _Value(normalized, date=date)


def _multisets_match(predicted: Sequence[_Value], gold: Sequence[_Value]) -> bool:
    """True if every predicted value pairs with a distinct gold value (and lengths agree).

    Bipartite matching by augmenting paths: "matches" is not transitive near
    the tolerance, so a greedy pairing could miss a valid assignment.
    """
    if len(predicted) != len(gold):
        return False
    gold_owner: list[Optional[int]] = [None] * len(gold)

    def assign(i: int, seen: set[int]) -> bool:
        for j, value in enumerate(gold):
            if j in seen or not predicted[i].matches(value):
                continue
            seen.add(j)
            if gold_owner[j] is None or assign(gold_owner[j], seen):
                gold_owner[j] = i
                return True
        return False

    return all(assign(i, set()) for i in range(len(predicted)))


def _is_number(value: Any) -> bool:
    return isinstance(value, (float, int, np.floating, np.integer)) and not isinstance(
        value, (bool, np.bool_)
    )


def denotation_matches(
    predicted: Union[Sequence[str], float],
    gold_texts: Sequence[str],
    gold_float: Optional[float] = None,
) -> bool:
    """True if a predicted answer denotes the gold answer.

    Args:
      predicted: the executed answer: cell texts (for NONE), or a number (for
        SUM, AVERAGE, COUNT). NaN never matches.
      gold_texts: the gold answer texts (`Answer.answer_texts`).
      gold_float: the gold number (`Answer.float_value`) or None / NaN.

    A number matches if it equals `gold_float`, or if there is exactly one gold
    text and it parses to the same number. Cell texts match `gold_texts` as
    multisets (order-free) of values; when `gold_texts` is empty but
    `gold_float` is set, the gold answer is that one number.

    Raises:
      ValueError: a bare string where a sequence of strings is expected.
    """
    if isinstance(gold_texts, str) or not all(isinstance(t, str) for t in gold_texts):
        raise ValueError(f"gold_texts must be a sequence of strings, got {gold_texts!r}")
    has_gold_float = gold_float is not None and not math.isnan(gold_float)
    if _is_number(predicted):
        if math.isnan(predicted):
            return False
        if has_gold_float and numbers_match(float(predicted), float(gold_float)):
            return True
        if len(gold_texts) != 1:
            return False
        gold_number = parse_answer_number(gold_texts[0])
        return gold_number is not None and numbers_match(float(predicted), gold_number)
    if isinstance(predicted, str) or not all(isinstance(t, str) for t in predicted):
        raise ValueError(
            f"predicted must be a sequence of cell texts or a number, got {predicted!r}"
        )
    if gold_texts:
        gold = [_to_value(text) for text in gold_texts]
    elif has_gold_float:
        gold = [_Value(None, number=float(gold_float))]
    else:
        gold = []
    return _multisets_match([_to_value(text) for text in predicted], gold)


def parse_sqa_question_id(question_id: str) -> tuple[str, int]:
    """Splits "nt-639-1_2" into the sequence "nt-639-1" and the position 2.

    SQA question ids are "{table question id}-{annotator}_{position}".

    Raises:
      ValueError: naming the id when it does not have that form.
    """
    match = _SQA_QUESTION_ID.match(question_id) if isinstance(question_id, str) else None
    if not match:
        raise ValueError(
            f"malformed SQA question id {question_id!r}, "
            "expected '{id}-{annotator}_{position}' such as 'nt-639-1_2'"
        )
    return match.group("sequence"), int(match.group("position"))


def _accuracy(values: list[bool]) -> Optional[float]:
    return sum(values) / len(values) if values else None


def sqa_metrics(results: Iterable[tuple[str, bool]]) -> dict[str, Any]:
    """Question, sequence and per-position accuracy of SQA answers.

    Args:
      results: `(question_id, correct)` pairs, ids as in `parse_sqa_question_id`.

    Returns:
      {"ALL": accuracy over questions, "SEQ": fraction of sequences whose
      given questions are all correct, "Q1", "Q2", "Q3": accuracy at positions
      0, 1, 2, "Q4+": at positions >= 3, "num_questions", "num_sequences"}.
      A position bucket without questions is None.

    Raises:
      ValueError: no results, a malformed or repeated question id.
    """
    by_sequence: dict[str, list[bool]] = collections.defaultdict(list)
    by_bucket: dict[str, list[bool]] = {"Q1": [], "Q2": [], "Q3": [], "Q4+": []}
    seen: set[str] = set()
    for question_id, correct in results:
        sequence, position = parse_sqa_question_id(question_id)
        if question_id in seen:
            raise ValueError(f"question id {question_id!r} appears more than once")
        seen.add(question_id)
        correct = bool(correct)
        by_sequence[sequence].append(correct)
        by_bucket[("Q1", "Q2", "Q3", "Q4+")[min(position, 3)]].append(correct)
    if not seen:
        raise ValueError("sqa_metrics needs at least one result")
    all_questions = [c for answers in by_sequence.values() for c in answers]
    metrics: dict[str, Any] = {
        "ALL": _accuracy(all_questions),
        "SEQ": _accuracy([all(answers) for answers in by_sequence.values()]),
    }
    metrics.update({name: _accuracy(values) for name, values in by_bucket.items()})
    metrics["num_questions"] = len(all_questions)
    metrics["num_sequences"] = len(by_sequence)
    return metrics


def _json_default(value: Any) -> Any:
    # NumPy scalars are common in metric dicts but not JSON serialisable.
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"metric value {value!r} of type {type(value).__name__} is not JSON")


def write_metrics_json(path: str, metrics: Mapping[str, Any]) -> None:
    """Writes metrics as indented JSON with sorted keys, creating the directory.

    Raises:
      ValueError: a NaN or infinite value (not valid JSON) or a value JSON
        cannot hold.
    """
    try:
        text = json.dumps(
            dict(metrics), indent=2, sort_keys=True, allow_nan=False, default=_json_default
        )
    except (ValueError, TypeError) as e:
        raise ValueError(f"cannot write metrics to {path}: {e}") from e
    directory = os.path.dirname(path)
    if directory:
        os.makedirs(directory, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text + "\n")
