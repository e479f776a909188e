"""The pure-Python BERT uncased tokeniser that tapas-tf used before Hugging Face `tokenizers`.

Kept only as the reference that the tests and `benchmarks/tokenizer_parity.py` compare the package's tokenizer with, on
every SQA and WikiTableQuestions question and cell: the same steps as Google's BERT
`BasicTokenizer` and `WordpieceTokenizer` (drop NUL, U+FFFD and control characters, whitespace to
spaces, CJK ideographs isolated, lower-case, NFD without combining marks, punctuation split off;
then greedy longest-match WordPiece, `[UNK]` for a word with an unmatchable part or longer than
100 characters).
"""

import functools
import unicodedata
from typing import Container, List

CONTINUATION_PREFIX = "##"
MAX_CHARS_PER_WORD = 100
UNK_TOKEN = "[UNK]"

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


def _split_on_punctuation(word: str) -> List[str]:
    """Makes every punctuation character its own token ("u.s." -> u . s .)."""
    pieces: List[str] = []
    current: List[str] = []
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


def basic_tokenize(text: str) -> List[str]:
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


def wordpiece_tokenize(word: str, vocab: Container[str]) -> List[str]:
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




def reference_tokenize(text: str, vocab: Container[str]) -> List[str]:
    """BERT's pieces of `text`."""
    return [piece for word in basic_tokenize(text) for piece in wordpiece_tokenize(word, vocab)]
