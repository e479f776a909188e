"""Text normalisation shared by number parsing, tokenisation and answer matching.

Two levels are used:

* `normalize_for_match` folds the surface form of a string so that cell texts,
  questions and answers written slightly differently compare equal (accents,
  typographic quotes and dashes, citation marks, case, whitespace).
* `format_text` additionally turns punctuation into spaces; a text whose
  formatted form is empty (or a placeholder such as "n/a") is an *empty cell*
  and is encoded as the single token `[EMPTY]`.
"""

import re
import unicodedata

EMPTY_TEXT = "EMPTY"

# Placeholders that tables use for "no value".
_EMPTY_PLACEHOLDERS = frozenset({"n/a", "?", "nan", "none", "-", "--", "—", "–"})

_SINGLE_QUOTES = re.compile(r"[‘’´`′]")
_DOUBLE_QUOTES = re.compile(r"[“”″]")
_DASHES = re.compile(r"[‐‑‒–—―−]")
# Trailing citation marks such as "[1]", "[citation needed]", "†", "*".
_TRAILING_CITATIONS = re.compile(r"((?<!^)\[[^\]]*\]|\[\d+\]|[•♦†‡*#+])*$")
# Trailing details in parentheses, e.g. "Paris (France)" -> "Paris".
_TRAILING_PARENTHESES = re.compile(r"(?<!^)( \([^)]*\))*$")
_OUTER_QUOTES = re.compile(r'^"([^"]*)"$')
_NON_WORD = re.compile(r"[^\w\d]+")


def strip_accents(text: str, compatibility: bool = True) -> str:
    """Removes combining marks after decomposition ("é" -> "e").

    With `compatibility` (NFKD) compatibility characters are folded too
    ("km²" -> "km2", "ﬁ" -> "fi"); without it (NFD) they are kept, so that a
    superscript is not read as a number.
    """
    if text.isascii():  # Most cells: nothing decomposes, and no character is a combining mark.
        return text
    decomposed = unicodedata.normalize("NFKD" if compatibility else "NFD", text)
    return "".join(c for c in decomposed if unicodedata.category(c) != "Mn")


def normalize_punctuation(text: str) -> str:
    """Maps typographic quotes and dashes to their ASCII forms."""
    if text.isascii():  # Of the marks mapped, only the backtick is ASCII.
        return text.replace("`", "'")
    text = _SINGLE_QUOTES.sub("'", text)
    text = _DOUBLE_QUOTES.sub('"', text)
    return _DASHES.sub("-", text)


def collapse_whitespace(text: str) -> str:
    return " ".join(text.split())


def normalize_answer_text(text: str) -> str:
    """Normalises a cell or answer string for denotation comparison.

    Follows the WikiTableQuestions evaluator's conventions: accents and
    typographic punctuation are folded, trailing citations, trailing
    parenthesised details, outer quotes and a final period are removed, and
    the result is lower-cased with whitespace collapsed.
    """
    text = normalize_punctuation(strip_accents(text))
    while True:
        previous = text
        text = _TRAILING_CITATIONS.sub("", text.strip())
        text = _TRAILING_PARENTHESES.sub("", text.strip())
        text = _OUTER_QUOTES.sub(r"\1", text.strip())
        if text == previous:
            break
    if text.endswith("."):
        text = text[:-1]
    return collapse_whitespace(text).lower()


def normalize_for_match(text: str) -> str:
    """Lower-cases, folds accents/quotes/dashes and collapses whitespace.

    Unlike `normalize_answer_text` nothing is removed, so character offsets of
    numbers found in the result stay meaningful to a reader of the question.
    """
    text = normalize_punctuation(strip_accents(text, compatibility=False))
    return collapse_whitespace(text).lower()


def format_text(text: str) -> str:
    """Lower-cases and replaces punctuation by spaces; `EMPTY_TEXT` if nothing is left."""
    text = text.lower().strip()
    if text in _EMPTY_PLACEHOLDERS:
        return EMPTY_TEXT
    text = collapse_whitespace(_NON_WORD.sub(" ", text).replace("_", " "))
    return text or EMPTY_TEXT


def is_empty_text(text: str) -> bool:
    """True if a cell with this text holds no value and is encoded as `[EMPTY]`."""
    return format_text(text) == EMPTY_TEXT
