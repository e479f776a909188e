"""Turns the model's per-token outputs for one example into an answer.

The model gives a selection probability per token and, with an aggregation
head, logits over the operators NONE, SUM, AVERAGE and COUNT. Decoding:

1. `cell_probabilities`: the probability of a table body cell is the mean of its
   tokens' probabilities.
2. `decode_prediction`: the selected cells are those above a threshold; the
   operator is the argmax of the aggregation logits (NONE without that head).
   Optionally, a NONE answer with no cell above the threshold takes its most
   probable cell (`fallback_to_best_cell`), since an empty answer is never
   right where every question has one (WikiTableQuestions). Optionally, COUNT
   counts the k most probable cells, k the cells' probabilities summed and
   rounded (`expected_count`): the expected count, which is what the answer
   loss of weak supervision trains, where the 0.5 threshold often selects no
   cell at all from an unsure model and answers 0.
3. `execution.execute`: applies the operator to the selected cells of the
   table (the one executor of answers, shared by metrics and the ask API).

Predictions are stored by `prediction_files`.

Coordinates are 0-based `(row, column)` pairs over the table *body*: token row
id 1 is body row 0 (row id 0 is the header or the question), token column id 1
is column 0 (column id 0 is the question or padding).

Pure NumPy and Python: nothing here needs TensorFlow.
"""

import dataclasses
import math
from typing import Any, Dict, Iterable, Mapping, Optional, Tuple

import numpy as np

from tapas_tf.config_fields import option
from tapas_tf.data.protos import interaction_pb2
from tapas_tf.inference.execution import (  # noqa: F401 (re-exported: decoding's vocabulary)
    AGGREGATION_NAMES,
    AVERAGE,
    COUNT,
    NONE,
    SUM,
    Answer,
    Coordinate,
    check_coordinate,
    execute,
)


@dataclasses.dataclass(frozen=True)
class DecodingRule:
    """How probabilities become selected cells, in prediction, the ask API and serving.

    The defaults are Google's and Hugging Face's decoding: the cells above 0.5. Every field is an
    option of `TableQA`, `ServingClient` and prediction, and a flag of `ask`, `serve` and `run_task`
    (defined from `flag_specs`, its help the field's): a new rule is a field here with its effect in
    `decode_prediction`, and, if some task should use it by default, a field of that name in its
    `TaskPreset`.

    Attributes:
      threshold: a cell is selected when its probability is strictly greater.
      fallback_to_best_cell: a NONE answer with no cell above the threshold takes
        its most probable cell.
      expected_count: COUNT counts the k most probable cells, k the expected count.
    """

    threshold: float = option(0.5, "A cell is selected when its probability is above this.")
    fallback_to_best_cell: bool = option(
        False, "A NONE answer with no cell above the threshold selects its most probable cell instead of "
        "answering nothing.")
    expected_count: bool = option(
        False, "COUNT counts the k most probable cells, k the sum of the cell probabilities rounded (the "
        "expected count the answer loss trains), instead of the cells above the threshold.")

    @classmethod
    def flag_specs(cls) -> Tuple[Tuple[str, type, str], ...]:
        """(name, type, help) of every option: what command lines define their flags from."""
        return tuple((field.name, field.type if isinstance(field.type, type) else type(field.default),
                      field.metadata["help"]) for field in dataclasses.fields(cls))

    @classmethod
    def for_preset(cls, preset: Any, **overrides) -> "DecodingRule":
        """A task's rule: each option the preset names (`TaskPreset.fallback_to_best_cell`, ...),
        the default otherwise, then the `overrides` that are not None."""
        names = [field.name for field in dataclasses.fields(cls)]
        return cls(**{name: getattr(preset, name) for name in names if hasattr(preset, name)}).with_overrides(
            **overrides)

    @classmethod
    def for_model(cls, config: Any, **overrides) -> "DecodingRule":
        """The rule a model answers users with, from its `TapasConfig` (or its JSON dict), then the `overrides` that
        are not None.

        A model that selects one column (SQA's and WTQ's presets) falls back to its best cell: the
        questions of those tasks always have an answer, and an empty one is always wrong. A model
        trained from answers only (`use_answer_as_supervision`, WTQ's) also counts by the expected
        count, which its answer loss trains.
        """
        def option(name: str) -> bool:  # A TapasConfig, or its JSON as a dict (an export's assets).
            return bool(config.get(name, False) if isinstance(config, Mapping) else getattr(config, name, False))

        answers_only = option("use_answer_as_supervision")
        return cls(fallback_to_best_cell=option("select_one_column") or answers_only,
                   expected_count=answers_only).with_overrides(**overrides)

    def with_overrides(self, **overrides) -> "DecodingRule":
        """This rule with the given options replaced; None leaves an option as it is.

        Raises:
          TypeError: an option that is not a field of DecodingRule.
        """
        names = {field.name for field in dataclasses.fields(self)}
        unknown = sorted(set(overrides) - names)
        if unknown:
            raise TypeError(f"unknown decoding option(s) {unknown}; the options are {sorted(names)}")
        return dataclasses.replace(self, **{k: v for k, v in overrides.items() if v is not None})

    def as_dict(self) -> Dict[str, Any]:
        """Every option by name (what a metrics file records, and `decode` passes on). Options are
        plain values, so a shallow copy: `dataclasses.asdict` deep-copies, on every decoded question."""
        return {field.name: getattr(self, field.name) for field in dataclasses.fields(self)}

    def decode(self, question_id: str, probabilities: np.ndarray, column_ids: np.ndarray, row_ids: np.ndarray,
               input_mask: np.ndarray, aggregation_logits: Optional[np.ndarray] = None,
               table: Optional[interaction_pb2.Table] = None) -> "Prediction":
        """`decode_prediction` with this rule's options."""
        return decode_prediction(question_id, probabilities, column_ids, row_ids, input_mask, aggregation_logits,
                                 table=table, **self.as_dict())


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
        coordinates = tuple(sorted(check_coordinate(c) for c in self.coordinates))
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
            {check_coordinate(k): float(v) for k, v in sorted(self.cell_probabilities.items())},
        )
        object.__setattr__(self, "answer", check_answer(self.answer))


def check_answer(answer) -> Optional[Answer]:
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
    rows = arrays["row_ids"][in_body].astype(np.int64) - 1
    columns = arrays["column_ids"][in_body].astype(np.int64) - 1
    if not rows.size:
        return {}
    # One key per cell, ordered as (row, column): a server decodes every answer, and a loop over
    # tokens in Python cost more than the rest of the decoding.
    width = int(columns.max()) + 1
    keys = rows * width + columns
    counts = np.bincount(keys)
    (cells,) = np.nonzero(counts)
    means = np.bincount(keys, weights=arrays["probabilities"][in_body].astype(np.float64))[cells] / counts[cells]
    return {(key // width, key % width): mean for key, mean in zip(cells.tolist(), means.tolist())}


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
    fallback_to_best_cell: bool = False,
    expected_count: bool = False,
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
      fallback_to_best_cell: when the operator is NONE and no cell is above the
        threshold, select the most probable cell (the first in (row, column)
        order on a tie) instead of answering nothing. Other operators keep an
        empty selection: COUNT of no cells is 0, which can be right.
      expected_count: when the operator is COUNT, select the k most probable
        cells (`expected_count_cells`) instead of those above the threshold, so
        that the executed COUNT is the model's expected count.

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
    if fallback_to_best_cell and not coordinates and aggregation == NONE and cells:
        coordinates = (max(cells, key=cells.get),)
    if expected_count and aggregation == COUNT:
        coordinates = expected_count_cells(cells)
    answer = None if table is None else execute(coordinates, aggregation, table)
    return Prediction(
        question_id=question_id,
        coordinates=coordinates,
        aggregation=aggregation,
        aggregation_probabilities=aggregation_probabilities,
        cell_probabilities=cells,
        answer=answer,
    )


def expected_count_cells(cells: Mapping[Coordinate, float]) -> tuple[Coordinate, ...]:
    """The k most probable cells, k = the sum of all cell probabilities rounded half up.

    Training from answers only regresses this sum (the expected count of
    independently selected cells) onto the gold count, so it is the count the
    model was taught to produce. Ties go to the first cell in (row, column)
    order.

    Args:
      cells: `(row, column) -> probability`, as from `cell_probabilities`.
    """
    count = int(math.floor(math.fsum(cells.values()) + 0.5))
    ranked = sorted(cells, key=lambda key: (-cells[key], key))
    return tuple(ranked[:count])


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
    for row, column in (check_coordinate(c) for c in coordinates):
        labels[(rows == row + 1) & (columns == column + 1)] = 1
    return labels


# A statement classifier's labels (TabFact, Hugging Face): 1 entailed, 0 refuted.
ENTAILED_LABEL = 1


def entailed_probability(logits: np.ndarray) -> np.ndarray:
    """<float64>[batch] P(label 1) from classification logits [batch, 2], a stable softmax."""
    logits = np.asarray(logits, np.float64)
    exp = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return exp[:, ENTAILED_LABEL] / exp.sum(axis=-1)
