"""BERT uncased WordPiece tokenisation with TAPAS's `[EMPTY]` cell token, on Hugging Face `tokenizers`.

TAPAS tokenises questions and cells exactly as uncased BERT does:

1. *Basic tokenisation*: drop NUL, U+FFFD and control characters, turn
   whitespace into spaces, put spaces around CJK ideographs, split on
   whitespace, then per word lower-case, NFD-decompose, drop combining marks
   (category Mn) and split off every punctuation character.
2. *WordPiece*: greedy longest-match-first against the vocabulary, pieces after
   the first of a word carry the `##` prefix; a word with an unmatchable part,
   or longer than 100 characters, becomes the single piece `[UNK]`.

Hugging Face's `tokenizers` (Rust) does both: `BertNormalizer` (clean text, CJK
spacing, lower case, accents stripped), `BertPreTokenizer` and `WordPiece`, one
native call per batch, without TensorFlow. Its output equals BERT's reference
implementation on every question and cell of SQA and WikiTableQuestions,
non-ASCII text included (`benchmarks/tokenizer_parity.py`), where
tensorflow-text's `FastBertTokenizer` folds "km²" to "km ##2" and "ß" to "ss".

A cell whose text holds no value (see `text_normalization.is_empty_text`)
is the single token `[EMPTY]`, which TAPAS's vocabulary has in place of BERT's
`[unused0]`.

Word boundaries, for whole-word masking: a piece starting with `##` continues
the word of the piece before it (`is_continuation_piece`).
"""

import os
from typing import Iterable, Optional, Sequence

# A batch is encoded on one thread: Beam's and a server's worker processes fork after a tokenizer
# may have run, and a forked tokenizers pool warns on stderr (set it to "true" to use more threads).
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from tokenizers import Tokenizer, models, normalizers, pre_tokenizers  # noqa: E402

from tapas_tf.data import text_normalization
from tapas_tf.features.vocab import (  # noqa: F401 (the special tokens are part of this API)
    BERT_UNUSED0_TOKEN, CLS_TOKEN, EMPTY_TOKEN, MASK_TOKEN, PAD_TOKEN, SEP_TOKEN, UNK_TOKEN,
    check_special_tokens, ensure_empty_token_vocab, load_vocab)

CONTINUATION_PREFIX = "##"
MAX_CHARS_PER_WORD = 100


def is_continuation_piece(piece: str) -> bool:
    """True if `piece` continues the word of the piece before it ("##ing")."""
    return piece.startswith(CONTINUATION_PREFIX)


def word_start_flags(pieces: Sequence[str]) -> list[bool]:
    """For whole-word masking: True where a piece starts a new word."""
    return [not is_continuation_piece(piece) for piece in pieces]


def bert_wordpiece(tokens: Sequence[str]) -> Tokenizer:
    """A `tokenizers.Tokenizer` that is uncased BERT's basic tokenisation and WordPiece over `tokens`
    (no special tokens added, no truncation, no padding)."""
    model = models.WordPiece(vocab={token: index for index, token in enumerate(tokens)}, unk_token=UNK_TOKEN,
                             continuing_subword_prefix=CONTINUATION_PREFIX,
                             max_input_chars_per_word=MAX_CHARS_PER_WORD)
    tokenizer = Tokenizer(model)
    tokenizer.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True,
                                                      strip_accents=True, lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    return tokenizer


class TapasTokenizer:
    """Uncased BERT WordPiece tokenizer for questions and table cells.

    Args:
      vocab_file: WordPiece vocabulary, one piece per line; must contain
        `[PAD]`, `[UNK]`, `[CLS]`, `[SEP]`, `[MASK]` and `[EMPTY]`.

    Example:
      >>> tokenizer = TapasTokenizer("vocab.txt")
      >>> tokenizer.tokenize("Hello, World!")
      ['hello', ',', 'world', '!']
      >>> tokenizer.tokenize_cells(["Paris", "n/a"])
      [['paris'], ['[EMPTY]']]
    """

    def __init__(self, vocab_file: str):
        self._vocab_file = str(vocab_file)
        self._set_vocab(load_vocab(self._vocab_file))

    def _set_vocab(self, tokens: list[str]) -> None:
        self._tokens = tokens
        self._vocab = {token: index for index, token in enumerate(tokens)}
        check_special_tokens(self._vocab_file, self._vocab)
        self._wordpiece: Optional[Tokenizer] = None  # Built on first use.

    # Beam ships DoFns by pickling: send the vocabulary, rebuild the rest.
    def __getstate__(self) -> dict:
        return {"vocab_file": self._vocab_file, "tokens": self._tokens}

    def __setstate__(self, state: dict) -> None:
        self._vocab_file = state["vocab_file"]
        self._set_vocab(state["tokens"])

    # --- Properties ---------------------------------------------------------

    @property
    def vocab_file(self) -> str:
        return self._vocab_file

    @property
    def vocab_size(self) -> int:
        return len(self._tokens)

    def same_vocabulary(self, other: "TapasTokenizer") -> bool:
        """Whether `other` maps every text to the same ids (the same word pieces, in the same order),
        whatever file each was read from."""
        return self._tokens == other._tokens  # pylint: disable=protected-access

    @property
    def pad_id(self) -> int:
        return self._vocab[PAD_TOKEN]

    @property
    def unk_id(self) -> int:
        return self._vocab[UNK_TOKEN]

    @property
    def cls_id(self) -> int:
        return self._vocab[CLS_TOKEN]

    @property
    def sep_id(self) -> int:
        return self._vocab[SEP_TOKEN]

    @property
    def mask_id(self) -> int:
        return self._vocab[MASK_TOKEN]

    @property
    def empty_id(self) -> int:
        return self._vocab[EMPTY_TOKEN]

    # --- Tokenisation -------------------------------------------------------

    def tokenize(self, text: str) -> list[str]:
        """One string -> its word pieces."""
        return self.tokenize_batch([text])[0]

    def tokenize_batch(self, texts: Sequence[str]) -> list[list[str]]:
        """Strings -> their word pieces, in one native call."""
        tokens = self._tokens
        return [[tokens[i] for i in ids] for ids in self.tokenize_to_ids_batch(texts)]

    def tokenize_to_ids_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """Strings -> ids of their word pieces, in one native call."""
        _check_strings(texts)
        if not texts:
            return []
        if self._wordpiece is None:
            self._wordpiece = bert_wordpiece(self._tokens)
        return [encoding.ids for encoding in self._wordpiece.encode_batch(list(texts), add_special_tokens=False)]

    def tokenize_cell(self, text: str) -> list[str]:
        """A cell's pieces; `["[EMPTY]"]` for a cell without a value ("", "n/a", "-")."""
        return self.tokenize_cells([text])[0]

    def tokenize_cells(self, texts: Sequence[str]) -> list[list[str]]:
        """Cells -> pieces, with the `[EMPTY]` rule of `tokenize_cell`."""
        tokens = self._tokens
        return [[tokens[i] for i in ids] for ids in self.tokenize_cells_to_ids(texts)]

    def tokenize_cells_to_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """Cells -> ids of their pieces, with the `[EMPTY]` rule of `tokenize_cell`."""
        _check_strings(texts)
        is_empty = [text_normalization.is_empty_text(text) for text in texts]
        filled = [text for text, empty in zip(texts, is_empty) if not empty]
        filled_ids = iter(self.tokenize_to_ids_batch(filled))
        return [[self.empty_id] if empty else next(filled_ids) for empty in is_empty]

    # --- Ids ----------------------------------------------------------------

    def convert_tokens_to_ids(self, tokens: Iterable[str]) -> list[int]:
        """Pieces -> ids. Raises ValueError for a piece not in the vocabulary."""
        vocab = self._vocab
        try:
            return [vocab[token] for token in tokens]
        except KeyError as error:
            raise ValueError(
                f"Piece {error.args[0]!r} is not in the vocabulary {self._vocab_file}."
            ) from None

    def convert_ids_to_tokens(self, ids: Iterable[int]) -> list[str]:
        """Ids -> pieces. Raises ValueError for an id outside [0, vocab_size)."""
        tokens = self._tokens
        result = []
        for token_id in ids:
            index = int(token_id)
            if not 0 <= index < len(tokens):
                raise ValueError(
                    f"Id {index} is outside the vocabulary {self._vocab_file} "
                    f"of size {len(tokens)}."
                )
            result.append(tokens[index])
        return result


def _check_strings(texts: Sequence[str]) -> None:
    if isinstance(texts, str):
        raise ValueError("Expected a sequence of strings, got a single string.")
    for text in texts:
        if not isinstance(text, str):
            raise ValueError(f"Expected str texts, got {type(text).__name__}: {text!r}.")
