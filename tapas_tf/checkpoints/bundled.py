"""The models shipped inside the package, each a compact model directory (weights in float16 or int8).

    from tapas_tf.checkpoints.bundled import bundled_model_dir, bundled_aggregation_model_dir
    TableQA.from_model_dir()      # the bundled models, as below

Four models, one directory each under `bundled/`:

- the conversation model (`BUNDLED_DIR`, `bundled_model_dir()`): trained on SQA, it selects cells
  and reads the previous answer of a conversation (which rows, which cells, "which of them ...");
- the TabFact model (`TABFACT_DIR`, `bundled_tabfact_model_dir()`): a classifier of statements
  about a table (entailed or refuted), for `TableFactChecker` and `tapas-tf verify`;
- the aggregation model (`AGGREGATION_DIR`, `bundled_aggregation_model_dir()`): trained on
  WikiTableQuestions from answers alone, with an aggregation head (COUNT, SUM, AVERAGE). `TableQA`
  asks both models the first question of a conversation and keeps the answer with the higher
  calibrated confidence (each directory's `calibration.json`, `qa.confidence`). An installation
  may lack it: `bundled_aggregation_model_dir()` is then None, and the conversation model answers
  alone.
- the table retriever (`RETRIEVER_DIR`, `bundled_retriever_dir()`): a dual encoder (int8 weights)
  that `tapas-tf index` embeds tables with unless `--dense_model` names another or `none`; with
  it an index offers dense and hybrid search besides BM25. An installation may lack it (None).

Each directory's `compact.json` gives the commands that trained the model and its dev scores;
`docs/RESULTS.md` has the whole experiments, `docs/MODELS.md` what each model is good for.
"""

import os
from typing import Optional

BUNDLED_ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bundled")
BUNDLED_DIR = os.path.join(BUNDLED_ROOT, "sqa_tiny")
AGGREGATION_DIR = os.path.join(BUNDLED_ROOT, "wtq_tiny")
TABFACT_DIR = os.path.join(BUNDLED_ROOT, "tabfact_tiny")
RETRIEVER_DIR = os.path.join(BUNDLED_ROOT, "retriever_minilm")
# Every bundled model's weights together (the repository carries them): npz and LiteRT copies.
MAX_BUNDLED_BYTES = 60 * 1000 * 1000


def bundled_model_dir() -> str:
    """The directory of the bundled conversation model; FileNotFoundError if this installation lacks it."""
    from tapas_tf.checkpoints import model_dir

    if not model_dir.has_compact_weights(BUNDLED_DIR):
        raise FileNotFoundError(f"no bundled model in {BUNDLED_DIR} (an installation without package data?); "
                                "pass a model directory instead")
    return BUNDLED_DIR


def bundled_aggregation_model_dir() -> Optional[str]:
    """The directory of the bundled aggregation model, or None if this installation has none."""
    from tapas_tf.checkpoints import model_dir

    return AGGREGATION_DIR if model_dir.has_compact_weights(AGGREGATION_DIR) else None


def bundled_tabfact_model_dir() -> str:
    """The directory of the bundled TabFact model (`TableFactChecker`); FileNotFoundError if this
    installation lacks it."""
    from tapas_tf.checkpoints import model_dir

    if not model_dir.has_compact_weights(TABFACT_DIR):
        raise FileNotFoundError(f"no bundled TabFact model in {TABFACT_DIR}; pass a TabFact model directory "
                                "(trained with `run_task.py --task=TABFACT`) or load a released one by name "
                                "(TableFactChecker.from_pretrained)")
    return TABFACT_DIR


def bundled_retriever_dir() -> Optional[str]:
    """The directory of the bundled table retriever, or None if this installation has none."""
    from tapas_tf.checkpoints import model_dir, retriever

    has_record = os.path.exists(os.path.join(RETRIEVER_DIR, retriever.EMBEDDER_FILE))
    return RETRIEVER_DIR if has_record and model_dir.has_compact_weights(RETRIEVER_DIR) else None


def is_bundled_retriever(directory: str) -> bool:
    """Whether `directory` is this installation's bundled retriever."""
    return os.path.realpath(directory) == os.path.realpath(RETRIEVER_DIR)


def bundled_weights_bytes(root: str = BUNDLED_ROOT) -> int:
    """Bytes of every bundled model's weights under `root`: compact weights and LiteRT copies."""
    total = 0
    for name in sorted(os.listdir(root)) if os.path.isdir(root) else ():
        directory = os.path.join(root, name)
        if os.path.isdir(directory):
            total += sum(os.path.getsize(os.path.join(directory, f)) for f in os.listdir(directory)
                         if f.endswith((".npz", ".tflite", ".tflite.stripped")))
    return total
