"""Ask a table a question: the Python API.

    qa = TableQA.from_model_dir("model_dirs/sqa_tiny")
    result = qa.answer("cities.csv", "which city has the most people?")   # or a DataFrame
    result.summary          # "Paris" or "SUM of 3 cells = 4,812"
    result.cells            # SelectedCell(row, column, column_name, text, probability, number)

    chat = qa.conversation(frame)              # follow-ups see the previous answer, as in SQA
    chat.ask("which cities are in europe?")
    chat.ask("which of them is the largest?")

    qa.answer_many(frame, ["q1", "q2", ...])   # one conversion of the table, batched model calls

A pair of models: `from_model_dir("my_sqa", aggregation_model_dir="my_wtq")` answers follow-ups
with the first (the conversation model, which reads the previous answer). A first question goes
to both when both models have a calibration (`calibration.json`, `confidence`): the answer with
the higher calibrated confidence is kept, so each model answers what it answers best (on held-out
SQA and WTQ questions this beat routing by the question's words on both). Without calibrations a
first question that reads like counting or arithmetic ("how many", "total", `question_hints`) goes
to the second model, a model with an aggregation head (COUNT, SUM, AVERAGE), and the rest to the
first. The second model loads the first time it is needed. Without a model directory, the bundled
conversation model pairs with the bundled aggregation model when the installation has one
(`checkpoints.bundled`). Every result names the model that answered (`AskResult.model`).

The model stays loaded and warm. Each question runs at the smallest sequence bucket that holds it
(32 ... 512 tokens), with one compiled function per bucket. A table bigger than one example holds
is read whole, in windows of rows (`windows=True`, the default; `window_encoding`,
`window_reading`): COUNT, SUM and AVERAGE cover every row, and `AskResult.reading` says how the
answer was made. `max_rows` reads only the first rows, `time_budget` stops reading after that many
seconds, and the answer says when either did. With `windows=False` such a table is pruned to the
rows and columns most related to the question (`prune=True`) or refused; see `ask_encoding`.

Two backends run the model, and everything else (encoding, batching, decoding, executing
SUM/AVERAGE/COUNT) is this module's, whichever runs it (`BACKENDS`):

- "tensorflow": the Keras model from the checkpoint (`tf_runner`); bfloat16 and XLA are options.
- "lite": the model directory's LiteRT copy, model.tflite (`lite_model`; written by
  `lite_export`), run by `ai-edge-litert` without importing TensorFlow: a process that asks with
  it starts in well under a second. Its answers equal TensorFlow's (probabilities within 1e-4).
- "auto" (the default): "lite" when the directory has a current copy and the interpreter is
  installed and no TensorFlow-only option is asked for, else "tensorflow"; a copy that exists
  but cannot answer (stale: the weights changed since it was made) is logged as a warning.

This module imports no TensorFlow; the TensorFlow backend loads it when chosen.
"""

import dataclasses
import os
import threading
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Set, Tuple, Union

import numpy as np
import pandas as pd

from tapas_tf.checkpoints import model_dir as model_dir_lib
from tapas_tf.checkpoints.bundled import BUNDLED_ROOT, bundled_aggregation_model_dir, bundled_model_dir
from tapas_tf.inference.decoding import DecodingRule
from tapas_tf.qa import arithmetic
from tapas_tf.qa.answer_notes import CANNOT_AGGREGATE, answer_notes, total_rows
from tapas_tf.qa.ask_encoding import (
    MODEL_INPUT_FEATURES,
    EncodedQuestion,
    PreparedTable,
    TableEncoder,
    TableTooBig,
    bucket_batches,
)
from tapas_tf.qa.ask_results import AskResult, decode_answer
from tapas_tf.qa.backends import BACKENDS, PRECISIONS
from tapas_tf.qa.confidence import CALIBRATION_FILE, Calibration, confidence_features, raw_confidence
from tapas_tf.qa.pruning import PrunedTable
from tapas_tf.qa.question_hints import aggregation_cue
from tapas_tf.qa.runners import load_runner
from tapas_tf.qa.tables import AskError, TableLike  # noqa: F401 (AskError is public here)
from tapas_tf.qa.window_encoding import WindowedQuestion, encode_windows
from tapas_tf.qa.window_reading import WindowReader, progress_bar, status_line

PreviousAnswer = Optional[object]  # An AskResult, or a sequence of (row, column).
# A table of at least this many cells says what it is doing while it is prepared (with `progress`):
# 10^6 cells take about 10 s to tokenise, annotate and rank before the first window is read.
STATUS_CELLS = 100_000
Encoded = Union[EncodedQuestion, WindowedQuestion]


class TableQA:
    """A loaded model that answers questions about tables.

    Args:
      runner: runs the model: `runner(length, rows)` maps rows of MODEL_INPUT_FEATURES, each
        <int32>[length], to "probabilities" <float32>[rows, length] and, with an aggregation
        head, "aggregation_logits" <float32>[rows, num_agg]; `runner.has_aggregation_head` and
        `runner.backend` say what it is (`tf_runner.TensorFlowRunner`, `lite_model.LiteRunner`).
      encoder: the matching `TableEncoder` (conversion limits, vocabulary, pruning).
      rule: how probabilities become cells (`decoding.DecodingRule`; the default is Google's and
        Hugging Face's: the cells above 0.5). `from_model_dir` starts from the model's own rule.
      name: which model this is; every result carries it (`AskResult.model`).
      aggregation_model: a second model (a `TableQA` with an aggregation head, or a function that
        loads one on first use) that answers the questions which read like counting or arithmetic
        and do not follow up a previous answer (`encode`); None: this model answers everything.

      calibration: maps an answer's features to the probability that it is right
        (`confidence.Calibration`; `from_model_dir` reads the directory's calibration.json); None:
        the raw score, marked uncalibrated.
      windows: read a table too big for one example in windows of rows (True), or prune or refuse it
        as the encoder's `prune` says (False).
      max_rows: read at most this many body rows of a table read in windows (None: all).
      time_budget: stop reading a table's windows after this many seconds (None: no limit).
      progress: a tqdm bar of the windows while a big table is read: True always, None when stderr
        is a terminal, False never.

    Every answer carries a confidence and, where its computation may not be what the question asks
    (a total answered with COUNT, a difference TAPAS cannot compute, a count asked as a follow-up,
    a low confidence), notes in plain words (`answer_notes`).
    """

    def __init__(self, runner, encoder: TableEncoder, rule: DecodingRule = DecodingRule(), name: str = "model",
                 aggregation_model: Union[None, "TableQA", Callable[[], "TableQA"]] = None,
                 calibration: Optional[Calibration] = None, windows: bool = True, max_rows: Optional[int] = None,
                 time_budget: Optional[float] = None, progress: Optional[bool] = False):
        if max_rows is not None and max_rows < 1:
            raise ValueError(f"max_rows must be at least 1, got {max_rows}")
        if time_budget is not None and time_budget <= 0:
            raise ValueError(f"time_budget must be positive seconds, got {time_budget}")
        self.windows, self.max_rows, self.time_budget = windows, max_rows, time_budget
        self.progress = progress
        self.runner = runner
        self.calibration = calibration
        self.encoder = encoder
        self.rule = rule
        self.name = name
        self.show_backend = False  # Results name the backend too: "bundled sqa_tiny (LiteRT)".
        self._aggregation_model = aggregation_model
        self._aggregation_lock = threading.Lock()
        if isinstance(aggregation_model, TableQA):
            aggregation_model.encoder.share_tables(encoder)

    @property
    def aggregation_model(self) -> Optional["TableQA"]:
        """The model that answers aggregation questions (loaded now if it is not yet), or None."""
        if callable(self._aggregation_model):
            with self._aggregation_lock:  # A server's threads may ask at once: load it once.
                if callable(self._aggregation_model):
                    loaded = self._aggregation_model()
                    loaded.show_backend = self.show_backend
                    loaded.encoder.share_tables(self.encoder)  # A big table is tokenised once, not per model.
                    self._aggregation_model = loaded
        return self._aggregation_model

    @property
    def aggregation_model_name(self) -> Optional[str]:
        """The aggregation model's name, without loading it; None without one."""
        return None if self._aggregation_model is None else self._aggregation_model.name

    @property
    def display_name(self) -> str:
        """The name results carry: `name`, with the backend when `show_backend`."""
        return f"{self.name} ({self.backend})" if self.show_backend else self.name

    @property
    def backend(self) -> str:
        """Which runs the model: "TensorFlow" or "LiteRT"."""
        return self.runner.backend

    @property
    def model(self):
        """The Keras model (TensorFlow backend), else None."""
        return getattr(self.runner, "model", None)

    @property
    def jit_compile(self) -> bool:
        return getattr(self.runner, "jit_compile", False)

    @property
    def precision(self) -> str:
        return getattr(self.runner, "precision", "float32")

    @classmethod
    def from_model_dir(cls, model_dir: Optional[str] = None, checkpoint: Optional[str] = None,
                       vocab_file: Optional[str] = None, prune: bool = True, max_seq_length: Optional[int] = None,
                       backend: str = "auto", jit_compile: bool = False, precision: str = "float32",
                       name: Optional[str] = None, rule: Optional[DecodingRule] = None,
                       aggregation_model_dir: Optional[str] = None, windows: bool = True,
                       max_rows: Optional[int] = None, time_budget: Optional[float] = None,
                       progress: Optional[bool] = False, **decoding) -> "TableQA":
        """Loads any model directory (trained here, imported from Hugging Face or TF1, or compact);
        without one, the bundled models (`tapas_tf.checkpoints.bundled`).

        `aggregation_model_dir` is a second model, with an aggregation head, for the questions that
        read like counting or arithmetic and do not follow up a previous answer (the module
        docstring); it loads, with the same options, when the first such question comes. Without
        `model_dir` it defaults to the bundled aggregation model; "" (or "none") turns it off.

        `windows`, `max_rows`, `time_budget` and `progress`: how a table too big for one example is
        read (the class docstring).

        `backend` is "auto", "lite" or "tensorflow" (the module docstring). The TensorFlow-only
        options: `jit_compile` compiles each bucket's function with XLA (pays at short buckets;
        compiling costs a few seconds per bucket on first use); `precision` "bfloat16" runs the
        matrix products in bfloat16 (TensorFlow's oneDNN rewrite of the graph; the weights stay
        float32). On a CPU with AVX512_BF16 it made the base model's forward pass at 384 tokens
        1.35x faster (226 against 167 ms); probabilities move by about 1e-2, so a cell near the
        threshold can change sides. Without those instructions TensorFlow leaves the graph in float32.

        The vocabulary is `vocab_file`, else the model directory's `vocab.txt`, else BERT's uncased
        vocabulary (with `[EMPTY]`), which is what every released TAPAS model uses.

        Decoding starts from `rule`, else the model's own (`DecodingRule.for_model`: the best cell
        rather than nothing for models that select one column, as SQA's and WTQ's; the expected
        count for models trained from answers only); the `decoding` options given and not None
        (`threshold=0.4`, `fallback_to_best_cell=False`, any `DecodingRule` field) replace its own.
        """
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
        if model_dir is None:
            model_dir = bundled_model_dir()
            name = name or _bundled_name(model_dir)
            if aggregation_model_dir is None:
                aggregation_model_dir = bundled_aggregation_model_dir()
        else:
            name = name or os.path.basename(os.path.normpath(model_dir))
        aggregation_model = None
        if aggregation_model_dir and aggregation_model_dir.lower() != "none":
            model_dir_lib.require_config(aggregation_model_dir)
            aggregation_model = _aggregation_loader(
                aggregation_model_dir, dict(vocab_file=vocab_file, prune=prune, max_seq_length=max_seq_length,
                                            backend=backend, jit_compile=jit_compile, precision=precision,
                                            rule=rule, aggregation_model_dir="", windows=windows,
                                            max_rows=max_rows, time_budget=time_budget, progress=progress,
                                            **decoding))
        runner, config = load_runner(model_dir, checkpoint, backend, jit_compile, precision)
        rule = (rule or DecodingRule.for_model(config)).with_overrides(**decoding)
        encoder = TableEncoder.for_model_dir(model_dir, config, vocab_file, prune=prune,
                                             max_seq_length=max_seq_length)
        return cls(runner, encoder, rule, name, aggregation_model, Calibration.load(model_dir), windows=windows,
                   max_rows=max_rows, time_budget=time_budget, progress=progress)

    @classmethod
    def from_pretrained(cls, name: str, revision: Optional[str] = None, token: Optional[str] = None,
                        force_download: bool = False, **options) -> "TableQA":
        """Loads a released model by name, downloading and importing it on first use.

            TableQA.from_pretrained("google/tapas-base-finetuned-wtq")            # Hugging Face Hub
            TableQA.from_pretrained("google/tapas-base-finetuned-wtq@no_reset")   # ... at a revision
            TableQA.from_pretrained("https://storage.googleapis.com/tapas_models/2020_10_07/"
                                    "tapas_wtq_wikisql_sqa_inter_masklm_base_reset.zip")  # original release

        The imported model directory is cached, and later calls load it without any network request
        (`tapas_tf.checkpoints.released`: names, cache, offline use, checksums). `revision` (a branch,
        tag or commit) and `token` are the Hub's; `force_download` imports again. The other keyword
        options are `from_model_dir`'s; answers name the model by `name`.

        Raises:
          ReleasedModelError (a ValueError): with a one-line message (no such model, no network and no
            cached copy, a model that does not answer questions, a damaged download, ...).
        """
        from tapas_tf.checkpoints import released  # pylint: disable=import-outside-toplevel

        model_dir = released.released_model_dir(name, revision, token=token, force_download=force_download)
        options.setdefault("name", released.parse_name(name, revision).display)
        return cls.from_model_dir(model_dir, **options)

    # --- asking ---------------------------------------------------------------------------------

    def answer(self, table: TableLike, question: str, previous_answer: PreviousAnswer = None) -> AskResult:
        """Answers one question; `previous_answer` (a result or cells) is the SQA follow-up context."""
        prepared = self.prepare(table)
        return self._run([self.encode(prepared, question, previous_answer)])[0]

    def answer_many(self, table: TableLike, questions: Sequence[str]) -> List[AskResult]:
        """Answers independent questions about one table: one conversion, batched by bucket."""
        prepared = self.prepare(table)
        return self._run([self.encode(prepared, q) for q in questions])

    def conversation(self, table: TableLike) -> "Conversation":
        """A conversation about one table, in which each question sees the previous answer."""
        return Conversation(self, self.prepare(table))

    def prepare(self, table: TableLike) -> PreparedTable:
        """The table converted to text and annotated once (`TableEncoder.prepare`); a DataFrame of
        STATUS_CELLS cells or more says so on stderr meanwhile when `progress` asks for it."""
        rows, columns = table.shape if isinstance(table, pd.DataFrame) else (0, 0)
        with self._status(f"preparing {rows:,} rows", rows * columns):
            return self.encoder.prepare(table)

    def _status(self, doing: str, cells: int):
        """A status line "name: doing ..." on stderr while a table of STATUS_CELLS cells or more is
        worked on (`window_reading.status_line`, under `progress`); else nothing."""
        return status_line(f"{self.display_name}: {doing}", self.progress if cells >= STATUS_CELLS else False)

    def encode(self, prepared: PreparedTable, question: str, previous_answer: PreviousAnswer = None) -> Encoded:
        """Features of one question for the model that answers it (the module docstring): a follow-up
        for this model (it needs the conversational model's previous-answer input, which the
        aggregation model was not trained with); a first question for both models of a calibrated
        pair (`alternative`), else by its words. A table too big for one example is encoded as its
        windows (`WindowedQuestion`) when `windows` is on.

        Raises:
          AskError: as `TableEncoder.encode`.
        """
        previous = _previous_cells(previous_answer)
        if self._aggregation_model is None or previous:
            return self._encode_here(prepared, question, previous)
        both = self.routes_by_confidence
        if not both and not aggregation_cue(question):
            return self._encode_here(prepared, question)
        other = dataclasses.replace(self._encode_here(prepared, question, encoder=self.aggregation_model.encoder),
                                    for_aggregation_model=True)
        return (dataclasses.replace(self._encode_here(prepared, question), alternative=other)
                if both else other)

    def _encode_here(self, prepared: PreparedTable, question: str,
                     previous: Optional[Sequence[Tuple[int, int]]] = None,
                     encoder: Optional[TableEncoder] = None) -> Encoded:
        """The encoding for this model (or `encoder`'s, the aggregation model's, read as this model's
        `windows` and `max_rows` say): one example when the table fits, else its windows."""
        encoder = encoder or self.encoder
        if not self.windows:
            return encoder.encode(prepared, question, previous)
        if self.max_rows is None or len(prepared.table.rows) <= self.max_rows:
            try:
                return encoder.encode(prepared, question, previous, prune=False)
            except TableTooBig:
                pass
        table = prepared.table
        cells = len(table.rows) * len(table.columns)
        with self._status(f"tokens, numbers and ranks of {len(table.rows):,} rows", cells):
            return encode_windows(encoder, prepared, question, previous or (), self.max_rows)

    @property
    def routes_by_confidence(self) -> bool:
        """Whether first questions go to both models of the pair (both calibrated), not by their words
        (without loading the second model)."""
        other = self._aggregation_model
        if other is None or self.calibration is None:
            return False
        return bool(other.calibrated) if callable(other) else other.calibration is not None

    def answer_encoded(self, encoded: Sequence[Encoded]) -> List[AskResult]:
        """Answers questions already encoded (`encode`), about any tables, batched by bucket:
        how a server answers the questions of concurrent requests together (`batching`)."""
        return self._run(encoded)

    # --- the model --------------------------------------------------------------------------------

    def warm_up(self, lengths: Optional[Sequence[int]] = None) -> Tuple[int, ...]:
        """Traces the model function of each bucket length (default every bucket of the encoder) and
        loads the tokenizer, so that no question waits for them (seconds); a server calls it before
        it listens.

        Returns the lengths traced.
        """
        self.encoder.encode(self.encoder.prepare(pd.DataFrame({"warm": ["up"]})), "warm up")
        lengths = tuple(lengths or self.encoder.buckets)
        for length in lengths:
            row = {name: np.zeros(length, np.int32) for name in MODEL_INPUT_FEATURES}
            row["input_mask"][:] = 1  # Only the trace matters; a real mask keeps the softmax finite.
            self._call(length, [row])
        if self._aggregation_model is not None:  # Loads it: a server's first such question waits for nothing.
            self.aggregation_model.warm_up()
        return lengths

    def _run(self, encoded: Sequence[Encoded], batch_size: int = 16) -> List[AskResult]:
        """Results in order: questions in one example batched by bucket (`_run_examples`), those over
        windows one by one (`_answer_windowed`)."""
        results: List[Optional[AskResult]] = [None] * len(encoded)
        examples = [i for i, item in enumerate(encoded) if not isinstance(item, WindowedQuestion)]
        for index, result in zip(examples, self._run_examples([encoded[i] for i in examples], batch_size)):
            results[index] = result
        for index, item in enumerate(encoded):
            if isinstance(item, WindowedQuestion):
                results[index] = self._answer_windowed(item)
        return results  # type: ignore[return-value]

    def _answer_windowed(self, item: WindowedQuestion, time_budget: Optional[float] = None) -> AskResult:
        """The answer over a table's windows (`window_reading`), from the model it was encoded for;
        of a question encoded for both models, the answer with the higher confidence. The aggregation
        model reads within this model's `time_budget`."""
        # pylint: disable=protected-access
        time_budget = time_budget or self.time_budget
        if item.for_aggregation_model:
            return self.aggregation_model._answer_windowed(dataclasses.replace(item, for_aggregation_model=False),
                                                           time_budget)
        bar = progress_bar(f"{self.display_name}: {item.rows_read:,} rows", self.progress)
        result = WindowReader(self.runner, self.rule, time_budget=time_budget, progress=bar).answer(item)
        rows = sorted({cell.row for cell in result.cells})
        found = total_rows([[cell.text for cell in item.table.table.rows[row].cells] for row in rows])
        mine = self._finish(result, item.follow_up, {rows[i] for i in found},
                            lambda row: [cell.text for cell in item.table.table.rows[row].cells])
        if item.alternative is None:
            return mine
        alternative = dataclasses.replace(item.alternative, for_aggregation_model=False)
        theirs = (self.aggregation_model._answer_windowed(alternative, time_budget)
                  if isinstance(alternative, WindowedQuestion) else self.aggregation_model._run([alternative])[0])
        return _chosen(theirs, mine) if theirs.confidence > mine.confidence else _chosen(mine, theirs)

    def _run_examples(self, encoded: Sequence[EncodedQuestion], batch_size: int) -> List[AskResult]:
        """Results of questions in one example each, in order: the questions encoded for the
        aggregation model are its to answer; of a question encoded for both (`alternative`), the
        answer with the higher confidence is kept."""
        theirs = [(i, item) for i, item in enumerate(encoded) if item.for_aggregation_model]
        theirs += [(i, item.alternative) for i, item in enumerate(encoded) if item.alternative is not None]
        if self._aggregation_model is None or not theirs:
            return self._run_here(encoded, batch_size)
        own = [i for i, item in enumerate(encoded) if not item.for_aggregation_model]
        results: List[Optional[AskResult]] = [None] * len(encoded)
        for index, result in zip(own, self._run_here([encoded[i] for i in own], batch_size)):
            results[index] = result
        # pylint: disable=protected-access
        for (index, _), result in zip(theirs,
                                      self.aggregation_model._run([dataclasses.replace(e, for_aggregation_model=False)
                                                                   for _, e in theirs], batch_size)):
            mine = results[index]
            if mine is None or result.confidence > mine.confidence:
                results[index] = _chosen(result, mine)
            else:
                results[index] = _chosen(mine, result)
        return results

    def _run_here(self, encoded: Sequence[EncodedQuestion], batch_size: int) -> List[AskResult]:
        """This model's results for `encoded`, batched by bucket length."""
        results: List[Optional[AskResult]] = [None] * len(encoded)
        for length, chunk in bucket_batches(encoded, batch_size):
            outputs = self._call(length, [encoded[i].features for i in chunk])
            for row, index in enumerate(chunk):
                logits = outputs.get("aggregation_logits")
                result = decode_answer(encoded[index], outputs["probabilities"][row],
                                       None if logits is None else logits[row], self.rule)
                results[index] = self._finish(result, encoded[index].follow_up,
                                              _total_rows_among(result, encoded[index].pruned),
                                              _row_texts(encoded[index].pruned))
        return results

    def _finish(self, result: AskResult, follow_up: bool, totals: Set[int],
                row_texts: arithmetic.RowTexts) -> AskResult:
        """`result` with the model's name, its confidence, what tapas-tf computes from its cells when
        the question asks for arithmetic (`arithmetic`), and notes where it may not be what was asked
        (`totals`: the rows of its cells that are the table's own total row; `row_texts`: a row's
        cell texts, the user's row index)."""
        computed = arithmetic.compute(result.question, result.cells, row_texts)
        if computed is not None:
            result = dataclasses.replace(result, computed=computed)
            notes: Tuple[str, ...] = (computed.note(),)
        else:
            notes = answer_notes(result, self.runner.has_aggregation_head, follow_up, totals)
        if self.calibration is None:
            # A raw score is not a probability of being right: shown, never used to flag an answer.
            confidence, sure = raw_confidence(result), None
        else:
            confidence = self.calibration.confidence(confidence_features(result, follow_up))
            sure = confidence >= self.calibration.threshold
        if sure is False:
            notes += (f"Not sure: this answer's confidence is {confidence:.2f} "
                      f"(about {round(100 * confidence)} in 100 answers this confident are right); "
                      "check it against the table.",)
        return dataclasses.replace(result, model=self.display_name, notes=notes, confidence=confidence,
                                   sure=sure, calibrated=self.calibration is not None, follow_up=follow_up)

    def _call(self, length: int, rows: Sequence[Mapping[str, np.ndarray]]) -> Mapping[str, np.ndarray]:
        """Model outputs for rows of one bucket length (see `runner`)."""
        return self.runner(length, rows)


def _total_rows_among(result: AskResult, pruned: PrunedTable) -> Set[int]:
    """The rows of `result`'s cells (user's indices) that are the table's own total row: only those
    rows are read, not the whole table, on every answer."""
    kept = {row: index for index, row in enumerate(pruned.rows)}
    rows = sorted({cell.row for cell in result.cells if cell.row in kept})
    found = total_rows([[cell.text for cell in pruned.table.rows[kept[row]].cells] for row in rows])
    return {rows[i] for i in found}


def _row_texts(pruned: PrunedTable) -> arithmetic.RowTexts:
    """A row's cell texts (the user's row index; a row the model did not see has none)."""
    kept = {row: index for index, row in enumerate(pruned.rows)}
    return lambda row: [cell.text for cell in pruned.table.rows[kept[row]].cells] if row in kept else []


def _chosen(result: AskResult, other: Optional[AskResult]) -> AskResult:
    """`result`, chosen over `other` (the other model's answer to the same question), with a note when
    the other model could compute what this one cannot."""
    if other is None or result.operator_probabilities or not other.operator_probabilities:
        return result
    if not any(note.startswith(CANNOT_AGGREGATE) for note in result.notes):
        return result
    notes = tuple(note for note in result.notes if not note.startswith(CANNOT_AGGREGATE))
    note = (f"This answer shows cells: the model that counts, adds and averages was less sure of its own "
            f"({other.summary}, confidence {other.confidence:.2f}) than this one ({result.confidence:.2f}).")
    return dataclasses.replace(result, notes=(note,) + notes)


def _bundled_name(model_dir: str) -> str:
    return f"bundled {os.path.basename(os.path.normpath(model_dir))}"


def _aggregation_loader(model_dir: str, options: Dict) -> Callable[[], TableQA]:
    """Loads the aggregation model of a pair when called; bundled ones are named like the first."""
    bundled = os.path.dirname(os.path.abspath(model_dir)) == os.path.abspath(BUNDLED_ROOT)
    name = _bundled_name(model_dir) if bundled else os.path.basename(os.path.normpath(model_dir))

    def load() -> TableQA:
        return TableQA.from_model_dir(model_dir, name=name, **options)

    load.name = name  # type: ignore[attr-defined]  # As a loaded TableQA's: `aggregation_model_name`.
    load.calibrated = os.path.exists(os.path.join(model_dir, CALIBRATION_FILE))  # type: ignore[attr-defined]
    return load


@dataclasses.dataclass
class Conversation:
    """Questions about one table, each seeing the previous answer (`prev_label_ids`), as in SQA."""

    qa: TableQA
    table: PreparedTable
    history: List[AskResult] = dataclasses.field(default_factory=list)

    def ask(self, question: str) -> AskResult:
        previous = self.history[-1] if self.history else None
        encoded = self.qa.encode(self.table, question, previous)
        result = self.qa._run([encoded])[0]  # pylint: disable=protected-access
        self.history.append(result)
        return result

    def reset(self) -> None:
        """Starts a new conversation about the same table."""
        self.history.clear()


def _previous_cells(previous: PreviousAnswer) -> Optional[Sequence[Tuple[int, int]]]:
    if previous is None:
        return None
    if isinstance(previous, AskResult):
        return previous.coordinates
    try:
        return [(int(r), int(c)) for r, c in previous]
    except (TypeError, ValueError):
        raise AskError("previous_answer is an AskResult or a list of (row, column) pairs") from None
