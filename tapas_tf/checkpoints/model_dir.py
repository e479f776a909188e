"""The self-describing model directory.

    model_dir/
      tapas_config.json      every model option (models.TapasConfig)
      model_kind.json        which model the checkpoints hold: {"model_kind": "masked_lm"} for
                             pre-training (TapasForMaskedLM); absent or "question_answering" for
                             TapasForQuestionAnswering
      checkpoints/ckpt-N.*   tf.train.Checkpoint(model=..., optimizer=..., step=...)
      checkpoints/checkpoint the CheckpointManager's index

Predict, export and import read the config from here, so they never need the
training flags again. Any checkpoint whose object graph has a `model` entry
holding a TapasForQuestionAnswering can be restored by `load_model`.
"""

import contextlib
import os
from typing import Iterator, Optional

CONFIG_FILE = "tapas_config.json"
CHECKPOINT_DIR = "checkpoints"
MODEL_KIND_FILE = "model_kind.json"
QUESTION_ANSWERING = "question_answering"
MASKED_LM = "masked_lm"
MODEL_KINDS = (QUESTION_ANSWERING, MASKED_LM)


class CorruptCheckpointError(ValueError):
    """A checkpoint's files cannot be read: cut short, damaged, or one of them missing."""


@contextlib.contextmanager
def reading_checkpoint(prefix: str, what_to_do: str = "restore its files or use another checkpoint"
                       ) -> Iterator[None]:
    """Turns the errors of reading a damaged checkpoint into a CorruptCheckpointError naming it.

        with reading_checkpoint(prefix):
            tf.train.Checkpoint(model=model).restore(prefix)

    TensorFlow never names the file: a `.data-*` file cut short raises a bare IndexError ("Read
    less bytes than requested"), a damaged `.index` an OpError ("not an sstable"), a checksum
    mismatch a DataLossError and a missing file a NotFoundError.

    Args:
      prefix: the checkpoint prefix being read, e.g. MODEL_DIR/checkpoints/ckpt-100.
      what_to_do: the end of the message, saying how to get past it.
    """
    import tensorflow as tf

    try:
        yield
    except (IndexError, tf.errors.OpError) as e:
        reason = e.message if isinstance(e, tf.errors.OpError) else str(e)
        raise CorruptCheckpointError(
            f"checkpoint {prefix} is truncated or corrupt ({reason.strip().splitlines()[0]}); "
            f"{what_to_do}") from e


def config_path(model_dir: str) -> str:
    return os.path.join(model_dir, CONFIG_FILE)


def checkpoint_dir(model_dir: str) -> str:
    return os.path.join(model_dir, CHECKPOINT_DIR)


def save_config(model_dir: str, config) -> str:
    os.makedirs(model_dir, exist_ok=True)
    path = config_path(model_dir)
    config.to_json_file(path)
    return path


def load_config(model_dir: str):
    from tapas_tf.models.config import TapasConfig

    path = config_path(model_dir)
    if not os.path.exists(path):
        raise FileNotFoundError(
            f"{model_dir} is not a tapas-tf model directory: {CONFIG_FILE} is missing")
    return TapasConfig.from_json_file(path)


def save_model_kind(model_dir: str, kind: str) -> str:
    """Writes model_kind.json saying which model (`MODEL_KINDS`) the checkpoints hold."""
    import json

    if kind not in MODEL_KINDS:
        raise ValueError(f"Unknown model kind {kind!r}; expected one of {MODEL_KINDS}.")
    os.makedirs(model_dir, exist_ok=True)
    path = os.path.join(model_dir, MODEL_KIND_FILE)
    with open(path, "w", encoding="utf-8") as f:
        f.write(json.dumps({"model_kind": kind}) + "\n")
    return path


def load_model_kind(model_dir: str) -> str:
    """The model kind of `model_dir`: QUESTION_ANSWERING when it has no model_kind.json (as
    directories written before pre-training existed, and imported checkpoints).

    Raises:
      ValueError: model_kind.json is not JSON or names an unknown kind.
    """
    import json

    path = os.path.join(model_dir, MODEL_KIND_FILE)
    if not os.path.exists(path):
        return QUESTION_ANSWERING
    try:
        with open(path, encoding="utf-8") as f:
            kind = json.load(f)["model_kind"]
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError(f"{path} is not a model kind file ({e}); it should hold {{\"model_kind\": ...}}") from e
    if kind not in MODEL_KINDS:
        raise ValueError(f"{path}: unknown model kind {kind!r}; expected one of {MODEL_KINDS}.")
    return kind


def latest_checkpoint(model_dir: str) -> Optional[str]:
    """Newest checkpoint prefix under `model_dir/checkpoints`, or None."""
    import tensorflow as tf

    return tf.train.latest_checkpoint(checkpoint_dir(model_dir))


def load_model(model_dir: str, checkpoint: Optional[str] = None):
    """The Keras TapasForQuestionAnswering of a model directory, weights restored (`restore_weights`).

    Args:
      model_dir: a directory written by training or by `tapas_tf.checkpoints.importer`.
      checkpoint: a checkpoint prefix; default the newest in the directory.

    Returns:
      The model; call it as `model(features, training=False)` with a dict of
      `[batch, seq_len]` tensors named as the tf.Example features.

    Raises:
      FileNotFoundError: no config, or no weights.
      ValueError: the directory holds a masked-LM model (model_kind.json).
      CorruptCheckpointError (a ValueError): the checkpoint's files are truncated or damaged.
    """
    from tapas_tf.models.qa_model import TapasForQuestionAnswering, dummy_features

    config = load_config(model_dir)
    if load_model_kind(model_dir) != QUESTION_ANSWERING:
        raise ValueError(f"{model_dir} holds a pre-trained masked-LM model, not a question-answering one; "
                         "fine-tune it first (--mode=train --init_checkpoint=THAT_DIR)")
    model = TapasForQuestionAnswering(config)
    model(dummy_features(1, 8), training=False)  # Creates the variables.
    restore_weights(model, model_dir, checkpoint)
    return model


def restore_weights(model, model_dir: str, checkpoint: Optional[str] = None) -> None:
    """Restores a built TapasForQuestionAnswering from `checkpoint`, else the directory's newest
    checkpoint, else its compact weights (a compact directory, `tapas_tf.checkpoints.compact`).

    Raises:
      FileNotFoundError: none of them.
      CorruptCheckpointError (a ValueError): the checkpoint's files are truncated or damaged.
    """
    import tensorflow as tf

    from tapas_tf.checkpoints import compact

    checkpoint = checkpoint or latest_checkpoint(model_dir)
    if checkpoint is None and compact.has_compact_weights(model_dir):
        compact.restore_compact_weights(model, model_dir)
        return
    if checkpoint is None:
        raise FileNotFoundError(f"{model_dir}: no checkpoint under {CHECKPOINT_DIR}/ and no "
                                f"{' or '.join(compact.WEIGHTS_FILES.values())}")
    with reading_checkpoint(checkpoint, "restore its files or pass another --checkpoint"):
        status = tf.train.Checkpoint(model=model).restore(checkpoint)
    status.expect_partial().assert_existing_objects_matched()
