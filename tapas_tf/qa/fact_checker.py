"""Is a statement about a table true? Table entailment (TabFact) in the Python API.

    checker = TableFactChecker.from_model_dir()                  # the bundled TabFact model
    result = checker.verify("cities.csv", "paris has more people than rome")   # or a DataFrame
    result.entailed         # True: the table supports the statement
    result.probability      # P(entailed), the softmax of the two logits (label 1 = entailed)

    checker.verify_many(frame, ["statement 1", "statement 2"])   # one conversion, batched
    TableFactChecker.from_pretrained("google/tapas-base-finetuned-tabfact")   # a released model

A TabFact model is a TAPAS encoder with a classifier on the pooled [CLS] output (the model
config's `num_classification_labels == 2`): trained here (`run_task --task=TABFACT`), imported
from Hugging Face's `TapasForSequenceClassification` or Google's TabFact releases, or bundled. The
statement is encoded as a question is for `TableQA` (the same encoder, buckets and pruning of tables
too big for the model: the rows and columns most related to the statement are kept, and the
result's `diagnostics` say so), and either backend runs it: the model directory's LiteRT copy
when it has a current one, else TensorFlow.

This module imports no TensorFlow; the TensorFlow backend loads it when chosen.
"""

import dataclasses
import os
from typing import List, Optional, Sequence, Tuple

import numpy as np
import pandas as pd

from tapas_tf.checkpoints import model_dir as model_dir_lib
from tapas_tf.checkpoints.bundled import bundled_tabfact_model_dir
from tapas_tf.inference.decoding import entailed_probability  # noqa: F401 (part of this API)
from tapas_tf.qa.ask_encoding import EncodedQuestion, TableEncoder, bucket_batches
from tapas_tf.qa.backends import BACKENDS
from tapas_tf.qa.runners import load_runner
from tapas_tf.qa.tables import AskError, TableLike



@dataclasses.dataclass(frozen=True)
class VerifyResult:
    """The verdict on one statement.

    Attributes:
      statement: the statement as given.
      entailed: whether the table supports it (probability >= the checker's threshold).
      probability: P(entailed) under the model, softmax(classification_logits)[1].
      model: which model judged it.
      diagnostics: what a user should know about the input, one sentence each (a pruned table, a
        statement cut to fit, cells shortened).
      table: the table the model read (after pruning), as a DataFrame of strings.
    """

    statement: str
    entailed: bool
    probability: float
    model: str
    diagnostics: Tuple[str, ...] = ()
    table: Optional[pd.DataFrame] = dataclasses.field(default=None, compare=False, repr=False)

    @property
    def verdict(self) -> str:
        return "entailed" if self.entailed else "refuted"

    def to_dict(self) -> dict:
        """The JSON form: statement, entailed, verdict, probability, model, diagnostics."""
        return {"statement": self.statement, "entailed": self.entailed, "verdict": self.verdict,
                "probability": round(self.probability, 6), "model": self.model,
                "diagnostics": list(self.diagnostics)}


class TableFactChecker:
    """A loaded TabFact model that judges statements about tables.

    Args:
      runner: runs the model (`tf_runner.TensorFlowRunner` or `lite_model.LiteRunner`); its outputs
        must include "classification_logits" <float32>[rows, 2].
      encoder: the matching `TableEncoder`.
      name: which model this is; every result carries it.
      threshold: P(entailed) at or above which a statement is judged entailed.
    """

    def __init__(self, runner, encoder: TableEncoder, name: str = "model", threshold: float = 0.5):
        if not getattr(runner, "has_classification_head", False):
            raise ValueError(f"{name}: the model has no classification head; a TabFact model (trained with "
                             "--task=TABFACT, or a released *-finetuned-tabfact model) judges statements")
        if not 0.0 < threshold < 1.0:
            raise ValueError(f"threshold must be between 0 and 1, got {threshold}")
        self.runner = runner
        self.encoder = encoder
        self.name = name
        self.threshold = threshold

    @property
    def backend(self) -> str:
        return self.runner.backend

    @classmethod
    def from_model_dir(cls, model_dir: Optional[str] = None, checkpoint: Optional[str] = None,
                       vocab_file: Optional[str] = None, prune: bool = True, max_seq_length: Optional[int] = None,
                       backend: str = "auto", name: Optional[str] = None, threshold: float = 0.5,
                       ) -> "TableFactChecker":
        """Loads a TabFact model directory (trained here, imported, or compact); without one, the
        bundled TabFact model (`checkpoints.bundled.bundled_tabfact_model_dir`).

        Raises:
          FileNotFoundError: no model directory, or none bundled with this installation.
          ValueError: the model has no two-class classification head.
        """
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
        if model_dir is None:
            model_dir = bundled_tabfact_model_dir()
            name = name or f"bundled {os.path.basename(os.path.normpath(model_dir))}"
        name = name or os.path.basename(os.path.normpath(model_dir))
        config = model_dir_lib.load_config(model_dir)
        if config.num_classification_labels != 2:
            raise ValueError(f"{model_dir}: the model has {config.num_classification_labels} classification "
                             "labels; a TabFact model has 2 (refuted, entailed)")
        runner, config = load_runner(model_dir, checkpoint, backend, jit_compile=False, precision="float32")
        encoder = TableEncoder.for_model_dir(model_dir, config, vocab_file, prune=prune,
                                             max_seq_length=max_seq_length)
        return cls(runner, encoder, name, threshold)

    @classmethod
    def from_pretrained(cls, name: str, revision: Optional[str] = None, token: Optional[str] = None,
                        force_download: bool = False, **options) -> "TableFactChecker":
        """Loads a released TabFact model by name (`google/tapas-base-finetuned-tabfact`, a Google
        TabFact release zip), downloading and importing it on first use and offline afterwards, as
        `TableQA.from_pretrained` does. The other keyword options are `from_model_dir`'s.

        Raises:
          ReleasedModelError (a ValueError): one line (no such model, no network and no cached copy,
            a model that does not classify statements, ...).
        """
        from tapas_tf.checkpoints import released  # pylint: disable=import-outside-toplevel

        model_dir = released.released_model_dir(name, revision, token=token, force_download=force_download,
                                                task="classification")
        options.setdefault("name", released.parse_name(name, revision).display)
        return cls.from_model_dir(model_dir, **options)

    # --- judging --------------------------------------------------------------------------------

    def verify(self, table: TableLike, statement: str) -> VerifyResult:
        """The verdict on one statement about `table` (a DataFrame, a CSV path or rows)."""
        return self.verify_many(table, [statement])[0]

    def verify_many(self, table: TableLike, statements: Sequence[str], batch_size: int = 16) -> List[VerifyResult]:
        """Verdicts on statements about one table: one conversion of the table, batched by bucket.

        Raises:
          AskError: an empty statement, or a table that does not fit with pruning off.
        """
        if isinstance(statements, str):
            raise AskError("verify_many takes a list of statements; verify takes one")
        prepared = self.encoder.prepare(table)
        encoded = [self.encoder.encode(prepared, statement) for statement in statements]
        probabilities = np.zeros(len(encoded), np.float32)
        for length, chunk in bucket_batches(encoded, batch_size):
            outputs = self.runner(length, [encoded[i].features for i in chunk])
            probabilities[chunk] = entailed_probability(outputs["classification_logits"])
        return [self._result(item, float(p)) for item, p in zip(encoded, probabilities)]

    def _result(self, encoded: EncodedQuestion, probability: float) -> VerifyResult:
        return VerifyResult(statement=encoded.question, entailed=probability >= self.threshold,
                            probability=probability, model=self.name, diagnostics=encoded.diagnostics,
                            table=_seen_table(encoded))


def _seen_table(encoded: EncodedQuestion) -> pd.DataFrame:
    """The table the model read, with the user's row numbers as the index."""
    table = encoded.pruned.table
    columns = [column.text for column in table.columns]
    rows = [[cell.text for cell in row.cells] for row in table.rows]
    return pd.DataFrame(rows, columns=pd.Index(columns), index=pd.Index(list(encoded.pruned.rows), name="row"))
