"""The self-describing model directory, and the one place that builds a model from one.

    model_dir/
      tapas_config.json      every model option (models.TapasConfig)
      model_kind.json        which model the checkpoints hold: {"model_kind": "masked_lm"} for
                             pre-training (TapasForMaskedLM); absent or "question_answering" for
                             TapasForQuestionAnswering
      checkpoints/ckpt-N.*   tf.train.Checkpoint(model=..., optimizer=..., step=...)
      checkpoints/checkpoint the CheckpointManager's index

or, the compact layout (written by `tapas_tf.checkpoints.compact`, read here), no checkpoints/
but `weights_float16.npz` or `weights_int8.npz` and `compact.json`.

Predict, export and import read the config from here, so they never need the
training flags again. Any checkpoint whose object graph has a `model` entry
holding a TapasForQuestionAnswering can be restored by `load_model`. Training builds its model
with `build_model` too, and resumes with `tapas_tf.training.recovery`.

The newest checkpoint is the newest whose files are all there (`latest_checkpoint`): one that lost
a file (a `.index` deleted, a copy that skipped a shard) is passed over with a warning, as
training's recovery passes it over, where TensorFlow alone would find no checkpoint at all.
"""

import contextlib
import logging
import os
import re
import zipfile
from typing import Any, Iterator, List, Mapping, Optional

import numpy as np

CONFIG_FILE = "tapas_config.json"
CHECKPOINT_DIR = "checkpoints"
MODEL_KIND_FILE = "model_kind.json"
QUESTION_ANSWERING = "question_answering"
MASKED_LM = "masked_lm"
MODEL_KINDS = (QUESTION_ANSWERING, MASKED_LM)
# The compact layout: weights file by storage type, its provenance, and the int8 scales' suffix.
COMPACT_WEIGHTS_FILES = {"float16": "weights_float16.npz", "int8": "weights_int8.npz"}
COMPACT_INFO_FILE = "compact.json"
SCALE_SUFFIX = "@scale"
# Where a training checkpoint keeps its step (tf.train.Checkpoint(step=...)).
_STEP_KEY = "step/.ATTRIBUTES/VARIABLE_VALUE"
_NUMBERED = re.compile(r"-(\d+)$")
_DATA_SHARD = re.compile(r"\.data-(\d+)-of-(\d+)$")


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


# --- the config and the kind ------------------------------------------------------------------


def config_path(model_dir: str) -> str:
    return os.path.join(model_dir, CONFIG_FILE)


def checkpoint_dir(model_dir: str) -> str:
    return os.path.join(model_dir, CHECKPOINT_DIR)


def write_record(model_dir: str, relative_path: str, values: Mapping[str, object], sort_keys: bool = True) -> str:
    """Writes `values` as indented JSON to MODEL_DIR/RELATIVE_PATH (overwriting it), through
    TensorFlow's file system, so that a model directory on gs:// works as a local one: the one writer
    of a run's records (its train config, start-up choices, init report, model kind). Returns the path."""
    import json

    import tensorflow as tf

    path = os.path.join(model_dir, relative_path)
    tf.io.gfile.makedirs(os.path.dirname(path))
    with tf.io.gfile.GFile(path, "w") as f:
        f.write(json.dumps(values, indent=2, sort_keys=sort_keys) + "\n")
    return path


def save_config(model_dir: str, config) -> str:
    os.makedirs(model_dir, exist_ok=True)
    path = config_path(model_dir)
    config.to_json_file(path)
    return path


def require_config(model_dir: str) -> str:
    """The path of `model_dir`'s config; FileNotFoundError (naming it) when it is not a model
    directory. Cheap: callers check a path before TensorFlow loads."""
    path = config_path(model_dir)
    if not os.path.exists(path):
        raise FileNotFoundError(
            f"{model_dir} is not a tapas-tf model directory: {CONFIG_FILE} is missing")
    return path


def load_config(model_dir: str):
    from tapas_tf.models.config import TapasConfig

    return TapasConfig.from_json_file(require_config(model_dir))


def save_model_kind(model_dir: str, kind: str) -> str:
    """Writes model_kind.json saying which model (`MODEL_KINDS`) the checkpoints hold."""
    if kind not in MODEL_KINDS:
        raise ValueError(f"Unknown model kind {kind!r}; expected one of {MODEL_KINDS}.")
    return write_record(model_dir, MODEL_KIND_FILE, {"model_kind": kind})


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


# --- which checkpoint -------------------------------------------------------------------------


def named_checkpoints(directory: str) -> List[str]:
    """The checkpoint prefixes the state file of `directory` names, newest first ([] without one)."""
    import tensorflow as tf

    state = tf.train.get_checkpoint_state(directory)
    if state is None:
        return []
    named = list(reversed(state.all_model_checkpoint_paths))
    if state.model_checkpoint_path:
        named.insert(0, state.model_checkpoint_path)
    return list(dict.fromkeys(named))


def checkpoint_candidates(directory: str) -> List[str]:
    """Every checkpoint prefix of `directory`, newest first: the state file's, then the other
    `*-N.index` on disk (a save cut off before it was named, or a lost state file), highest N first."""
    import tensorflow as tf

    named = named_checkpoints(directory)
    found = {path[:-len(".index")] for path in tf.io.gfile.glob(os.path.join(directory, "*.index"))}
    numbered = [(int(m.group(1)), prefix) for prefix in found - set(named) if (m := _NUMBERED.search(prefix))]
    return named + [prefix for _, prefix in sorted(numbered, reverse=True)]


def missing_checkpoint_file(prefix: str) -> Optional[str]:
    """The name of a file checkpoint `prefix` lacks (its `.index`, or a `.data-*` shard), else None."""
    import tensorflow as tf

    if not tf.io.gfile.exists(prefix + ".index"):
        return os.path.basename(prefix) + ".index"
    directory, base = os.path.split(prefix)
    names = tf.io.gfile.listdir(directory) if tf.io.gfile.isdir(directory) else []
    shards = [m for name in names if name.startswith(base + ".data-") and (m := _DATA_SHARD.search(name))]
    total = int(shards[0].group(2)) if shards else 1
    present = {int(m.group(1)) for m in shards}
    for shard in range(total):
        if shard not in present:
            return f"{base}.data-{shard:05d}-of-{total:05d}"
    return None


def latest_checkpoint(model_dir: str) -> Optional[str]:
    """The newest checkpoint under `model_dir/checkpoints` whose files are all there, or None.

    Candidates come in `checkpoint_candidates` order; each one passed over (a file missing) is
    logged as a warning, and so is the older one taken instead. Files that are there but damaged
    are found when the checkpoint is read (`reading_checkpoint`), not here.
    """
    skipped = []
    for prefix in checkpoint_candidates(checkpoint_dir(model_dir)):
        missing = missing_checkpoint_file(prefix)
        if missing is None:
            if skipped:
                logging.warning("Using the older checkpoint %s instead.", prefix)
            return prefix
        skipped.append(prefix)
        logging.warning("Skipping checkpoint %s: its file %s is missing.", prefix, missing)
    return None


def checkpoint_step(checkpoint: str) -> int:
    """The training step of a checkpoint: its `step` variable, else the `-N` of its prefix, else 0."""
    import tensorflow as tf

    with reading_checkpoint(checkpoint):
        reader = tf.train.load_checkpoint(checkpoint)
        if reader.has_tensor(_STEP_KEY):
            return int(reader.get_tensor(_STEP_KEY))
    found = _NUMBERED.search(checkpoint)
    return int(found.group(1)) if found else 0


# --- the compact layout -----------------------------------------------------------------------


def compact_weights_path(model_dir: str) -> Optional[str]:
    """The compact weights file of `model_dir` (float16 or int8), or None."""
    for name in COMPACT_WEIGHTS_FILES.values():
        if os.path.exists(os.path.join(model_dir, name)):
            return os.path.join(model_dir, name)
    return None


def has_compact_weights(model_dir: str) -> bool:
    return compact_weights_path(model_dir) is not None


def compact_source_step(model_dir: str) -> int:
    """The training step of the checkpoint a compact directory was made from (0 if unknown)."""
    import json

    try:
        with open(os.path.join(model_dir, COMPACT_INFO_FILE), encoding="utf-8") as f:
            return int(json.load(f).get("source_step") or 0)
    except (OSError, ValueError, TypeError):
        return 0


def decompress(stored: Mapping[str, np.ndarray], name: str) -> np.ndarray:
    """One variable in float32 from a compact file's arrays: float16, or int8 times its scales."""
    value = stored[name].astype(np.float32)
    scale = stored.get(name + SCALE_SUFFIX)
    return value if scale is None else value * scale


def restore_compact_weights(model, model_dir: str, targets: Optional[Mapping[str, Any]] = None) -> None:
    """Sets every variable of a built TapasForQuestionAnswering from `model_dir`'s compact weights
    (float16, or int8 with scales); `targets` (name -> variable) replaces `model.weight_map()`.

    Raises:
      ValueError: the file is damaged, or its names or shapes are not the model's (names the file
        and the first differences).
    """
    path = compact_weights_path(model_dir) or os.path.join(model_dir, COMPACT_WEIGHTS_FILES["float16"])
    targets = model.weight_map() if targets is None else targets
    try:
        with np.load(path) as file:
            stored = {name: file[name] for name in file.files}
        weights = {name: decompress(stored, name) for name in stored if not name.endswith(SCALE_SUFFIX)}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        raise ValueError(f"{path}: not a readable weights file ({e})") from e
    missing, unexpected = sorted(set(targets) - set(weights)), sorted(set(weights) - set(targets))
    if missing or unexpected:
        raise ValueError(f"{path} does not fit the model configured in {model_dir}: "
                         f"missing {missing[:3]}, unexpected {unexpected[:3]}")
    for name, variable in targets.items():
        if tuple(weights[name].shape) != tuple(variable.shape):
            raise ValueError(f"{path}: {name} has shape {weights[name].shape}, "
                             f"the model {tuple(variable.shape)}")
        variable.assign(weights[name].astype(variable.dtype.as_numpy_dtype))


# --- the model --------------------------------------------------------------------------------


def build_model(config, kind: str = QUESTION_ANSWERING):
    """A TapasForQuestionAnswering, or TapasForMaskedLM for MASKED_LM, with its variables created
    (on all-zero <int32>[1, 8] features) and fresh weights. Training builds its model here too."""
    import tensorflow as tf

    from tapas_tf.models.pretrain_model import TapasForMaskedLM
    from tapas_tf.models.qa_model import TapasForQuestionAnswering, dummy_features

    if kind not in MODEL_KINDS:
        raise ValueError(f"Unknown model kind {kind!r}; expected one of {MODEL_KINDS}.")
    features = dummy_features(1, 8)
    if kind == MASKED_LM:
        model = TapasForMaskedLM(config)
        features["masked_lm_positions"] = tf.zeros([1, 1], tf.int32)
    else:
        model = TapasForQuestionAnswering(config)
    model(features, training=False)
    return model


def load_model(model_dir: str, checkpoint: Optional[str] = None, config=None, kind: str = QUESTION_ANSWERING):
    """The Keras model of a model directory, weights restored (`restore_weights`).

    Args:
      model_dir: a directory written by training, by `tapas_tf.checkpoints.importer` or by
        `tapas_tf.checkpoints.compact`.
      checkpoint: a checkpoint prefix; default the newest complete one (`latest_checkpoint`),
        else the compact weights.
      config: the TapasConfig to build; default the directory's. Only options no weight depends
        on may differ (inference raises the heads' row and column segments).
      kind: the model kind the directory must hold (`MODEL_KINDS`).

    Returns:
      The model; call it as `model(features, training=False)` with a dict of
      `[batch, seq_len]` tensors named as the tf.Example features.

    Raises:
      FileNotFoundError: no config, or no weights.
      ValueError: the directory holds another kind of model (model_kind.json).
      CorruptCheckpointError (a ValueError): the checkpoint's files are truncated or damaged.
    """
    config = config or load_config(model_dir)
    found = load_model_kind(model_dir)
    if found != kind and found == MASKED_LM:
        raise ValueError(f"{model_dir} holds a pre-trained masked-LM model, not a question-answering one; "
                         "fine-tune it first (--mode=train --init_checkpoint=THAT_DIR)")
    if found != kind:
        raise ValueError(f"{model_dir} holds a {found} model, not a {kind} one")
    model = build_model(config, kind)
    restore_weights(model, model_dir, checkpoint)
    return model


def resolve_weights(model_dir: str, checkpoint: Optional[str] = None) -> Optional[str]:
    """The checkpoint `restore_weights` reads: `checkpoint`, else the newest complete one; None
    when it reads the compact weights instead.

    Raises:
      FileNotFoundError: no checkpoint and no compact weights.
    """
    checkpoint = checkpoint or latest_checkpoint(model_dir)
    if checkpoint is None and not has_compact_weights(model_dir):
        raise FileNotFoundError(f"{model_dir}: no checkpoint under {CHECKPOINT_DIR}/ and no "
                                f"{' or '.join(COMPACT_WEIGHTS_FILES.values())}")
    return checkpoint


def weights_step(model_dir: str, checkpoint: Optional[str]) -> int:
    """The training step of what `resolve_weights` chose: the checkpoint's, or the compact weights'
    source checkpoint's (0 if unknown)."""
    return checkpoint_step(checkpoint) if checkpoint else compact_source_step(model_dir)


def restore_weights(model, model_dir: str, checkpoint: Optional[str] = None) -> None:
    """Restores a built model from `checkpoint`, else the directory's newest complete checkpoint,
    else its compact weights (a TapasForQuestionAnswering only).

    Raises:
      FileNotFoundError: none of them.
      CorruptCheckpointError (a ValueError): the checkpoint's files are truncated or damaged.
    """
    import tensorflow as tf

    checkpoint = resolve_weights(model_dir, checkpoint)
    if checkpoint is None:
        restore_compact_weights(model, model_dir)
        return
    with reading_checkpoint(checkpoint, "restore its files or pass another --checkpoint"):
        status = tf.train.Checkpoint(model=model).restore(checkpoint)
    # Not the optimizer's slots or the step.
    status.expect_partial().assert_existing_objects_matched()
