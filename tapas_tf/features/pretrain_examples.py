"""Interaction -> masked-LM pre-training examples (the `examples` stage of the pre-training job).

Each interaction (a table with the texts around it, as in Google's released corpus: questions
"TITLE", "DESCRIPTION", "SEGMENT_TITLE", "SEGMENT_TEXT", "CAPTION") makes `dupe_factor` examples.
Duplicate `d` of table `t` draws every random choice from its own `random.Random`, seeded with
a SHA-256 fingerprint of (t, d, random_seed) (`pretrain_config.example_seed`), so the output does
not depend on worker order, process or runner.

One example, in the order the random choices are drawn:

1. *Snippet.* One of the interaction's distinct non-empty texts (`text`, else `original_text`),
   uniformly among those with at least `min_snippet_pieces` pieces (all texts if none has that
   many); then a span of whole words at a random start word with a random target length in
   [min_snippet_pieces, max_snippet_pieces] pieces. Texts shorter than the minimum are taken
   whole. Only when a single word has more pieces than the maximum is it cut (and counted).
2. *Table.* The budget is `max_seq_length - len(snippet) - 2` ([CLS], [SEP]). First the first
   word of every column name and cell, then words turn by turn: the second word of every cell
   that has one (header, then body rows, each row left to right), then the third, ...; taking
   stops at the first word that does not fit, so the words kept are a prefix of that order.
   When the first words of all rows do not fit, the largest number of consecutive rows that fits
   is kept, at a random start among the blocks of that size. A random block rather than the first
   rows: the `dupe_factor` duplicates of a long table then show different parts of it instead of
   its first rows ten times. Dropped rows are counted (`rows_dropped`).
3. *Masking* (BERT / TAPAS): candidates are the whole words of the snippet and the whole cells of
   the table (words of cells if `always_continue_cells` is off), in random order; a candidate is
   taken whole while the count stays within max(1, round(masked_lm_prob * tokens)) and
   max_predictions_per_seq, otherwise skipped. Each chosen piece becomes [MASK] (80%), stays
   (10%) or becomes a random vocabulary piece that is not a bracketed special token (10%).

Layout (as in classifier examples): `[CLS] snippet [SEP] header body`, padded to
`max_seq_length`; snippet tokens have segment 0, column 0, row 0; header tokens row 0; body rows
are numbered 1.. in the order kept; columns from 1. Column ranks come from the whole table
(`table_encoding`), clamped to the rank vocabulary and counted. prev_label_ids and
numeric_relations are 0. Feature names, dtypes and shapes: `example_features` (pre-training part).
"""

import bisect
import dataclasses
import random
from collections.abc import Iterator, Sequence

import numpy as np

from tapas_tf.data.protos import interaction_pb2
from tapas_tf.features import example_features
from tapas_tf.features.classifier_examples import (
    STAT_CELLS_TRIMMED,
    STAT_RANKS_CLAMPED,
    STAT_ROWS_DROPPED,
    table_id_hash,
)
from tapas_tf.features.conversion_config import ConversionConfig, ConversionError, Reason
from tapas_tf.features.pretrain_config import (
    MAX_COLUMN_ID,
    NUM_SPECIAL_TOKENS,
    PretrainConfig,
    PretrainSkip,
    SkipReason,
    example_seed,
)
from tapas_tf.features.pretrain_layout import (
    Cell,
    TokenSequence,
    Words,
    first_word_cost,
    is_number_text,
    row_block,
    split_words,
    words_turn_by_turn,
)
from tapas_tf.features.table_encoding import EncodedTable

# A limit applied to a kept example: the snippet is one word cut to max_snippet_pieces.
STAT_SNIPPET_WORD_CUT = "snippet_word_cut"
STATS = (STAT_ROWS_DROPPED, STAT_CELLS_TRIMMED, STAT_RANKS_CLAMPED, STAT_SNIPPET_WORD_CUT)

_TABLE_REASONS = {Reason.EMPTY_TABLE: SkipReason.EMPTY_TABLE, Reason.RAGGED_TABLE: SkipReason.RAGGED_TABLE}


@dataclasses.dataclass
class PretrainExample:
    """One masked-LM example: `features` as in `example_features` (NumPy arrays, table_id a str),
    and the limits applied to make it (`STATS`, counts, 0 when none)."""

    table_id: str
    duplicate_index: int
    features: dict[str, object]
    stats: dict[str, int]

    def to_tf_example(self):
        return example_features.to_pretrain_tf_example(self.features)


@dataclasses.dataclass(frozen=True)
class _Prepared:
    """What every duplicate of an interaction shares."""

    table_id: str
    texts: list[Words]  # The snippet is drawn from these.
    header: list[Cell]
    rows: list[list[Cell]]
    header_cost: int  # Pieces of the first word of every column name.
    row_costs: list[int]  # Pieces of the first word of every cell, per body row.


class PretrainExampleMaker:
    """Makes `config.dupe_factor` masked-LM examples per interaction.

    Args:
      config: PretrainConfig.
      tokenizer: a `TapasTokenizer`; by default one is built from `config.vocab_file`.

    Example:
      >>> maker = PretrainExampleMaker(PretrainConfig(vocab_file="vocab.txt"))
      >>> for result in maker.make(interaction):
      ...     if isinstance(result, PretrainSkip): count(result.reason.value)
      ...     else: write(result.to_tf_example())
    """

    def __init__(self, config: PretrainConfig, tokenizer=None):
        if tokenizer is None:
            from tapas_tf.features.tokenization import TapasTokenizer

            tokenizer = TapasTokenizer(config.vocab_file)
        self.config = config
        self.tokenizer = tokenizer
        # Only the tokenisation, shape checks, ranks and values of EncodedTable are used.
        self._table_config = ConversionConfig.from_options(config.vocab_file,
                                                           max_seq_length=config.max_seq_length)
        # Random replacements: any piece but the bracketed special ones ([CLS], [unused1], ...).
        pieces = tokenizer.convert_ids_to_tokens(range(tokenizer.vocab_size))
        self._random_ids = [i for i, p in enumerate(pieces)
                            if not (len(p) > 2 and p[0] == "[" and p[-1] == "]")]
        if not self._random_ids:
            raise ValueError(f"Vocabulary {tokenizer.vocab_file} has no piece that is not a special token.")

    # --- public API ---------------------------------------------------------------

    def make(self, interaction: interaction_pb2.Interaction) -> Iterator[PretrainExample | PretrainSkip]:
        """Yields exactly `dupe_factor` results: an example or a skip per duplicate index."""
        prepared = self._prepare(interaction)
        for duplicate_index in range(self.config.dupe_factor):
            if isinstance(prepared, PretrainSkip):
                yield dataclasses.replace(prepared, duplicate_index=duplicate_index)
            else:
                yield self._make(prepared, duplicate_index)

    # --- per interaction ------------------------------------------------------------

    def _prepare(self, interaction: interaction_pb2.Interaction) -> _Prepared | PretrainSkip:
        table = interaction.table
        table_id = table.table_id or interaction.id
        if not table_id:
            return PretrainSkip(SkipReason.MISSING_TABLE_ID,
                                "neither the table nor the interaction has an id")
        if len(table.columns) > MAX_COLUMN_ID:
            return PretrainSkip(SkipReason.TOO_MANY_COLUMNS,
                                f"table {table_id!r} has {len(table.columns)} columns; at most "
                                f"{MAX_COLUMN_ID} have column ids", table_id)
        try:
            encoded = EncodedTable(table, self.tokenizer, self._table_config)
        except ConversionError as error:
            return PretrainSkip(_TABLE_REASONS[error.reason], error.detail, table_id)
        texts = self._texts(interaction)
        if not texts:
            return PretrainSkip(SkipReason.NO_TEXT,
                                f"none of the {len(interaction.questions)} texts of table {table_id!r} "
                                f"has a word piece", table_id)
        long_texts = [t for t in texts if len(t.ids) >= self.config.min_snippet_pieces]
        header = [Cell(self._cell_words(tokens), is_number_text(column.text))
                  for tokens, column in zip(encoded.header, encoded.table.columns)]
        rows = []
        for r, (row_tokens, row) in enumerate(zip(encoded.rows, encoded.table.rows)):
            rows.append([
                Cell(self._cell_words(tokens), is_number_text(cell.text), int(encoded.ranks[r, c]),
                     int(encoded.inv_ranks[r, c]), float(encoded.numeric_values[r, c]))
                for c, (tokens, cell) in enumerate(zip(row_tokens, row.cells))])
        return _Prepared(
            table_id=table_id,
            texts=long_texts or texts,
            header=header,
            rows=rows,
            header_cost=sum(first_word_cost(cell) for cell in header),
            row_costs=[sum(first_word_cost(cell) for cell in row) for row in rows],
        )

    def _texts(self, interaction: interaction_pb2.Interaction) -> list[Words]:
        """The distinct texts of the interaction that have word pieces, in order."""
        texts = list(dict.fromkeys(q.text or q.original_text for q in interaction.questions))
        texts = [t for t in texts if t.strip()]
        if not texts:
            return []
        words = []
        for ids in self.tokenizer.tokenize_to_ids_batch(texts):
            if ids:
                words.append(split_words(ids, self.tokenizer.convert_ids_to_tokens(ids)))
        return words

    def _cell_words(self, tokens) -> Words:
        ends = tokens.word_starts[1:].tolist()
        if self.config.always_continue_cells:  # Cells are masked whole: words need no flag.
            return Words(ids=list(tokens.ids), word_ends=ends, is_number=[])
        return split_words(list(tokens.ids), self.tokenizer.convert_ids_to_tokens(tokens.ids))

    # --- per duplicate --------------------------------------------------------------

    def _make(self, prepared: _Prepared, duplicate_index: int) -> PretrainExample | PretrainSkip:
        config = self.config
        rng = random.Random(example_seed(prepared.table_id, duplicate_index, config.random_seed))
        snippet, snippet_cut = self._snippet(prepared.texts, rng)
        budget = config.max_seq_length - len(snippet.ids) - NUM_SPECIAL_TOKENS
        if prepared.header_cost > budget:
            return PretrainSkip(
                SkipReason.HEADER_TOO_LONG,
                f"table {prepared.table_id!r}: the first words of the {len(prepared.header)} column "
                f"names take {prepared.header_cost} pieces; {budget} are left after the snippet",
                prepared.table_id, duplicate_index)
        start, num_rows = row_block(prepared.row_costs, budget - prepared.header_cost, rng)
        if not num_rows:
            return PretrainSkip(
                SkipReason.NO_ROW_FITS,
                f"table {prepared.table_id!r}: no body row fits beside the header "
                f"({prepared.header_cost} of {budget} pieces left after the snippet)",
                prepared.table_id, duplicate_index)
        tokens = TokenSequence(config.max_seq_length, self.tokenizer.cls_id, snippet, self.tokenizer.sep_id)
        table_stats = self._add_table(tokens, prepared, start, num_rows, budget)
        features = self._mask(tokens, rng)
        features["table_id"] = prepared.table_id
        features["table_id_hash"] = np.asarray([table_id_hash(prepared.table_id)], np.int64)
        features["next_sentence_labels"] = np.zeros([1], np.int64)
        stats = {STAT_ROWS_DROPPED: len(prepared.rows) - num_rows, STAT_SNIPPET_WORD_CUT: int(snippet_cut),
                 **table_stats}
        return PretrainExample(prepared.table_id, duplicate_index, features, stats)

    def _snippet(self, texts: Sequence[Words], rng: random.Random) -> tuple[Words, bool]:
        """A span of whole words of one text, and whether its only word had to be cut."""
        low, high = self.config.min_snippet_pieces, self.config.max_snippet_pieces
        text = texts[rng.randrange(len(texts))]
        total = len(text.ids)
        if total <= low:
            return text, False
        starts = [0] + text.word_ends[:-1]
        # The start word leaves at least `low` pieces after it.
        first = rng.randrange(bisect.bisect_right(starts, total - low))
        begin = starts[first]
        target = rng.randint(low, high)
        ends = text.word_ends[first:]
        fit = bisect.bisect_right(ends, begin + target) - 1  # Last word end within the target.
        if fit >= 0 and ends[fit] - begin >= low:
            last = fit
        elif ends[fit + 1] - begin <= high:  # A long word crosses the target: take it if it fits.
            last = fit + 1
        elif fit >= 0:  # Shorter than the minimum: the next word would exceed the maximum.
            last = fit
        else:  # One word longer than the maximum: cut it.
            return Words(text.ids[begin:begin + high], [high], text.is_number[first:first + 1]), True
        word_ends = [end - begin for end in ends[:last + 1]]
        numbers = text.is_number[first:first + last + 1]
        return Words(text.ids[begin:begin + word_ends[-1]], word_ends, numbers), False

    def _add_table(self, tokens: TokenSequence, prepared: _Prepared, start: int, num_rows: int,
                   budget: int) -> dict[str, int]:
        """Appends the header and rows [start, start + num_rows), words turn by turn."""
        rows = [prepared.header] + prepared.rows[start:start + num_rows]
        cells = [cell for row in rows for cell in row]
        remaining = budget - prepared.header_cost - sum(prepared.row_costs[start:start + num_rows])
        num_words = words_turn_by_turn(cells, remaining)
        max_rank = self._table_config.max_rank
        continue_cells = self.config.always_continue_cells
        trimmed = clamped = 0
        index = 0
        for row_id, row in enumerate(rows):
            for column, cell in enumerate(row):
                words = num_words[index]
                index += 1
                trimmed += words < len(cell.words.word_ends)
                clamped += cell.rank > max_rank or cell.inv_rank > max_rank
                tokens.add_cell(cell, words, column + 1, row_id, min(cell.rank, max_rank),
                                min(cell.inv_rank, max_rank), continue_cells)
        return {STAT_CELLS_TRIMMED: trimmed, STAT_RANKS_CLAMPED: clamped}

    def _mask(self, tokens: TokenSequence, rng: random.Random) -> dict[str, object]:
        """Masks whole units; returns the token and masked-LM features."""
        config = self.config
        units = list(tokens.units)
        rng.shuffle(units)
        num_to_predict = min(config.max_predictions_per_seq,
                             max(1, round(len(tokens.ids) * config.masked_lm_prob)))
        input_ids = list(tokens.ids)
        masked: list[tuple[int, int, bool]] = []
        for unit in units:
            if len(masked) >= num_to_predict:
                break
            if len(masked) + unit.end - unit.begin > num_to_predict:
                continue  # Never a partial word or cell.
            for position in range(unit.begin, unit.end):
                if rng.random() < 0.8:
                    input_ids[position] = self.tokenizer.mask_id
                elif rng.random() >= 0.5:  # Else: unchanged.
                    input_ids[position] = self._random_ids[rng.randrange(len(self._random_ids))]
                masked.append((position, unit.location, unit.is_number))
        masked.sort()
        pad = config.max_predictions_per_seq - len(masked)
        positions = [m[0] for m in masked]
        features = tokens.features(input_ids)
        features.update({
            "masked_lm_positions": np.asarray(positions + [0] * pad, np.int64),
            "masked_lm_ids": np.asarray([tokens.ids[p] for p in positions] + [0] * pad, np.int64),
            "masked_lm_weights": np.asarray([1.0] * len(masked) + [0.0] * pad, np.float32),
            "masked_lm_location": np.asarray([m[1] for m in masked] + [0] * pad, np.int64),
            "masked_lm_is_number": np.asarray([int(m[2]) for m in masked] + [0] * pad, np.int64),
        })
        return features


