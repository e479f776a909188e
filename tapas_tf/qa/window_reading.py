"""Asking a big table window by window, and one answer from all the windows (map, then reduce).

    reader = WindowReader(runner, rule, time_budget=10.0)
    result = reader.answer(windowed)        # an AskResult over every row read; result.reading says how

The map: the windows (`window_encoding.WindowedQuestion`) go to the model in chunks of
`CHUNK_WINDOWS`, each chunk in batches of one bucket length, so memory holds one chunk of
features, never the table's. Of each window only its cells' probabilities that could matter
(above `KEEP_PROBABILITY`), their sum, and its operator probabilities are kept.

The reduce (`row_windows`): one operator for the question from the windows that selected a cell;
then each window's cells under that operator (above the threshold, or for COUNT under the
expected-count rule the window's expected count of its most probable cells); COUNT, SUM and
AVERAGE computed exactly over every selected cell. A lookup or superlative whose cells come from
several windows is asked once more over their rows together (a second pass; numbers keep the
whole column's ranks), and that answer is the answer.

Limits are explicit: a time budget stops the map after the chunk in which it ran out, and the
answer says how many rows it covers (`TableReading.limit`). A long read can show its progress:
`WindowReader(..., progress=progress_bar("my model: 100,000 rows"))` moves a tqdm bar a chunk at a time.
"""

import contextlib
import math
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from tapas_tf.inference import execution
from tapas_tf.inference.decoding import AGGREGATION_NAMES, DecodingRule, cell_probabilities
from tapas_tf.qa import pruning, row_windows
from tapas_tf.qa.ask_results import AskResult, SelectedCell, TableReading
from tapas_tf.qa.question_hints import question_kind
from tapas_tf.qa.window_encoding import WindowedQuestion, pack_rows

Coordinate = Tuple[int, int]
# Makes the progress bar of one read: total windows -> an object with update(windows) and close().
ProgressFactory = Callable[[int], Any]
CHUNK_WINDOWS = 64
# A question no window selects a cell for is asked again over candidate rows, among them the rows
# sharing the most words with it, for tables of up to this many rows (ranking reads every cell).
RANK_ROWS_UP_TO = 1_000_000
# A cell less probable than this is neither selected nor the best cell left out of any answer worth
# reporting; keeping only the others keeps a 100,000-row table's reduce small.
KEEP_PROBABILITY = 0.02
# Candidate rows of each window in a second pass, when all the selected rows do not fit one window.
SECOND_PASS_PER_WINDOW = 3
# Rounds of a knockout among more candidate rows than one example holds (each round divides them by
# about the rows an example holds over SECOND_PASS_PER_WINDOW).
KNOCKOUT_ROUNDS = 4


class _Window:
    """What the map keeps of one window's answer (the user's coordinates)."""

    __slots__ = ("rows", "probabilities", "total", "operators")

    def __init__(self, rows: Tuple[int, ...], probabilities: Dict[Coordinate, float], total: float,
                 operators: Dict[str, float]):
        self.rows, self.probabilities, self.total, self.operators = rows, probabilities, total, operators

    def cells(self, operator: str, rule: DecodingRule) -> Tuple[Coordinate, ...]:
        """The window's selected cells under `operator` (the decoding rule's, without its fallback)."""
        if operator == row_windows.COUNT and rule.expected_count:
            if not any(p > rule.threshold for p in self.probabilities.values()):
                return ()  # A window that selects nothing counts nothing, however diffuse its mass.
            count = int(math.floor(self.total + 0.5))
            ranked = sorted(self.probabilities, key=lambda key: (-self.probabilities[key], key))
            return tuple(sorted(ranked[:count]))
        return tuple(sorted(c for c, p in self.probabilities.items() if p > rule.threshold))

    def answer(self, operator: str, rule: DecodingRule) -> row_windows.WindowAnswer:
        return row_windows.WindowAnswer(self.rows, self.cells(operator, rule), self.probabilities, self.operators)


class WindowReader:
    """Answers `WindowedQuestion`s with a model (see the module docstring).

    Args:
      runner: `runner(length, rows)` -> {"probabilities": <float32>[n, length], and with an aggregation
        head "aggregation_logits": <float32>[n, num_agg]} (`TableQA.runner`).
      rule: the decoding rule (threshold, fallback to the best cell, expected count).
      batch_size: windows per model call.
      time_budget: seconds for the map; None: no limit.
      clock: seconds, monotonic (tests pass a fake).
      progress: makes a bar for each read of more than one chunk (`progress_bar`); None: no bar.
    """

    def __init__(self, runner, rule: DecodingRule = DecodingRule(), batch_size: int = 16,
                 time_budget: Optional[float] = None, clock: Callable[[], float] = time.monotonic,
                 progress: Optional[ProgressFactory] = None):
        if time_budget is not None and time_budget <= 0:
            raise ValueError(f"time_budget must be positive seconds, got {time_budget}")
        self.runner, self.rule, self.batch_size = runner, rule, batch_size
        self.time_budget, self.clock, self.progress = time_budget, clock, progress

    def answer(self, windowed: WindowedQuestion) -> AskResult:
        """The answer over every window read (see the module docstring)."""
        scored, lengths, limit = self._map(windowed)
        first = [w.answer(row_windows.NONE, self.rule) for w in scored]  # Threshold cells: who votes.
        operator, _ = row_windows.choose_operator(first)
        answers = [w.answer(operator, self.rule) for w in scored]
        combined = row_windows.combine(answers, lambda c: execution.cell_number(windowed.cell(*c)))
        cells = combined.cells
        probabilities: Dict[Coordinate, float] = {}
        for window in scored:
            probabilities.update(window.probabilities)
        rows = self._second_pass_rows(windowed, combined, answers)
        if (not rows and combined.operator == row_windows.NONE and not cells and self.rule.fallback_to_best_cell
                and probabilities):
            # No window is sure of a cell: their best cells compete, and probabilities from different
            # windows are not comparable, so the question is asked again over those cells' rows.
            rows = _fitting_in_order(windowed, _fallback_candidates(windowed, scored))
        if rows:
            cells, second_probabilities, length = self._second_pass(windowed, rows)
            probabilities.update(second_probabilities)
            lengths.append(length)
        return self._result(windowed, combined, cells, probabilities, lengths, scored, limit, len(rows))

    # --- map ------------------------------------------------------------------------------------

    def _map(self, windowed: WindowedQuestion) -> Tuple[List[_Window], List[int], Optional[str]]:
        started = self.clock()
        scored: List[_Window] = []
        lengths: List[int] = []
        total = len(windowed.windows)
        bar = self.progress(total) if self.progress is not None and total > CHUNK_WINDOWS else None
        try:
            for start in range(0, total, CHUNK_WINDOWS):
                chunk = windowed.windows[start:start + CHUNK_WINDOWS]
                features = [windowed.features(rows) for rows in chunk]
                lengths.extend(len(f["input_ids"]) for f in features)
                scored.extend(self._ask(windowed, chunk, features))
                if bar is not None:
                    bar.update(len(chunk))
                if (self.time_budget is not None and len(scored) < total
                        and self.clock() - started > self.time_budget):
                    return scored, lengths, "time_budget"
        finally:
            if bar is not None:
                bar.close()
        return scored, lengths, "max_rows" if windowed.max_rows is not None else None

    def _ask(self, windowed: WindowedQuestion, chunk: Sequence[Tuple[int, ...]],
             features: Sequence[Mapping[str, np.ndarray]]) -> List[_Window]:
        """The chunk's windows asked in batches of one length, in the chunk's order."""
        out: List[Optional[_Window]] = [None] * len(chunk)
        by_length: Dict[int, List[int]] = {}
        for index, item in enumerate(features):
            by_length.setdefault(len(item["input_ids"]), []).append(index)
        for length, indices in by_length.items():
            for begin in range(0, len(indices), self.batch_size):
                batch = indices[begin:begin + self.batch_size]
                outputs = self.runner(length, [features[i] for i in batch])
                logits = outputs.get("aggregation_logits")
                for row, index in enumerate(batch):
                    out[index] = _scored(windowed, chunk[index], features[index], outputs["probabilities"][row],
                                         None if logits is None else logits[row])
        return out  # type: ignore[return-value]

    # --- second pass ------------------------------------------------------------------------------

    def _second_pass_rows(self, windowed: WindowedQuestion, combined: row_windows.CombinedAnswer,
                          answers: Sequence[row_windows.WindowAnswer]) -> List[int]:
        """The rows to ask again, or [] for none, for a lookup or superlative (NONE) that selected
        cells: the rows of every selected cell, when they fit one example (else, for a superlative
        or comparison, the winners of a knockout among them, `_knockout`; a lookup's many rows are
        a list, kept whole),
        filled up with the rows that share the most words with the question (what pruning would
        show the model). On WTQ dev's tables beyond 512 tokens this beat keeping the windows' own
        answer. Counts, totals and averages answered with cells (by a model without an aggregation
        head) keep every window's cells."""
        if combined.operator != row_windows.NONE or not combined.cells:
            return []
        kind = question_kind(windowed.question)
        if kind in ("count", "sum", "average") and not _all_numbers(windowed, answers):
            return []  # Cells listed for a count: all of them are the answer.
        rows = sorted({cell[0] for answer in answers for cell in answer.cells})
        if not windowed.fits(rows):
            if kind == "lookup":
                return []
            rows = self._knockout(windowed, _best_first(rows, answers))
        return _fitting_in_order(windowed, rows + _best_matches(windowed)[1])

    def _knockout(self, windowed: WindowedQuestion, rows: List[int]) -> List[int]:
        """Candidate rows (best first) cut to what fits one example by rounds: the candidates are
        asked in groups that fit one example each, and each group's best cells' rows (at most
        SECOND_PASS_PER_WINDOW) go on, until they fit; a superlative's winner beats hundreds of
        window winners in two or three rounds."""
        for _ in range(KNOCKOUT_ROUNDS):
            if windowed.fits(sorted(rows)):
                break
            order = sorted(rows)
            groups = [tuple(order[i] for i in group) for group in pack_rows(
                windowed.row_lengths[order], windowed.row_budget, windowed.max_window_rows)]
            winners: List[int] = []
            for group, window in zip(groups, self._ask(windowed, groups, [windowed.features(g) for g in groups])):
                chosen = window.cells(row_windows.NONE, self.rule) or tuple(window.probabilities)
                ranked = sorted(chosen, key=lambda key: (-window.probabilities.get(key, 0.0), key))
                winners.extend(cell[0] for cell in ranked[:SECOND_PASS_PER_WINDOW])
            if len(set(winners)) >= len(rows):
                break  # No group chose: the best candidates by their first scores.
            rows = list(dict.fromkeys(winners))
        return _fitting_in_order(windowed, rows)

    def _second_pass(self, windowed: WindowedQuestion, rows: Sequence[int]
                     ) -> Tuple[Tuple[Coordinate, ...], Dict[Coordinate, float], int]:
        """(cells, their probabilities, sequence length) of the question asked once more over `rows`."""
        features = windowed.features(rows)
        length = len(features["input_ids"])
        outputs = self.runner(length, [features])
        # The decoding rule's own threshold and best-cell fallback; the operator stays the windows'.
        prediction = self.rule.decode("second pass", outputs["probabilities"][0][:length], features["column_ids"],
                                      features["row_ids"], features["input_mask"])
        user = lambda row, column: (rows[row], windowed.columns[column])  # noqa: E731
        cells = tuple(sorted(user(*cell) for cell in prediction.coordinates))
        probabilities = {user(*cell): float(p) for cell, p in prediction.cell_probabilities.items()}
        return cells, probabilities, length

    # --- the answer -------------------------------------------------------------------------------

    def _result(self, windowed: WindowedQuestion, combined: row_windows.CombinedAnswer,
                cells: Sequence[Coordinate], probabilities: Mapping[Coordinate, float], lengths: Sequence[int],
                scored: Sequence[_Window], limit: Optional[str], second_pass: int) -> AskResult:
        operator = combined.operator
        selected = tuple(_selected(windowed, row, column, probabilities.get((row, column), 0.0))
                         for row, column in sorted(cells))
        numbers = tuple(c.number for c in selected if c.number is not None)
        value: Optional[float] = None
        if operator != row_windows.NONE:  # The one executor of SUM, AVERAGE and COUNT, on the cells read.
            at = {column: index for index, column in enumerate(windowed.columns)}
            value = float(execution.execute([(cell.row, at[cell.column]) for cell in selected],
                                            AGGREGATION_NAMES.index(operator), windowed.table.table))
        rows_read = sum(len(w.rows) for w in scored)
        reading = TableReading(
            rows_read=rows_read, total_rows=windowed.total_rows, windows_read=len(scored),
            windows=len(windowed.windows), columns=tuple(windowed.column_name(c) for c in windowed.columns),
            total_columns=windowed.total_columns, windows_with_cells=combined.windows_with_cells,
            second_pass_rows=second_pass, limit=limit)
        diagnostics = windowed.diagnostics + (reading.sentence(),)
        if limit == "time_budget":
            diagnostics += (f"The time budget of {self.time_budget:g} s ran out after {rows_read:,} of the "
                            f"{windowed.rows_read:,} rows ({len(scored):,} of {len(windowed.windows):,} windows); "
                            "a count, total or average covers only those rows.",)
        return AskResult(
            question=windowed.question, cells=selected, operator=operator,
            operator_probabilities=dict(combined.operator_probabilities), value=value,
            numbers=numbers if operator in (row_windows.SUM, row_windows.AVERAGE) else (),
            cell_probabilities=dict(probabilities), kept_rows=tuple(range(rows_read)),
            kept_columns=windowed.columns, diagnostics=diagnostics, sequence_length=max(lengths),
            reading=reading)


def progress_bar(description: str, enabled: Optional[bool] = None, file: Any = None) -> Optional[ProgressFactory]:
    """A `WindowReader` progress factory: a tqdm bar of windows named `description` (on stderr, or
    `file`) when `enabled` is True, or None and the stream is a terminal; None (no bar) when False."""
    if enabled is False:
        return None
    return lambda total: _tqdm(enabled, total=total, desc=description, unit="window", file=file)


def status_line(description: str, enabled: Optional[bool] = None, file: Any = None):
    """A context manager that shows "`description` ..." on stderr (or `file`) while it is open, and
    clears it after, under `progress_bar`'s rule for `enabled`; one that does nothing when False."""
    if enabled is False:
        return contextlib.nullcontext()
    return _tqdm(enabled, total=None, desc=description, bar_format="{desc} ...", file=file)


def _tqdm(enabled: Optional[bool], **options):
    """A tqdm bar cleared when closed: shown when `enabled` is True, on a terminal only when None."""
    from tqdm.auto import tqdm  # pylint: disable=import-outside-toplevel

    return tqdm(leave=False, disable=None if enabled is None else not enabled, **options)


def _scored(windowed: WindowedQuestion, rows: Tuple[int, ...], features: Mapping[str, np.ndarray],
            probabilities: np.ndarray, logits: Optional[np.ndarray]) -> _Window:
    """One window's kept cell probabilities (the user's coordinates), their sum, its operators."""
    length = len(features["input_ids"])
    cells = cell_probabilities(np.asarray(probabilities)[:length], features["column_ids"], features["row_ids"],
                               features["input_mask"])
    total = math.fsum(cells.values())
    kept = {(rows[r], windowed.columns[c]): float(p) for (r, c), p in cells.items() if p >= KEEP_PROBABILITY}
    if not kept and cells:  # The best cell, for the fallback and the confidence.
        (r, c), p = max(cells.items(), key=lambda item: item[1])
        kept = {(rows[r], windowed.columns[c]): float(p)}
    operators = {}
    if logits is not None:
        shifted = np.exp(np.asarray(logits, np.float64) - np.max(logits))
        operators = dict(zip(AGGREGATION_NAMES, (shifted / shifted.sum()).tolist()))
    return _Window(tuple(rows), kept, total, operators)


def _all_numbers(windowed: WindowedQuestion, answers: Sequence[row_windows.WindowAnswer]) -> bool:
    """Whether every selected cell holds a number: "how many people live in x?" looks a number up."""
    return all(execution.cell_number(windowed.cell(*cell)) is not None for answer in answers for cell in answer.cells)


def _fallback_candidates(windowed: WindowedQuestion, scored: Sequence[_Window]) -> List[int]:
    """Rows for the second pass of a question no window selected a cell for, best first: the rows that
    match the question best (`_best_matches`: "order O-020000" in a 100,000-row table is one row),
    each window's best cells' rows (the windows' first choices, then their second, ...), then the
    other rows by how many words they share with it."""
    by_window = []
    for window in scored:
        ranked = sorted(window.probabilities, key=lambda key: (-window.probabilities[key], key))
        by_window.append([cell[0] for cell in ranked[:SECOND_PASS_PER_WINDOW]])
    model_rows = [rows[i] for i in range(SECOND_PASS_PER_WINDOW) for rows in by_window if i < len(rows)]
    best, related = _best_matches(windowed)
    # Measured on WTQ dev: after the best matches, the windows' own best rows before the rest.
    return list(dict.fromkeys(best + model_rows + related))


def _best_matches(windowed: WindowedQuestion) -> Tuple[List[int], List[int]]:
    """(the rows with the most question words, when they are few: at most one window's worth; every
    row read, most related first), by `pruning.row_scores`; ([], []) for a table too big to rank
    (`RANK_ROWS_UP_TO`: ranking reads every cell)."""
    if windowed.rows_read > RANK_ROWS_UP_TO:
        return [], []
    table = windowed.table.table
    scores = pruning.row_scores(table, pruning.words(windowed.question), range(len(table.columns)))
    ranked = [int(r) for r in np.argsort(-scores, kind="stable")]
    top = int(scores.max()) if len(scores) else 0
    best = [r for r in ranked if scores[r] == top] if top > 0 else []
    return (best if len(best) <= windowed.encoder.max_table_shape[0] else []), ranked


def _fitting_in_order(windowed: WindowedQuestion, rows: Sequence[int]) -> List[int]:
    """The first of `rows` (best first, repeats ignored) that fit one example together, in table order."""
    lengths, budget = windowed.row_lengths, windowed.row_budget
    most = windowed.encoder.max_table_shape[0]
    chosen: Dict[int, None] = {}
    used = 0
    for row in rows:
        if row in chosen or used + int(lengths[row]) > budget:
            continue
        chosen[row] = None
        used += int(lengths[row])
        if len(chosen) >= most or budget - used < int(lengths.min()):
            break
    return sorted(chosen)


def _best_first(rows: Sequence[int], answers: Sequence[row_windows.WindowAnswer]) -> List[int]:
    """`rows`, the best first. A row is as good as its best selected cell: the most probable first, and
    among equally probable ones those of a window that selected fewer cells (a window that picks one
    cell names its winner; one that picks every cell of a column, as a window without a top-ranked
    value may, names none)."""
    best: Dict[int, Tuple[float, int]] = {}
    for answer in answers:
        for cell in answer.cells:
            key = (-answer.cell_probabilities.get(cell, 0.0), len(answer.cells))
            best[cell[0]] = min(best.get(cell[0], key), key)
    return sorted(rows, key=lambda r: best.get(r, (0.0, 0)) + (r,))


def _selected(windowed: WindowedQuestion, row: int, column: int, probability: float) -> SelectedCell:
    cell = windowed.cell(row, column)
    return SelectedCell(row, column, windowed.column_name(column), cell.text, float(probability),
                        execution.cell_number(cell))
