"""Prediction files: decoded predictions as a tab-separated file, and back.

Answer coordinates are written as SQA writes them, so files are readable by
people, by pandas and by the original SQA evaluation conventions.
"""

import ast
import csv
import math
import re
from typing import Iterable, Optional, Sequence

from tapas_tf.inference.decoding import (
    AGGREGATION_NAMES,
    Answer,
    Coordinate,
    Prediction,
)

TSV_COLUMNS = (
    "question_id",
    "answer_coordinates",
    "answer",
    "aggregation",
    "aggregation_probabilities",
    "cell_probabilities",
)

_SQA_COORDINATE = re.compile(r"^\((\d+), (\d+)\)$")
_CELL_PROBABILITY = re.compile(r"^(\d+),(\d+):(\S+)$")


def _format_coordinates(coordinates: Sequence[Coordinate]) -> str:
    return str([f"({row}, {column})" for row, column in coordinates])


def _format_answer(answer: Optional[Answer]) -> str:
    if answer is None:
        return ""
    if isinstance(answer, float):
        return repr(answer)  # Exact round trip, "nan" included.
    return str(list(answer))


def _format_prediction(prediction: Prediction) -> dict[str, str]:
    if "\t" in prediction.question_id or "\n" in prediction.question_id:
        raise ValueError(f"question id {prediction.question_id!r} contains a tab or a newline")
    return {
        "question_id": prediction.question_id,
        "answer_coordinates": _format_coordinates(prediction.coordinates),
        "answer": _format_answer(prediction.answer),
        "aggregation": AGGREGATION_NAMES[prediction.aggregation],
        "aggregation_probabilities": " ".join(
            f"{p:.4f}" for p in prediction.aggregation_probabilities
        ),
        "cell_probabilities": " ".join(
            f"{row},{column}:{p:.4f}" for (row, column), p in prediction.cell_probabilities.items()
        ),
    }


def write_predictions_tsv(path: str, predictions: Iterable[Prediction]) -> None:
    """Writes predictions as a tab-separated file with a header row.

    Columns (`TSV_COLUMNS`): question_id; answer_coordinates as SQA writes
    them, "['(0, 1)', '(2, 1)']"; answer as a Python-literal list of cell
    texts, or the number (repr), or empty when not executed; aggregation name;
    aggregation_probabilities space-separated; cell_probabilities as
    space-separated "row,column:p". Probabilities have 4 decimals, so reading
    gives them back rounded to 4 decimals.
    """
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=TSV_COLUMNS, delimiter="\t", lineterminator="\n")
        writer.writeheader()
        for prediction in predictions:
            writer.writerow(_format_prediction(prediction))


def _parse_coordinates(text: str) -> tuple[Coordinate, ...]:
    items = ast.literal_eval(text)
    if not isinstance(items, list):
        raise ValueError(f"answer_coordinates is not a list: {text!r}")
    coordinates = []
    for item in items:
        match = _SQA_COORDINATE.match(item) if isinstance(item, str) else None
        if not match:
            raise ValueError(f"bad answer coordinate {item!r}, expected '(row, column)'")
        coordinates.append((int(match.group(1)), int(match.group(2))))
    return tuple(coordinates)


def _parse_answer(text: str) -> Optional[Answer]:
    if not text:
        return None
    if text.startswith("["):
        texts = ast.literal_eval(text)
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            raise ValueError(f"answer is not a list of strings: {text!r}")
        return tuple(texts)
    return float(text)


def _parse_aggregation(text: str) -> int:
    if text not in AGGREGATION_NAMES:
        raise ValueError(f"unknown aggregation {text!r}, expected one of {AGGREGATION_NAMES}")
    return AGGREGATION_NAMES.index(text)


def _parse_cell_probabilities(text: str) -> dict[Coordinate, float]:
    cells = {}
    for item in text.split():
        match = _CELL_PROBABILITY.match(item)
        if not match:
            raise ValueError(f"bad cell probability {item!r}, expected 'row,column:p'")
        cells[(int(match.group(1)), int(match.group(2)))] = float(match.group(3))
    return cells


def _parse_row(row: dict[str, str]) -> Prediction:
    return Prediction(
        question_id=row["question_id"],
        coordinates=_parse_coordinates(row["answer_coordinates"]),
        aggregation=_parse_aggregation(row["aggregation"]),
        aggregation_probabilities=tuple(
            float(p) for p in row["aggregation_probabilities"].split()
        ),
        cell_probabilities=_parse_cell_probabilities(row["cell_probabilities"]),
        answer=_parse_answer(row["answer"]),
    )


def read_predictions_tsv(path: str) -> list[Prediction]:
    """Reads a file written by `write_predictions_tsv`.

    Raises:
      ValueError: naming the file and line, for a wrong header, a row with the
        wrong number of fields, or a field that does not parse.
    """
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.reader(f, delimiter="\t")
        try:
            return _read_rows(reader, path)
        except csv.Error as e:
            raise ValueError(f"{path}:{reader.line_num}: {e}") from e


def _read_rows(reader, path: str) -> list[Prediction]:
    header = next(reader, None)
    if header is None or tuple(header) != TSV_COLUMNS:
        raise ValueError(f"{path}:1: expected header {TSV_COLUMNS}, got {header}")
    predictions = []
    for fields in reader:
        line = reader.line_num
        if len(fields) != len(TSV_COLUMNS):
            raise ValueError(
                f"{path}:{line}: expected {len(TSV_COLUMNS)} tab-separated fields, "
                f"got {len(fields)}"
            )
        try:
            predictions.append(_parse_row(dict(zip(TSV_COLUMNS, fields))))
        except (ValueError, SyntaxError, TypeError) as e:
            raise ValueError(f"{path}:{line}: {e}") from e
    return predictions


# --- the WikiTableQuestions evaluator's format ---------------------------------------------------


def escape_wtq(text: str) -> str:
    """The WTQ release's TSV escapes: backslash, newline as `\\n`, `|` as `\\p`; tabs become spaces."""
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace("|", "\\p").replace("\t", " ")


def official_values(answer: Optional[Answer]) -> list[str]:
    """The executed answer as the evaluator reads it: cell texts, or one number without a useless
    `.0` (`3`, `2.5`); NaN or no answer is an empty list."""
    if answer is None:
        return []
    if isinstance(answer, float):
        if math.isnan(answer) or math.isinf(answer):
            return []
        return [str(int(answer)) if answer.is_integer() else repr(answer)]
    return list(answer)


def write_official_tsv(path: str, predictions: Iterable[Prediction]) -> None:
    """One line per question for the WikiTableQuestions evaluator: the example id (the question id
    without its `_0` position suffix), then each answer value, tab-separated and escaped."""
    with open(path, "w", encoding="utf-8") as f:
        for prediction in predictions:
            example_id = prediction.question_id[:-2] if prediction.question_id.endswith("_0") else \
                prediction.question_id
            f.write("\t".join([example_id] + [escape_wtq(v) for v in official_values(prediction.answer)]) + "\n")
