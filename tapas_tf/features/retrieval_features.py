"""Features of the retrieval dual encoder: a question alone, and a table with its title.

The question tower reads `[CLS] question [SEP]`, at most `max_query_length` word pieces (longer
questions are cut, and counted). The table tower reads what TAPAS reads for a question, with the
table's title in the question's place, as Google's retriever does:

    [CLS] title [SEP] header cells, then body cells row by row     (TAPAS's token types)

within `max_table_length` word pieces: the title is cut to a quarter of the budget, the table to
its first `max_columns` columns, and the rows that do not fit are dropped (`drop_rows_to_fit`);
each cut is counted in the `TableFeatures.stats`.

    >>> encoder = RetrievalFeatures.create(vocab_file=None, max_query_length=16, max_table_length=64)  # doctest: +SKIP
    >>> ids, mask = encoder.questions(["how tall is torre jaume i?"])                                 # doctest: +SKIP
    >>> table = encoder.table(table_proto, title="Aerial lift pylons")                                 # doctest: +SKIP
    >>> table.features["input_ids"].shape                                                              # doctest: +SKIP
    (64,)
"""

import dataclasses
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from tapas_tf.data import number_annotation
from tapas_tf.data.protos import interaction_pb2
from tapas_tf.features.classifier_examples import ConversionError, ExampleConverter
from tapas_tf.features.conversion_config import ConversionConfig
from tapas_tf.features.example_features import TOKEN_TYPE_FEATURES

TABLE_INPUT_FEATURES = ("input_ids", "input_mask") + tuple(TOKEN_TYPE_FEATURES)
# Statistics of the cuts, summed by callers into their reports.
STAT_QUESTION_CUT = "question_pieces_cut"
STAT_TITLE_CUT = "title_words_cut"
STAT_COLUMNS_CUT = "columns_cut"
STAT_ROWS_CUT = "rows_cut"


@dataclasses.dataclass(frozen=True)
class TableFeatures:
    """One table's input to the table tower.

    Attributes:
      features: TABLE_INPUT_FEATURES -> <int32>[max_table_length].
      stats: what was cut to fit: STAT_* -> count (only non-zero entries).
    """

    features: Dict[str, np.ndarray]
    stats: Dict[str, int]


class RetrievalFeatures:
    """Builds question and table features for a `TableDualEncoder` (see the module docstring).

    Args:
      config: the table conversion's options; its `max_seq_length` is the table budget.
      max_query_length: word pieces of a question, [CLS] and [SEP] included.
      max_columns: columns of a table kept (the first ones).
      tokenizer: default, the tokenizer of `config.vocab_file`.
    """

    def __init__(self, config: ConversionConfig, max_query_length: int, max_columns: int = 32, tokenizer=None):
        if max_query_length < 3:
            raise ValueError(f"max_query_length must be at least 3, got {max_query_length}")
        self.config = config
        self.max_query_length = max_query_length
        self.max_columns = min(max_columns, config.max_column_id - 1)
        self.converter = ExampleConverter(config, tokenizer)
        self.tokenizer = self.converter.tokenizer

    @classmethod
    def create(cls, vocab_file: Optional[str], max_query_length: int, max_table_length: int,
               max_column_id: int = 256, max_row_id: int = 256, tokenizer=None) -> "RetrievalFeatures":
        """The features of a model with these lengths; `max_*_id` are its token-type table sizes."""
        config = ConversionConfig.from_options(vocab_file, max_seq_length=max_table_length,
                                               max_column_id=max_column_id, max_row_id=max_row_id,
                                               drop_rows_to_fit=True, fail_on_dropped_answers=False)
        return cls(config, max_query_length, tokenizer=tokenizer)

    @property
    def max_table_length(self) -> int:
        return self.config.max_seq_length

    # --- questions ------------------------------------------------------------------------------

    def question_ids(self, question: str) -> Tuple[List[int], int]:
        """([CLS] pieces [SEP] ids, number of pieces cut) of one question."""
        pieces = self.tokenizer.tokenize(question)
        keep = self.max_query_length - 2
        ids = self.tokenizer.convert_tokens_to_ids(pieces[:keep])
        return [self.tokenizer.cls_id] + list(ids) + [self.tokenizer.sep_id], max(len(pieces) - keep, 0)

    def questions(self, questions: Sequence[str]) -> Tuple[np.ndarray, np.ndarray, int]:
        """Padded ids and mask <int32>[len(questions), longest], and the word pieces cut in all.

        Padding goes to the longest question of the batch, not to max_query_length: a short
        question costs only its own length.
        """
        encoded = [self.question_ids(q) for q in questions]
        longest = max((len(ids) for ids, _ in encoded), default=2)
        input_ids = np.zeros([len(encoded), longest], np.int32)
        input_mask = np.zeros([len(encoded), longest], np.int32)
        for row, (ids, _) in enumerate(encoded):
            input_ids[row, :len(ids)] = ids
            input_mask[row, :len(ids)] = 1
        return input_ids, input_mask, sum(cut for _, cut in encoded)

    # --- tables ---------------------------------------------------------------------------------

    def table(self, table: interaction_pb2.Table, title: str = "") -> TableFeatures:
        """The table tower's features of `table` under `title`.

        Raises:
          ConversionError: a table the converter refuses (e.g. not even its header fits).
        """
        stats: Dict[str, int] = {}
        rows_total = len(table.rows)
        title = self._fit_title(title, stats)
        table = self._first_columns(table, stats)
        number_annotation.add_numeric_table_values(table)
        interaction = interaction_pb2.Interaction(id=table.table_id or "table", table=table)
        # The question slot holds the title; no answer: the converter's labels go unused.
        interaction.questions.add(id="title", original_text=title, text=title)
        example = self.converter.convert(interaction, 0)
        features = {name: np.asarray(example.features[name], np.int32) for name in TABLE_INPUT_FEATURES}
        rows_kept = int(np.max(features["row_ids"]))
        if rows_kept < rows_total:
            stats[STAT_ROWS_CUT] = rows_total - rows_kept
        return TableFeatures(features, stats)

    def _fit_title(self, title: str, stats: Dict[str, int]) -> str:
        """The title's first words within a quarter of the table budget."""
        budget = max(self.max_table_length // 4, 1)
        words = title.split()
        kept = len(words)
        while kept and len(self.tokenizer.tokenize(" ".join(words[:kept]))) > budget:
            kept -= 1
        if kept < len(words):
            stats[STAT_TITLE_CUT] = len(words) - kept
        return " ".join(words[:kept])

    def _first_columns(self, table: interaction_pb2.Table, stats: Dict[str, int]) -> interaction_pb2.Table:
        """A copy of `table` with its first max_columns columns (and, since a token is at least one
        per cell, at most as many rows as could ever fit)."""
        copy = interaction_pb2.Table()
        copy.CopyFrom(table)
        columns = len(table.columns)
        max_rows = min(self.config.max_row_id - 1, self.max_table_length)
        if columns > self.max_columns:
            stats[STAT_COLUMNS_CUT] = columns - self.max_columns
            del copy.columns[self.max_columns:]
            for row in copy.rows:
                del row.cells[self.max_columns:]
        if len(copy.rows) > max_rows:
            del copy.rows[max_rows:]
        return copy


def stack_tables(tables: Sequence[TableFeatures]) -> Dict[str, np.ndarray]:
    """TABLE_INPUT_FEATURES -> <int32>[len(tables), longest real length] (padding cut off)."""
    if not tables:
        raise ValueError("stack_tables needs at least one table")
    longest = max(int(t.features["input_mask"].sum()) for t in tables)
    return {name: np.stack([t.features[name][:longest] for t in tables]) for name in TABLE_INPUT_FEATURES}


__all__ = ["ConversionError", "RetrievalFeatures", "TableFeatures", "TABLE_INPUT_FEATURES", "stack_tables"]
