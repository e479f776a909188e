"""A small WordPiece vocabulary for tests, laid out like TAPAS's (BERT's) file.

Ids are fixed by the order below: `[PAD]` 0, `[EMPTY]` 1 (BERT's `[unused0]`
slot), `[UNK]` 2, `[CLS]` 3, `[SEP]` 4, `[MASK]` 5, then ASCII punctuation,
digits, letters, their `##` continuation pieces, common suffixes and common
words. Any lower-cased ASCII word can be spelled with it, so tests never meet
`[UNK]` by accident. Tests that need more pieces pass `extra_words`, which are
appended after everything else. Append new entries at the end of `_WORDS` so
ids that other tests rely on do not move.
"""

import os
import string
from typing import Iterable

SPECIAL_TOKENS = ("[PAD]", "[EMPTY]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")

_SUFFIXES = ("##s", "##es", "##ed", "##ing", "##er", "##est", "##ly", "##th")

_WORDS = (
    # Question words and function words.
    "what who whom whose which where when why how many much is are was were be been "
    "the a an of in on at to for from by with and or not no than then as that this "
    "these those it its there do does did has have had more most less least "
    "first last before after between above below over under same other each every "
    "all any one two three four five six seven eight nine ten hundred thousand million "
    # Table vocabulary.
    "name names age city cities population year years player players team teams "
    "total points point date country countries rank score number title position "
    "club season game games goals goal won lost win wins place nation gold silver "
    "bronze medal medals time times record votes party district election height "
    "km miles area capital state county town village school league round result "
    "opponent home away notes note type length minutes seconds percent average sum "
    "count highest lowest largest smallest longest shortest top bottom next previous "
    # Words of small fixture tables and questions.
    "hello world paris london berlin france germany england john mary smith "
    "red blue green new old big small high low good best"
)


def vocab_tokens(extra_words: Iterable[str] = ()) -> list[str]:
    """The pieces, in id order, that `write_test_vocab` writes."""
    tokens = list(SPECIAL_TOKENS)
    tokens += list(string.punctuation)  # The 32 ASCII punctuation characters.
    tokens += list(string.digits)
    tokens += list(string.ascii_lowercase)
    tokens += ["##" + c for c in string.digits + string.ascii_lowercase]
    tokens += list(_SUFFIXES)
    tokens += _WORDS.split()
    seen = set()
    unique = []
    for token in tokens + list(extra_words):
        if not token or token != token.strip() or any(c.isspace() for c in token):
            raise ValueError(f"Vocabulary piece {token!r} is empty or contains whitespace.")
        if token not in seen:
            seen.add(token)
            unique.append(token)
    return unique


def write_test_vocab(path: "str | os.PathLike[str]", extra_words: Iterable[str] = ()) -> str:
    """Writes the test vocabulary (plus `extra_words`) to `path`; returns the path."""
    path = os.fspath(path)
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write("".join(token + "\n" for token in vocab_tokens(extra_words)))
    return path
