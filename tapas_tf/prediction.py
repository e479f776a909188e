"""Turns the model's per-token outputs for one example into an answer.

The model gives a selection probability per token and, with an aggregation
head, logits over the operators NONE, SUM, AVERAGE and COUNT. Decoding:

1. `cell_probabilities`: the probability of a table body cell is the mean of its
   tokens' probabilities.
2. `decode_prediction`: the selected cells are those above a threshold; the
   operator is the argmax of the aggregation logits (NONE without that head).
3. `execute`: applies the operator to the selected cells of the table.

Predictions are stored as TSV (`write_predictions_tsv`, `read_predictions_tsv`)
with SQA-style answer coordinates, so files are readable by people, by pandas
and by the original SQA evaluation conventions.

Coordinates are 0-based `(row, column)` pairs over the table *body*: token row
id 1 is body row 0 (row id 0 is the header or the question), token column id 1
is column 0 (column id 0 is the question or padding).

Pure NumPy and Python: nothing here needs TensorFlow.
"""

import ast
import csv
import dataclasses
import math
import re
from typing import Iterable, Mapping, Optional, Sequence, Union

import numpy as np

from tapas_tf.protos import interaction_pb2

NONE, SUM, AVERAGE, COUNT = 0, 1, 2, 3
AGGREGATION_NAMES = ("NONE", "SUM", "AVERAGE", "COUNT")

Coordinate = tuple[int, int]
# Cell texts for NONE, a number for SUM / AVERAGE / COUNT.
Answer = Union[tuple[str, ...], float]

TSV_COLUMNS = (
    "question_id",
    "answer_coordinates",
    "answer",
    "aggregation",
    "aggregation_probabilities",
    "cell_probabilities",
)

# A plain decimal number with optional thousands separators, e.g. "-1,234.5".
_THOUSANDS_NUMBER = re.compile(r"^[-+]?\d{1,3}(,\d{3})+(\.\d*)?$")
_SQA_COORDINATE = re.compile(r"^\((\d+), (\d+)\)$")
_CELL_PROBABILITY = re.compile(r"^(\d+),(\d+):(\S+)$")


@dataclasses.dataclass(frozen=True)
class Prediction:
    """The decoded answer to one question.

    Attributes:
      question_id: the question's id, e.g. "nt-639-1_2".
      coordinates: selected body cells, sorted `(row, column)` pairs.
      aggregation: operator id, NONE=0, SUM=1, AVERAGE=2, COUNT=3.
      aggregation_probabilities: softmax of the aggregation logits, one per
        operator; empty when the model has no aggregation head.
      cell_probabilities: `(row, column) -> probability` for every body cell of
        the encoded table.
      answer: the executed answer: cell texts for NONE, a number otherwise;
        None when the prediction was decoded without its table.
    """

    question_id: str
    coordinates: tuple[Coordinate, ...]
    aggregation: int
    aggregation_probabilities: tuple[float, ...]
    cell_probabilities: Mapping[Coordinate, float]
    answer: Optional[Answer] = None

    def __post_init__(self):
        # Normalise the containers so that equal predictions compare equal
        # whatever sequence types the caller used.
        coordinates = tuple(sorted(_check_coordinate(c) for c in self.coordinates))
        object.__setattr__(self, "coordinates", coordinates)
        if self.aggregation not in range(len(AGGREGATION_NAMES)):
            raise ValueError(
                f"aggregation must be in 0..3 (NONE/SUM/AVERAGE/COUNT), got {self.aggregation!r}"
            )
        object.__setattr__(self, "aggregation", int(self.aggregation))
        object.__setattr__(
            self,
            "aggregation_probabilities",
            tuple(float(p) for p in self.aggregation_probabilities),
        )
        object.__setattr__(
            self,
            "cell_probabilities",
            {_check_coordinate(k): float(v) for k, v in sorted(self.cell_probabilities.items())},
        )
        object.__setattr__(self, "answer", _check_answer(self.answer))


def _check_coordinate(coordinate) -> Coordinate:
    try:
        row, column = coordinate
        valid = all(int(x) == x and x >= 0 for x in (row, column))
    except (TypeError, ValueError):
        valid = False
    if not valid:
        raise ValueError(f"a coordinate is a pair of non-negative ints, got {coordinate!r}")
    return int(row), int(column)


def _check_answer(answer) -> Optional[Answer]:
    if answer is None:
        return None
    if isinstance(answer, bool):
        raise ValueError(f"an answer is a sequence of cell texts or a number, got {answer!r}")
    if isinstance(answer, (float, int, np.floating, np.integer)):
        return float(answer)
    if not isinstance(answer, (tuple, list)) or not all(isinstance(t, str) for t in answer):
        raise ValueError(f"an answer is a sequence of cell texts or a number, got {answer!r}")
    return tuple(answer)


def _check_token_arrays(**arrays) -> dict[str, np.ndarray]:
    """Converts to numpy and checks all arrays are 1-D of the same length."""
    converted = {name: np.asarray(value) for name, value in arrays.items()}
    lengths = {name: value.shape for name, value in converted.items()}
    shapes = set(lengths.values())
    if len(shapes) != 1 or len(next(iter(shapes))) != 1:
        raise ValueError(
            f"expected 1-D arrays [seq_len] of one example with equal lengths, got shapes {lengths}"
        )
    return converted


def cell_probabilities(
    probabilities: np.ndarray,
    column_ids: np.ndarray,
    row_ids: np.ndarray,
    input_mask: np.ndarray,
) -> dict[Coordinate, float]:
    """Averages token probabilities per body cell.

    Args:
      probabilities: <float32>[seq_len] selection probability of every token.
      column_ids: <int32>[seq_len] 1-based column of every token, 0 for the
        question and padding.
      row_ids: <int32>[seq_len] 1-based body row, 0 for question and header.
      input_mask: <int32>[seq_len] 1 for real tokens, 0 for padding.

    Returns:
      `(row, column) -> mean probability of the cell's tokens`, 0-based
      coordinates, keys in sorted order. Question, header and padding tokens
      are ignored.
    """
    arrays = _check_token_arrays(
        probabilities=probabilities, column_ids=column_ids, row_ids=row_ids, input_mask=input_mask
    )
    in_body = (arrays["row_ids"] > 0) & (arrays["column_ids"] > 0) & (arrays["input_mask"] == 1)
    rows = arrays["row_ids"][in_body] - 1
    columns = arrays["column_ids"][in_body] - 1
    values = arrays["probabilities"][in_body].astype(np.float64)
    totals: dict[Coordinate, list[float]] = {}
    for row, column, value in zip(rows.tolist(), columns.tolist(), values.tolist()):
        totals.setdefault((row, column), []).append(value)
    return {key: math.fsum(v) / len(v) for key, v in sorted(totals.items())}


def _softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits.astype(np.float64) - np.max(logits)
    exp = np.exp(shifted)
    return exp / exp.sum()


def decode_prediction(
    question_id: str,
    probabilities: np.ndarray,
    column_ids: np.ndarray,
    row_ids: np.ndarray,
    input_mask: np.ndarray,
    aggregation_logits: Optional[np.ndarray] = None,
    threshold: float = 0.5,
    table: Optional[interaction_pb2.Table] = None,
) -> Prediction:
    """Decodes one example's model outputs into a `Prediction`.

    Args:
      question_id: id of the question.
      probabilities, column_ids, row_ids, input_mask: <[seq_len]> as in
        `cell_probabilities`.
      aggregation_logits: <float32>[num_agg] with 1 <= num_agg <= 4 logits over
        NONE, SUM, AVERAGE, COUNT (in that order); None without an
        aggregation head, which means NONE.
      threshold: a cell is selected when its probability is strictly greater.
      table: when given, the answer is executed on it (see `execute`);
        otherwise `Prediction.answer` is None.

    Returns:
      The prediction, coordinates sorted.
    """
    cells = cell_probabilities(probabilities, column_ids, row_ids, input_mask)
    coordinates = tuple(key for key, p in cells.items() if p > threshold)
    aggregation, aggregation_probabilities = NONE, ()
    if aggregation_logits is not None:
        logits = np.asarray(aggregation_logits)
        if logits.ndim != 1 or not 1 <= logits.shape[0] <= len(AGGREGATION_NAMES):
            raise ValueError(
                "aggregation_logits must be <float32>[num_agg] with 1 <= num_agg <= 4, "
                f"got shape {logits.shape}"
            )
        aggregation = int(np.argmax(logits))
        aggregation_probabilities = tuple(_softmax(logits).tolist())
    answer = None if table is None else execute(coordinates, aggregation, table)
    return Prediction(
        question_id=question_id,
        coordinates=coordinates,
        aggregation=aggregation,
        aggregation_probabilities=aggregation_probabilities,
        cell_probabilities=cells,
        answer=answer,
    )


def parse_plain_number(text: str) -> Optional[float]:
    """Parses "12", "-3.5", "1e3" or "1,234.5" as a finite float, else None.

    Commas are only accepted as thousands separators in groups of three
    ("1,234"), so "1,2" is not a number. Units, currency signs and percent
    signs are not stripped: such texts are not plain numbers.
    """
    text = text.strip()
    if "," in text:
        if not _THOUSANDS_NUMBER.match(text):
            return None
        text = text.replace(",", "")
    if "_" in text:  # float() would accept "1_000".
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def cell_number(cell: interaction_pb2.Cell) -> Optional[float]:
    """The cell's number: its annotated float value, else its text parsed plainly.

    A cell annotated with a date (not a float) falls back to its text, so a
    year written "1998" still counts as 1998.
    """
    if cell.numeric_value.HasField("float_value"):
        return float(cell.numeric_value.float_value)
    return parse_plain_number(cell.text)


def _table_cell(table: interaction_pb2.Table, coordinate: Coordinate) -> interaction_pb2.Cell:
    row, column = coordinate
    if not 0 <= row < len(table.rows) or not 0 <= column < len(table.rows[row].cells):
        raise ValueError(
            f"coordinate {coordinate} is outside table {table.table_id!r} with "
            f"{len(table.rows)} body rows and {len(table.columns)} columns"
        )
    return table.rows[row].cells[column]


def execute(
    coordinates: Sequence[Coordinate], aggregation: int, table: interaction_pb2.Table
) -> Answer:
    """Applies an aggregation operator to the selected cells of `table`.

    * NONE: the cells' texts, in the order of `coordinates`.
    * COUNT: the number of selected cells (numeric or not), as a float.
    * SUM: the sum of the cells' numbers (see `cell_number`); cells without a
      number are skipped. No number at all (including an empty selection)
      sums to 0.0.
    * AVERAGE: the mean of the cells' numbers over the cells that have one
      (cells without a number are neither summed nor counted). No number at
      all gives NaN, which matches no gold answer.

    Raises:
      ValueError: unknown operator or a coordinate outside the table.
    """
    cells = [_table_cell(table, _check_coordinate(c)) for c in coordinates]
    if aggregation == NONE:
        return tuple(cell.text for cell in cells)
    if aggregation == COUNT:
        return float(len(cells))
    numbers = [n for n in (cell_number(cell) for cell in cells) if n is not None]
    if aggregation == SUM:
        return math.fsum(numbers)
    if aggregation == AVERAGE:
        return math.fsum(numbers) / len(numbers) if numbers else math.nan
    raise ValueError(f"aggregation must be in 0..3 (NONE/SUM/AVERAGE/COUNT), got {aggregation!r}")


def coordinates_to_label_ids(
    coordinates: Iterable[Coordinate], column_ids: np.ndarray, row_ids: np.ndarray
) -> np.ndarray:
    """Labels the tokens of the given cells, e.g. to feed an answer back in SQA.

    Args:
      coordinates: 0-based `(row, column)` body cells.
      column_ids: <int32>[seq_len] 1-based column ids (0: question, padding).
      row_ids: <int32>[seq_len] 1-based body row ids (0: question, header).

    Returns:
      <int32>[seq_len]: 1 on every token of a listed cell, 0 elsewhere. A
      listed cell that has no tokens (it was trimmed from the sequence) labels
      nothing.
    """
    arrays = _check_token_arrays(column_ids=column_ids, row_ids=row_ids)
    rows, columns = arrays["row_ids"], arrays["column_ids"]
    labels = np.zeros(rows.shape, dtype=np.int32)
    for row, column in (_check_coordinate(c) for c in coordinates):
        labels[(rows == row + 1) & (columns == column + 1)] = 1
    return labels


# --- TSV ---------------------------------------------------------------------


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
