"""The word pieces of a table's cells, each distinct text tokenised once and held in flat arrays.

    header, pieces, cell_texts = tokenize_table(tokenizer, table, strip_header=False)
    pieces.cell(cell_texts[r, c])       # CellTokens of body cell (r, c)
    pieces.trimmed(cap)[cell_texts]     # <int64>[num_rows, num_columns] pieces kept under a cap

Trimming rule (as in the original TAPAS): with a cap of `k` pieces per cell, a cell keeps every
word piece whose word starts before position `k`, so words are never cut in half.
"""

import dataclasses
import threading
from typing import Dict, List, Sequence, Tuple

import numpy as np

from tapas_tf.data.protos import interaction_pb2

_TOKENIZE_ROWS = 10_000  # Rows tokenised in one batch (distinct texts only).


@dataclasses.dataclass
class CellTokens:
    ids: List[int]
    # Positions where a word starts, ascending, followed by len(ids).
    word_starts: np.ndarray

    def trimmed_length(self, cap: int) -> int:
        """Tokens kept under a cap of `cap` tokens (whole words only)."""
        if len(self.ids) <= cap:
            return len(self.ids)
        return int(self.word_starts[np.searchsorted(self.word_starts, cap)])


class CellPieces:
    """The word pieces of every distinct cell text of a table, in flat arrays.

    A 100,000-row table has hundreds of thousands of distinct texts (ids, amounts, names); a
    Python object per text held ~90 MB there, these arrays ~10. Text `t`'s pieces are
    `ids[offsets[t]:offsets[t + 1]]`, and its word starts (ascending, then its length, as
    `CellTokens.word_starts`) are `starts[start_offsets[t]:start_offsets[t + 1]]`.

    Attributes:
      ids: <int32>[pieces]; offsets: <int64>[texts + 1]; starts: <int32>[word starts + sentinels];
      start_offsets: <int64>[texts + 1]; lengths: <int64>[texts] pieces of each text.
    """

    def __init__(self, ids: np.ndarray, offsets: np.ndarray, starts: np.ndarray, start_offsets: np.ndarray):
        self.ids, self.offsets, self.starts, self.start_offsets = ids, offsets, starts, start_offsets
        self.lengths = np.diff(offsets)
        self._trimmed: Dict[int, np.ndarray] = {}
        self._lock = threading.Lock()  # Windows of one table may be planned on several threads.

    def __len__(self) -> int:
        return len(self.lengths)

    def cell(self, text: int) -> CellTokens:
        """Text `text`'s pieces as a `CellTokens`."""
        ids = self.ids[self.offsets[text]:self.offsets[text + 1]]
        starts = self.starts[self.start_offsets[text]:self.start_offsets[text + 1]]
        return CellTokens(ids=ids.tolist(), word_starts=starts.astype(np.int64))

    def trimmed_by_cap(self, max_cap: int) -> np.ndarray:
        """<int64>[texts, max_cap]: column k - 1 is `trimmed(k)`, every cap at once (a table's fitting
        costs, `EncodedTable.cost`)."""
        out = np.repeat(self.lengths[:, None], max_cap, axis=1)  # A cap at or past a text's length.
        starts = self.starts.astype(np.int64)
        counts = np.diff(self.start_offsets)
        follows = np.ones(len(starts), bool)  # Whether a start follows another of its text.
        follows[self.start_offsets[:-1][counts > 0]] = False
        at = np.flatnonzero(follows)
        # Between consecutive word starts s < s' of a text, each cap in (s, s'] keeps s' pieces.
        previous, current = starts[at - 1], starts[at]
        span = current - previous
        caps = np.repeat(previous - (np.cumsum(span) - span), span) + np.arange(int(span.sum())) + 1
        texts = np.repeat(np.repeat(np.arange(len(self)), counts)[at], span)
        kept = caps <= max_cap
        out[texts[kept], caps[kept] - 1] = np.repeat(current, span)[kept]
        return out

    def trimmed(self, cap: int) -> np.ndarray:
        """<int64>[texts]: pieces each text keeps under a cap of `cap` (`CellTokens.trimmed_length`)."""
        cached = self._trimmed.get(cap)
        if cached is not None:
            return cached
        out = self.lengths.copy()
        long = np.flatnonzero(self.lengths > cap)
        if len(long):
            # Each long text's word starts; the first at or past the cap (its sentinel, the length,
            # always is) is where it is cut.
            counts = self.start_offsets[long + 1] - self.start_offsets[long]
            ends = np.cumsum(counts)
            position = np.repeat(self.start_offsets[long] - (ends - counts), counts) + np.arange(int(ends[-1]))
            values = self.starts[position]
            hit = values >= cap
            texts, first = np.unique(np.repeat(np.arange(len(long)), counts)[hit], return_index=True)
            out[long[texts]] = values[hit][first]
        with self._lock:
            if cap not in self._trimmed and len(self._trimmed) >= 8:
                self._trimmed.pop(next(iter(self._trimmed)))
            self._trimmed[cap] = out
        return out


def tokenize_table(tokenizer, table: interaction_pb2.Table, strip_header: bool
                    ) -> Tuple[List[CellTokens], CellPieces, np.ndarray]:
    """(the header's CellTokens; the pieces of every distinct body text; <int32>[num_rows, num_columns]
    each body cell's text in them). Each distinct text is tokenised once, a block of rows per batch
    (a big table repeats most of its texts: cities, statuses, small numbers)."""
    header_texts = ["" if strip_header else cell.text for cell in table.columns]
    header = [_cell_tokens(tokens, tokenizer.convert_tokens_to_ids(tokens))
              for tokens in tokenizer.tokenize_cells(header_texts)]
    index: Dict[str, int] = {}
    ids: List[np.ndarray] = []
    starts: List[np.ndarray] = []
    id_counts: List[int] = []
    start_counts: List[int] = []
    width = len(table.columns)
    cell_texts = np.zeros((len(table.rows), width), np.int32)
    # A block of rows at a time: a 10^6-cell table's texts and the tokenizer's output, held at once,
    # were ~150 MB more at the peak.
    for begin in range(0, len(table.rows), _TOKENIZE_ROWS):
        block = table.rows[begin:begin + _TOKENIZE_ROWS]
        texts = [cell.text for row in block for cell in row.cells]
        new = [text for text in dict.fromkeys(texts) if text not in index]
        block_ids: List[int] = []
        block_starts: List[int] = []
        for text, tokens in zip(new, tokenizer.tokenize_cells(new)):
            index[text] = len(index)
            word = _word_starts(tokens)
            block_ids.extend(tokenizer.convert_tokens_to_ids(tokens))
            block_starts.extend(word)
            id_counts.append(len(tokens))
            start_counts.append(len(word))
        ids.append(np.asarray(block_ids, np.int32))
        starts.append(np.asarray(block_starts, np.int32))
        cell_texts[begin:begin + len(block)] = np.asarray([index[t] for t in texts], np.int32).reshape(-1, width)
    pieces = CellPieces(np.concatenate(ids or [np.zeros(0, np.int32)]), _offsets(id_counts),
                        np.concatenate(starts or [np.zeros(0, np.int32)]), _offsets(start_counts))
    return header, pieces, cell_texts


def _word_starts(tokens: Sequence[str]) -> List[int]:
    """Positions where a word starts (a piece without "##"), then the number of pieces."""
    return [i for i, t in enumerate(tokens) if not t.startswith("##")] + [len(tokens)]


def _cell_tokens(tokens: Sequence[str], ids: Sequence[int]) -> CellTokens:
    return CellTokens(ids=list(ids), word_starts=np.asarray(_word_starts(tokens), np.int64))


def _offsets(counts: Sequence[int]) -> np.ndarray:
    """<int64>[len(counts) + 1]: where each of consecutive runs of `counts` starts, then the end."""
    return np.concatenate([[0], np.cumsum(np.asarray(counts, np.int64))]).astype(np.int64)
