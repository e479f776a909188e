"""BERT uncased WordPiece tokenisation with TAPAS's `[EMPTY]` cell token.

TAPAS tokenises questions and cells exactly as uncased BERT does:

1. *Basic tokenisation*: drop NUL, U+FFFD and control characters, turn
   whitespace into spaces, put spaces around CJK ideographs, split on
   whitespace, then per word lower-case, NFD-decompose, drop combining marks
   (category Mn) and split off every punctuation character.
2. *WordPiece*: greedy longest-match-first against the vocabulary, pieces after
   the first of a word carry the `##` prefix; a word with an unmatchable part,
   or longer than 100 characters, becomes the single piece `[UNK]`.

A cell whose text holds no value (see `text_normalization.is_empty_text`)
is the single token `[EMPTY]`, which TAPAS's vocabulary has in place of BERT's
`[unused0]`.

Two paths produce the pieces:

* the exact pure-Python implementation below, used for every string that is
  not plain printable ASCII;
* tensorflow-text's `FastBertTokenizer`, batched, used for printable ASCII
  strings (with tab, newline and carriage return). It is faster, the more so
  the larger the batch (on WTQ cells, 1.4x with one call per table, 2x with
  one call per 200 tables), and equal to BERT on those strings, but not on all
  others: it folds "km²" to "km ##2" and "ß" to "ss", and treats ASCII control
  characters such as form feed as word separators where BERT deletes them
  ("a\\x0cb" is "ab").

Word boundaries, for whole-word masking: a piece starting with `##` continues
the word of the piece before it (`is_continuation_piece`).
"""

import functools
import os
import re
import unicodedata
from typing import Container, Iterable, Sequence

from tapas_tf.data import text_normalization
from tapas_tf.features.vocab import (  # noqa: F401 (the special tokens are part of this API)
    BERT_UNUSED0_TOKEN, CLS_TOKEN, EMPTY_TOKEN, MASK_TOKEN, PAD_TOKEN, SEP_TOKEN, UNK_TOKEN,
    check_special_tokens, ensure_empty_token_vocab, load_vocab)

CONTINUATION_PREFIX = "##"
MAX_CHARS_PER_WORD = 100

# Strings made only of these characters take the fast path. Everything else
# (non-ASCII, and ASCII control characters other than tab, newline and carriage
# return, which BERT deletes but FastBertTokenizer treats as spaces) takes the
# exact Python path.
_NOT_FAST_SAFE = re.compile(r"[^\t\n\r\x20-\x7e]")

# CJK Unified Ideographs and their extensions and compatibility blocks: the
# characters BERT splits one by one. Hangul, kana and other scripts are not in
# these blocks and are tokenised as ordinary words.
_CJK_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)

# What `_clean_and_space` does with one character.
_KEEP, _DROP, _SPACE, _ISOLATE = 0, 1, 2, 3


# ----------------------------------------------------------------------------
# Character classes (BERT's definitions).
# ----------------------------------------------------------------------------


def _is_whitespace(char: str) -> bool:
    """Space, tab, newline, carriage return and Unicode space separators (Zs)."""
    return char in " \t\n\r" or unicodedata.category(char) == "Zs"


def _is_control(char: str) -> bool:
    """Categories C* except tab, newline and carriage return (they are whitespace)."""
    if char in "\t\n\r":
        return False
    return unicodedata.category(char).startswith("C")


def _is_cjk(char: str) -> bool:
    code = ord(char)
    return any(low <= code <= high for low, high in _CJK_RANGES)


@functools.lru_cache(maxsize=None)
def _is_punctuation(char: str) -> bool:
    """ASCII non-alphanumeric symbols ("$", "^", "`" too) and Unicode categories P*."""
    code = ord(char)
    if 33 <= code <= 47 or 58 <= code <= 64 or 91 <= code <= 96 or 123 <= code <= 126:
        return True
    return unicodedata.category(char).startswith("P")


@functools.lru_cache(maxsize=None)
def _char_action(char: str) -> int:
    if char == "\x00" or char == "\ufffd" or _is_control(char):
        return _DROP
    if _is_whitespace(char):
        return _SPACE
    if _is_cjk(char):
        return _ISOLATE
    return _KEEP


# ----------------------------------------------------------------------------
# Basic tokenisation.
# ----------------------------------------------------------------------------


def _clean_and_space(text: str) -> str:
    """Drops invalid and control characters, maps whitespace to " ", isolates CJK."""
    out = []
    for char in text:
        action = _char_action(char)
        if action == _KEEP:
            out.append(char)
        elif action == _SPACE:
            out.append(" ")
        elif action == _ISOLATE:
            out.append(f" {char} ")
    return "".join(out)


def _lower_and_strip_accents(word: str) -> str:
    """Lower-cases, then NFD-decomposes and drops combining marks ("Café" -> "cafe")."""
    word = word.lower()
    if word.isascii():  # ASCII is already in NFD and has no combining marks.
        return word
    decomposed = unicodedata.normalize("NFD", word)
    return "".join(c for c in decomposed if unicodedata.category(c) != "Mn")


def _split_on_punctuation(word: str) -> list[str]:
    """Makes every punctuation character its own token ("u.s." -> u . s .)."""
    pieces: list[str] = []
    current: list[str] = []
    for char in word:
        if _is_punctuation(char):
            if current:
                pieces.append("".join(current))
                current = []
            pieces.append(char)
        else:
            current.append(char)
    if current:
        pieces.append("".join(current))
    return pieces


def basic_tokenize(text: str) -> list[str]:
    """BERT's uncased basic tokenisation: the words WordPiece then splits.

    Splitting uses `str.split()`, as BERT does, so that separators BERT keeps
    after cleaning (such as U+2028) still end a word.
    """
    words = []
    for word in _clean_and_space(text).split():
        for piece in _split_on_punctuation(_lower_and_strip_accents(word)):
            words.extend(piece.split())
    return words


# ----------------------------------------------------------------------------
# WordPiece.
# ----------------------------------------------------------------------------


def wordpiece_tokenize(word: str, vocab: Container[str]) -> list[str]:
    """Splits one basic-tokenised word into vocabulary pieces, longest match first.

    Returns `[UNK]` alone if the word is longer than `MAX_CHARS_PER_WORD`
    characters or if some part of it matches no piece.
    """
    if len(word) > MAX_CHARS_PER_WORD:
        return [UNK_TOKEN]
    pieces = []
    start = 0
    while start < len(word):
        end = len(word)
        while end > start:
            candidate = word[start:end]
            if start > 0:
                candidate = CONTINUATION_PREFIX + candidate
            if candidate in vocab:
                pieces.append(candidate)
                break
            end -= 1
        else:
            return [UNK_TOKEN]
        start = end
    return pieces


def is_fast_path_safe(text: str) -> bool:
    """True if FastBertTokenizer tokenises `text` exactly as BERT: printable ASCII,
    tab, newline and carriage return only."""
    return not _NOT_FAST_SAFE.search(text)


def is_continuation_piece(piece: str) -> bool:
    """True if `piece` continues the word of the piece before it ("##ing")."""
    return piece.startswith(CONTINUATION_PREFIX)


def word_start_flags(pieces: Sequence[str]) -> list[bool]:
    """For whole-word masking: True where a piece starts a new word."""
    return [not is_continuation_piece(piece) for piece in pieces]


# ----------------------------------------------------------------------------
# The fast path.
# ----------------------------------------------------------------------------


class _FastAsciiTokenizer:
    """tensorflow-text `FastBertTokenizer`, one call per batch, ids out.

    TensorFlow is imported only when this is built, so that the Python path
    works in processes that never load TensorFlow.
    """

    def __init__(self, tokens: Sequence[str]):
        os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
        import tensorflow as tf  # pylint: disable=g-import-not-at-top
        import tensorflow_text as tf_text  # pylint: disable=g-import-not-at-top

        tokenizer = tf_text.FastBertTokenizer(
            vocab=list(tokens),
            suffix_indicator=CONTINUATION_PREFIX,
            max_bytes_per_word=MAX_CHARS_PER_WORD,  # Bytes are characters in ASCII.
            token_out_type=tf.int64,
            unknown_token=UNK_TOKEN,
            lower_case_nfd_strip_accents=True,
        )

        self._tf = tf
        self._tokenizer = tokenizer

    def tokenize_to_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """Strings -> piece ids, in one eager call.

        Measured on WTQ tables, an eager call is about twice as fast as the same
        call traced with tf.function, whose dispatch costs more than it saves.
        """
        # <int64>[batch, (pieces)]
        ids = self._tokenizer.tokenize(self._tf.constant(list(texts), dtype=self._tf.string))
        flat = ids.flat_values.numpy().tolist()
        bounds = ids.row_splits.numpy().tolist()
        return [flat[bounds[i]:bounds[i + 1]] for i in range(len(texts))]


# ----------------------------------------------------------------------------
# The tokenizer.
# ----------------------------------------------------------------------------


class TapasTokenizer:
    """Uncased BERT WordPiece tokenizer for questions and table cells.

    Args:
      vocab_file: WordPiece vocabulary, one piece per line; must contain
        `[PAD]`, `[UNK]`, `[CLS]`, `[SEP]`, `[MASK]` and `[EMPTY]`.
      use_fast: tokenise printable-ASCII strings with tensorflow-text's
        `FastBertTokenizer` (same output, faster). False keeps everything in
        Python and never imports TensorFlow.

    Example:
      >>> tokenizer = TapasTokenizer("vocab.txt")
      >>> tokenizer.tokenize("Hello, World!")
      ['hello', ',', 'world', '!']
      >>> tokenizer.tokenize_cells(["Paris", "n/a"])
      [['paris'], ['[EMPTY]']]
    """

    def __init__(self, vocab_file: str, use_fast: bool = True):
        self._vocab_file = str(vocab_file)
        self._use_fast = use_fast
        self._set_vocab(load_vocab(self._vocab_file))

    def _set_vocab(self, tokens: list[str]) -> None:
        self._tokens = tokens
        self._vocab = {token: index for index, token in enumerate(tokens)}
        check_special_tokens(self._vocab_file, self._vocab)
        self._fast = None  # Built on first use: costly, and not picklable.

    # Beam ships DoFns by pickling: send the vocabulary, rebuild the rest.
    def __getstate__(self) -> dict:
        return {"vocab_file": self._vocab_file, "use_fast": self._use_fast, "tokens": self._tokens}

    def __setstate__(self, state: dict) -> None:
        self._vocab_file = state["vocab_file"]
        self._use_fast = state["use_fast"]
        self._set_vocab(state["tokens"])

    # --- Properties ---------------------------------------------------------

    @property
    def vocab_file(self) -> str:
        return self._vocab_file

    @property
    def use_fast(self) -> bool:
        return self._use_fast

    @property
    def vocab_size(self) -> int:
        return len(self._tokens)

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
        """Strings -> their word pieces; printable ASCII goes through one fast call."""
        tokens = self._tokens
        return [[tokens[i] for i in ids] for ids in self.tokenize_to_ids_batch(texts)]

    def tokenize_to_ids_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """Strings -> ids of their word pieces."""
        _check_strings(texts)
        results: list = [None] * len(texts)
        fast_indices = []
        for index, text in enumerate(texts):
            if self._use_fast and is_fast_path_safe(text):
                fast_indices.append(index)
            else:
                results[index] = self.convert_tokens_to_ids(self._python_tokenize(text))
        if fast_indices:
            fast_ids = self._fast_tokenizer().tokenize_to_ids([texts[i] for i in fast_indices])
            for index, ids in zip(fast_indices, fast_ids):
                results[index] = ids
        return results

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

    def python_tokenize(self, text: str) -> list[str]:
        """The exact BERT tokenisation in pure Python, whatever `use_fast` says."""
        _check_strings([text])
        return self._python_tokenize(text)

    def _python_tokenize(self, text: str) -> list[str]:
        pieces = []
        for word in basic_tokenize(text):
            pieces.extend(wordpiece_tokenize(word, self._vocab))
        return pieces

    def _fast_tokenizer(self) -> _FastAsciiTokenizer:
        if self._fast is None:
            self._fast = _FastAsciiTokenizer(self._tokens)
        return self._fast

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
