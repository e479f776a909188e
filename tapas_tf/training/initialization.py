"""Where a run's weights start: its own newest checkpoint (a resumed run), or the encoder (and
optionally the heads) of another model's checkpoint (`--init_checkpoint`).

    restored = initialize_from(model, "pretrained_model_dir")
"""

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import logging  # noqa: E402
import tempfile  # noqa: E402
from typing import Dict, Optional, Sequence, Tuple  # noqa: E402

import tensorflow as tf  # noqa: E402
import tf_keras  # noqa: E402

from tapas_tf.checkpoints import model_dir as model_dir_lib  # noqa: E402
from tapas_tf.models.qa_model import dummy_features  # noqa: E402
from tapas_tf.training import recovery  # noqa: E402
from tapas_tf.training.config import TrainConfig  # noqa: E402


def resolve_checkpoint(path: str) -> str:
    """The checkpoint prefix named by `path`: a model directory (its newest checkpoint), a
    directory of checkpoints (its newest), or a prefix such as `DIR/checkpoints/ckpt-100`.

    Raises:
      FileNotFoundError: `path` is none of these.
    """
    if tf.io.gfile.isdir(path):
        for directory in (model_dir_lib.checkpoint_dir(path), path):
            latest = tf.train.latest_checkpoint(directory)
            if latest:
                return latest
        raise FileNotFoundError(f"{path}: no checkpoint in it or in its {model_dir_lib.CHECKPOINT_DIR}/.")
    if tf.io.gfile.exists(path + ".index"):
        return path
    raise FileNotFoundError(
        f"{path} is not a model directory, a checkpoint directory or a checkpoint prefix.")


def _compact_as_checkpoint(path: str) -> Optional[str]:
    """A checkpoint prefix holding the weights of `path` when it is a compact model directory
    (float16 or int8 weights and no checkpoint, such as a bundled model), else None.

    Fine-tuning from a bundled model starts here: its weights, widened to float32, are written once
    to a temporary checkpoint that `initialize_from` then reads like any other.
    """
    if not tf.io.gfile.isdir(path) or model_dir_lib.latest_checkpoint(path) is not None:
        return None
    if not model_dir_lib.has_compact_weights(path):
        return None
    source = model_dir_lib.load_model(path)
    scratch = tempfile.mkdtemp(prefix="compact_init_")
    prefix = tf.train.Checkpoint(model=source).write(os.path.join(scratch, "ckpt"))
    logging.info("Compact model directory %s: its weights written to %s for initialisation.", path, prefix)
    return prefix


# The heads `initialize_from` can restore for transfer, by their attribute (and checkpoint) name.
TRANSFERABLE_HEADS = ("cell_selection_head", "aggregation_head", "classification_head")


def initialize_from(model: tf_keras.Model, init_checkpoint: str,
                    heads: Sequence[str] = ()) -> Dict[str, bool]:
    """Restores the encoder of `model` from a tapas-tf checkpoint (and the `heads` asked for); the
    other heads keep their initialisation.

    The hook for other formats: importers of original TAPAS, Hugging Face or MiniLM weights can
    dispatch here on the format of `init_checkpoint`. This version reads checkpoints written by
    `train` (or any `tf.train.Checkpoint(model=m)` whose `m.encoder` is a TapasEncoder, such as
    the masked-LM model). Restoring is partial: an encoder part missing from the checkpoint (for
    example the pooler of a masked-LM model) keeps its initialisation and is logged.

    Args:
      model: a TapasForQuestionAnswering (built here if it was never called) or a built
        TapasForMaskedLM (its masked-LM head keeps its initialisation too).
      init_checkpoint: model directory (a compact one too, such as a bundled model), checkpoint
        directory or checkpoint prefix.
      heads: names from TRANSFERABLE_HEADS to restore too, where both the model and the checkpoint
        have them (transfer from a model fine-tuned on another task).

    Returns:
      {part: restored?} for "embeddings", "layer_0" ... and "pooler", then each of `heads` the
      model has.

    Raises:
      FileNotFoundError: see `resolve_checkpoint`.
      ValueError: no encoder part is in the checkpoint, a shape differs from the model's, or the
        checkpoint is truncated or corrupt (CorruptCheckpointError).
    """
    prefix = _compact_as_checkpoint(init_checkpoint) or resolve_checkpoint(init_checkpoint)
    if not model.built:
        model(dummy_features(), training=False)
    with model_dir_lib.reading_checkpoint(prefix, "check --init_checkpoint"):
        stored = {name for name, _ in tf.train.list_variables(prefix)}
    parts = {"embeddings": "embeddings"}
    parts.update({f"layer_{i}": f"transformer_layers/{i}"
                  for i in range(len(model.encoder.transformer_layers))})
    if model.encoder.pooler is not None:
        parts["pooler"] = "pooler"
    restored = {part: any(name.startswith(f"model/encoder/{path}/") for name in stored)
                for part, path in parts.items()}
    if not any(restored.values()):
        raise ValueError(f"{prefix} holds no TAPAS encoder weights (no model/encoder/ variables).")
    unknown = sorted(set(heads) - set(TRANSFERABLE_HEADS))
    if unknown:
        raise ValueError(f"Unknown heads {unknown}; expected some of {TRANSFERABLE_HEADS}.")
    layers = {"encoder": model.encoder}
    for head in heads:
        if getattr(model, head, None) is not None:
            restored[head] = any(name.startswith(f"model/{head}/") for name in stored)
            if restored[head]:
                layers[head] = getattr(model, head)
    partial = tf.train.Checkpoint(model=tf.train.Checkpoint(**layers))
    with model_dir_lib.reading_checkpoint(prefix, "check --init_checkpoint"):
        try:
            partial.restore(prefix).expect_partial()
        except ValueError as e:
            raise ValueError(f"{prefix} does not fit the model config (its encoder or heads): {e}") from e
    logging.info("Initialised from %s: restored %s; not in the checkpoint: %s", prefix,
                 ", ".join(p for p, ok in restored.items() if ok) or "nothing",
                 ", ".join(p for p, ok in restored.items() if not ok) or "nothing")
    return restored


def restore_or_initialize(checkpoint: tf.train.Checkpoint, model: tf_keras.Model,
                           model_dir: str, config: TrainConfig) -> None:
    """Restores model_dir's newest checkpoint that reads completely (model, optimizer slots and
    iterations, step; see `recovery.restore_newest`), else initialises the encoder from
    config.init_checkpoint if given."""
    latest = recovery.restore_newest(checkpoint, model_dir_lib.checkpoint_dir(model_dir))
    if latest:
        logging.info("Resuming from %s at step %d.", latest, int(checkpoint.step.numpy()))
    elif config.init_checkpoint:
        restored = initialize_from(model, config.init_checkpoint, heads_to_restore(config))
        write_init_report(model_dir, model, config.init_checkpoint, restored)


def heads_to_restore(config: TrainConfig) -> Tuple[str, ...]:
    """The heads an init checkpoint gives: none, or with init_heads all but the cell-selection head
    when reset_cell_selection_weights."""
    if not config.init_heads:
        return ()
    return tuple(head for head in TRANSFERABLE_HEADS
                 if not (head == "cell_selection_head" and config.reset_cell_selection_weights))


INIT_REPORT_FILE = "init_report.json"


def write_init_report(model_dir: str, model: tf_keras.Model, init_checkpoint: str,
                      restored: Dict[str, bool]) -> Dict[str, object]:
    """MODEL_DIR/init_report.json: which encoder parts (and heads) came from `init_checkpoint`, and
    which weights start fresh (encoder parts the checkpoint lacks, and the heads not restored)."""
    loaded_names = {v.name for v in model.encoder.weights}
    for head in TRANSFERABLE_HEADS:
        if restored.get(head):
            loaded_names.update(v.name for v in getattr(model, head).weights)
    report = {
        "init_checkpoint": init_checkpoint,
        "loaded": sorted(part for part, ok in restored.items() if ok and part not in TRANSFERABLE_HEADS),
        "loaded_heads": sorted(part for part, ok in restored.items() if ok and part in TRANSFERABLE_HEADS),
        "fresh_encoder_parts": sorted(part for part, ok in restored.items() if not ok
                                      and part not in TRANSFERABLE_HEADS),
        "fresh_weights": sorted(v.name for v in model.weights if v.name not in loaded_names),
    }
    model_dir_lib.write_record(model_dir, INIT_REPORT_FILE, report, sort_keys=False)
    logging.info("Started from %s: loaded %s%s; fresh: %s and %d head weights (see %s).", init_checkpoint,
                 ", ".join(report["loaded"]),
                 "".join(f", {head}" for head in report["loaded_heads"]),
                 ", ".join(report["fresh_encoder_parts"]) or "no encoder part",
                 len(report["fresh_weights"]), INIT_REPORT_FILE)
    return report
