"""The answer to a question about a table: cells, operator, executed value, and what was cut.

`decode_answer` turns the model's outputs for one `EncodedQuestion` into an `AskResult`, with the
same decoding (`decoding.decode_prediction`) and the same executor of SUM, AVERAGE and COUNT
(`execution`) as prediction and the metrics. Coordinates in a result are the user's: 0-based
(row, column) of the original table body, even when the model saw a pruned table.
"""

import collections
import dataclasses
import math
from typing import Dict, Optional, Sequence, Tuple

import numpy as np

from tapas_tf.inference import execution
from tapas_tf.inference.decoding import AGGREGATION_NAMES, DecodingRule
from tapas_tf.qa.ask_encoding import EncodedQuestion

Coordinate = Tuple[int, int]
# Distinct cell texts an answer's summary names; past them it says how many others (`answers` has all).
SUMMARY_TEXTS = 20


@dataclasses.dataclass(frozen=True)
class SelectedCell:
    """A cell the model selected: where it is, its text, probability and the number it holds."""

    row: int
    column: int
    column_name: str
    text: str
    probability: float
    number: Optional[float]


@dataclasses.dataclass(frozen=True)
class TableReading:
    """How an answer over a table too big for one example was made (`window_reading`).

    Attributes:
      rows_read, total_rows: the body rows read (all, unless a limit stopped it) and the table's.
      windows_read, windows: the windows asked and planned.
      columns: the names of the kept columns.
      total_columns: the table's columns.
      windows_with_cells: the windows in which the model selected a cell.
      second_pass_rows: the rows asked again to settle a lookup or superlative (0: no second pass).
      limit: the limit that stopped the reading ("max_rows" or "time_budget"), or None.
    """

    rows_read: int
    total_rows: int
    windows_read: int
    windows: int
    columns: Tuple[str, ...]
    total_columns: int
    windows_with_cells: int
    second_pass_rows: int = 0
    limit: Optional[str] = None

    def sentence(self) -> str:
        """How the answer was made, in one sentence."""
        if self.rows_read == self.total_rows:
            text = f"Read all {self.total_rows:,} rows in {self.windows_read:,} windows"
        else:
            text = (f"Read {self.rows_read:,} of the table's {self.total_rows:,} rows in {self.windows_read:,} "
                    "windows")
        text += (f" with {len(self.columns)} of {self.total_columns:,} columns" if len(self.columns) < self.total_columns
                 else f" with all {self.total_columns:,} columns")
        text += f"; cells were selected in {self.windows_with_cells:,} of them"
        if self.second_pass_rows:
            text += f", and their {self.second_pass_rows} candidate rows were asked again to choose between them"
        return text + "."

    def to_dict(self) -> dict:
        return dataclasses.asdict(self) | {"columns": list(self.columns)}


@dataclasses.dataclass(frozen=True)
class AskResult:
    """The answer to one question.

    Attributes:
      question: the question as asked.
      cells: the selected cells, in table order.
      operator: "NONE", "SUM", "AVERAGE" or "COUNT".
      operator_probabilities: operator -> probability (empty without an aggregation head).
      value: the operator executed on the selected cells (None for NONE). SUM and AVERAGE use the
        cells' numbers (`numbers`); cells without a number are left out; AVERAGE of no number is NaN.
      numbers: the numbers SUM or AVERAGE used, in cell order.
      cell_probabilities: (row, column) -> probability, for every cell the model saw.
      kept_rows, kept_columns: the user's rows and columns the model saw.
      diagnostics: what was pruned, trimmed or clamped, one sentence each.
      sequence_length: the tokens the model ran on (a bucket).
      model: which model answered (`TableQA.name`).
      notes: plain-word sentences on an answer that may not be what was asked (the operator does
        not fit the question's words, a difference TAPAS cannot compute, a low confidence;
        `answer_notes`), one sentence each.
      confidence: the probability that the answer is right (`confidence`): calibrated on questions
        with known answers when `calibrated`, else the model's raw score. None until set.
      sure: False when a calibrated `confidence` is below the model's threshold (the answer is
        flagged), True above it; None for an uncalibrated model (its raw score flags nothing).
      calibrated: whether `confidence` comes from a fitted calibration.
      follow_up: the question was read as a follow-up (it saw an earlier answer's cells).
      reading: how an answer over a table too big for one example was made (its windows); None
        when the model read the table in one example.
      computed: a difference, ratio, percentage, comparison or date span that tapas-tf computed from
        the selected cells because the question asks for it (`arithmetic.Computed`); then it is
        the answer (`answers`, `summary`). None otherwise.
    """

    question: str
    cells: Tuple[SelectedCell, ...]
    operator: str
    operator_probabilities: Dict[str, float]
    value: Optional[float]
    numbers: Tuple[float, ...]
    cell_probabilities: Dict[Coordinate, float]
    kept_rows: Tuple[int, ...]
    kept_columns: Tuple[int, ...]
    diagnostics: Tuple[str, ...]
    sequence_length: int
    model: str = ""
    notes: Tuple[str, ...] = ()
    confidence: Optional[float] = None
    sure: Optional[bool] = None
    calibrated: bool = False
    follow_up: bool = False
    reading: Optional[TableReading] = None
    computed: Optional[object] = None

    @property
    def coordinates(self) -> Tuple[Coordinate, ...]:
        return tuple((cell.row, cell.column) for cell in self.cells)

    @property
    def answers(self) -> Tuple[str, ...]:
        """The computed answer (`computed`), else cell texts for NONE, else the executed value as text."""
        if self.computed is not None:
            return (self.computed.answer,)
        if self.operator == "NONE":
            return tuple(cell.text for cell in self.cells)
        return (format_number(self.value),)

    @property
    def answer_text(self) -> str:
        return ", ".join(self.answers)

    @property
    def summary(self) -> str:
        """"Paris, Vienna", "SUM of 3 cells = 4,812", or "6.6 m (computed: 113.6 m − 107 m = 6.6 m)"; at
        most SUMMARY_TEXTS distinct cell texts, then how many others (`answers` holds every one)."""
        if self.computed is not None:
            return f"{self.computed.answer} (computed: {self.computed.expression})"
        if self.operator == "NONE":
            return _cells_in_words([cell.text for cell in self.cells]) if self.cells else "(no cell selected)"
        plural = "cell" if len(self.cells) == 1 else "cells"
        summary = f"{self.operator} of {len(self.cells)} {plural} = {format_number(self.value)}"
        if self.operator in ("SUM", "AVERAGE") and self.cells and not self.numbers:
            summary += " (no selected cell holds a number)"
        return summary

    def to_dict(self) -> dict:
        """A JSON-serialisable view (coordinates as [row, column] lists)."""
        return {
            "question": self.question,
            "answer": self.answer_text,
            "summary": self.summary,
            "operator": self.operator,
            "operator_probabilities": self.operator_probabilities,
            "value": None if self.value is None or math.isnan(self.value) else self.value,
            "numbers": list(self.numbers),
            "cells": [dataclasses.asdict(cell) for cell in self.cells],
            "kept_rows": len(self.kept_rows),
            "kept_columns": len(self.kept_columns),
            "diagnostics": list(self.diagnostics),
            "sequence_length": self.sequence_length,
            "model": self.model,
            "notes": list(self.notes),
            "confidence": None if self.confidence is None else round(self.confidence, 4),
            "sure": self.sure,
            "calibrated": self.calibrated,
            "follow_up": self.follow_up,
            "reading": None if self.reading is None else self.reading.to_dict(),
            "computed": None if self.computed is None else self.computed.to_dict(),
        }


def format_number(value: Optional[float]) -> str:
    """4812.0 -> "4,812"; 12.5 -> "12.5"; 1/3 -> "0.333333"; NaN -> "no number"."""
    if value is None:
        return ""
    if math.isnan(value):
        return "no number"
    if float(value).is_integer() and abs(value) < 1e15:
        return f"{int(value):,}"
    return f"{value:,.6g}" if abs(value) >= 1e15 else f"{value:,.6f}".rstrip("0").rstrip(".")


def decode_answer(encoded: EncodedQuestion, probabilities: np.ndarray,
                  aggregation_logits: Optional[np.ndarray] = None,
                  rule: DecodingRule = DecodingRule()) -> AskResult:
    """The answer of one encoded question.

    Args:
      encoded: the question's features and the table the model saw.
      probabilities: <float32>[seq_len] token probabilities (seq_len >= the features' length).
      aggregation_logits: <float32>[num_agg], or None without an aggregation head.
      rule: the threshold and the optional rules (`decoding.DecodingRule`).
    """
    features = encoded.features
    length = len(features["input_ids"])
    table = encoded.pruned.table
    prediction = rule.decode("ask", np.asarray(probabilities)[:length], features["column_ids"],
                             features["row_ids"], features["input_mask"], aggregation_logits, table)
    operator = AGGREGATION_NAMES[prediction.aggregation]
    cells = tuple(_selected_cell(encoded, row, column, prediction.cell_probabilities[(row, column)])
                  for row, column in prediction.coordinates)
    numbers = tuple(c.number for c in cells if c.number is not None)
    return AskResult(
        question=encoded.question,
        cells=cells,
        operator=operator,
        operator_probabilities=dict(zip(AGGREGATION_NAMES, prediction.aggregation_probabilities)),
        value=None if operator == "NONE" else float(prediction.answer),
        numbers=numbers if operator in ("SUM", "AVERAGE") else (),
        cell_probabilities={encoded.pruned.to_original(r, c): p
                            for (r, c), p in prediction.cell_probabilities.items()},
        kept_rows=encoded.pruned.rows,
        kept_columns=encoded.pruned.columns,
        diagnostics=encoded.diagnostics,
        sequence_length=length,
    )


def _selected_cell(encoded: EncodedQuestion, row: int, column: int, probability: float) -> SelectedCell:
    table = encoded.pruned.table
    cell = table.rows[row].cells[column]
    original_row, original_column = encoded.pruned.to_original(row, column)
    return SelectedCell(original_row, original_column, table.columns[column].text, cell.text,
                        float(probability), execution.cell_number(cell))


def _cells_in_words(texts: Sequence[str], most: int = SUMMARY_TEXTS) -> str:
    """Selected cells' texts for a person: an empty cell (NaN in a DataFrame) as "(empty cell)", and a
    text that several cells hold once, with their count ("Galway (2 cells)"), in first-seen order;
    past `most` distinct texts, how many more there are (a big table's answer may hold thousands)."""
    counts = collections.Counter(texts)
    distinct = list(dict.fromkeys(texts))
    words = []
    for text in distinct[:most]:
        shown = text if text.strip() else "(empty cell)"
        words.append(shown if counts[text] == 1 else f"{shown} ({counts[text]} cells)")
    if len(distinct) > most:
        others = len(distinct) - most
        words.append(f"and {others:,} other {'text' if others == 1 else 'texts'} ({len(texts):,} cells in all)")
    return ", ".join(words)
