"""The word pieces that never count as shared between a question and its table.

A model with `use_question_match_embeddings` marks the table tokens whose word piece also occurs in
the question (and the question tokens found in the table); see `models.embeddings`. A piece
shared by nearly every question and table says nothing about where the answer is, so these never
match: the special tokens, punctuation, English function words and question words, and the short
suffix pieces ("##s", "##ed") that end many unrelated words. The ids are those of one vocabulary
and are stored in the model's config (`question_match_ignored_ids`), so a model never needs the
vocabulary file to compute its matches.

    config = config.replace(use_question_match_embeddings=True,
                            question_match_ignored_ids=ignored_ids(vocab_file))
"""

import string
from typing import Tuple

from tapas_tf.features.tokenization import CONTINUATION_PREFIX
from tapas_tf.features.vocab import CLS_TOKEN, EMPTY_TOKEN, MASK_TOKEN, PAD_TOKEN, SEP_TOKEN, UNK_TOKEN, load_vocab

# Words of questions that name no table content (lower-cased, as the uncased vocabulary holds them).
FUNCTION_WORDS = frozenset("""
a an the and or but nor of in on at to for from by with about as into onto than then that this these
those there here is are was were be been being am do does did done has have had having will would
shall should can could may might must it its it's they them their he him his she her we us our you
your i me my what which who whom whose when where why how many much any some all each every both
either neither not no yes if so up down out over under again also only just more most less least
very too own same other such after before during while until between through per vs s t
""".split())

# Suffix pieces up to this many characters after "##" never match ("##s", "##ing").
MAX_IGNORED_SUFFIX_CHARACTERS = 3


def is_ignored_piece(piece: str) -> bool:
    """True for a word piece that never counts as shared between a question and its table."""
    if piece in (PAD_TOKEN, UNK_TOKEN, CLS_TOKEN, SEP_TOKEN, MASK_TOKEN, EMPTY_TOKEN):
        return True
    if piece.startswith(CONTINUATION_PREFIX):
        return len(piece) - len(CONTINUATION_PREFIX) <= MAX_IGNORED_SUFFIX_CHARACTERS
    if len(piece) == 1 and not piece.isalnum():
        return True  # Punctuation and symbols, ASCII or not.
    return piece in FUNCTION_WORDS or all(char in string.punctuation for char in piece)


def ignored_ids(vocab_file: str) -> Tuple[int, ...]:
    """The ids of `vocab_file`'s pieces that never match, in increasing order."""
    return tuple(token_id for token_id, piece in enumerate(load_vocab(vocab_file)) if is_ignored_piece(piece))
