"""SavedModel export for TF Serving: a versioned directory with two signatures.

    version_dir = export_model_dir("model_dirs/sqa_tiny", "export")   # "export/1", then "export/2"

    export/1/
      saved_model.pb, variables/     what TF Serving loads (`--model_base_path=export`)
      assets.extra/tapas_config.json the model's config (TF Serving ignores assets.extra/)
      assets.extra/vocab.txt         the vocabulary, when the model directory or the caller has one

Signatures (batch and sequence length are dynamic; nothing is compiled with XLA):

- `serving_default`: `examples` <string>[batch], serialized tf.Examples as create_data writes them
  (`features.example_features`). Only the model's inputs are read, as variable-length lists, so
  examples padded to any length are accepted; the batch is then cut to its real length, the last
  position where any example has input_mask 1: a 512-padded example of 100 tokens runs at 100.
- `predict_features`: MODEL_INPUT_FEATURES as <int32>[batch, seq_len], run at the length given.

Outputs of both (`seq` is the length the model ran at, `max_num_rows`/`max_num_columns` and
`num_agg` come from the model's config):

    probabilities              <float32>[batch, seq]   per token, 0 on padding
    cell_probabilities         <float32>[batch, max_num_rows, max_num_columns] mean of the cell's
                               token probabilities; cell [r, c] holds the tokens of row id r + 1
                               and column id c + 1, as `decoding.cell_probabilities` keys them
    cell_mask                  <int32>[batch, max_num_rows, max_num_columns] 1 where the cell has tokens
    column_ids, row_ids, input_mask  <int32>[batch, seq]  the inputs, to decode with
    column_probabilities       <float32>[batch, max_num_columns] softmax of the column logits, index =
                               column id (0: no column); only with select_one_column
    aggregation_probabilities  <float32>[batch, num_agg] NONE, SUM, AVERAGE, COUNT; with an aggregation head
    aggregation                <int32>[batch] argmax of aggregation_probabilities; with an aggregation head
    classification_probabilities <float32>[batch, num_classes] softmax of the classification logits;
                               with a classification head (TabFact: 0 refuted, 1 entailed)
    entailed_probability       <float32>[batch] P(entailed) = classification_probabilities[:, 1]; with a
                               two-class head

Bad input (features of unequal lengths, a sequence longer than the position table) fails the
request with an InvalidArgument error that says what is wrong.

For asking on one machine without TensorFlow, `lite_export` writes a LiteRT copy of the model into
its model directory instead (model.tflite, which `ask` and `TableQA` pick up).

A retrieval dual encoder exports with `retriever_export` (`tapas-tf export-retriever`), through
the same versioned directory (`write_version`).
"""

import os
import shutil
import uuid
from typing import Callable, Dict, Mapping, Optional, Tuple

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import tensorflow as tf  # noqa: E402

from tapas_tf.checkpoints import model_dir as model_dir_lib  # noqa: E402
from tapas_tf.features.example_features import MODEL_INPUT_FEATURES  # noqa: E402
from tapas_tf.models import segmented  # noqa: E402

SERVING_DEFAULT = tf.saved_model.DEFAULT_SERVING_SIGNATURE_DEF_KEY  # "serving_default"
PREDICT_FEATURES = "predict_features"
EXAMPLES_INPUT = "examples"
ASSETS_EXTRA = "assets.extra"
VOCAB_FILE = "vocab.txt"
# Inputs returned with the outputs, so that a client can decode without keeping its request.
ECHOED_FEATURES = ("column_ids", "row_ids", "input_mask")


# --- the outputs ------------------------------------------------------------------------------


def cell_grid(probabilities: tf.Tensor, column_ids: tf.Tensor, row_ids: tf.Tensor, input_mask: tf.Tensor,
              max_num_rows: int, max_num_columns: int) -> Tuple[tf.Tensor, tf.Tensor]:
    """Mean token probability of every table body cell, as `decoding.cell_probabilities`, batched.

    Body tokens are those with row id and column id > 0 and input_mask 1. Tokens of row ids above
    max_num_rows or column ids above max_num_columns have no place in the grid and are left out
    (create_data keeps ids below the model's limits).

    Args:
      probabilities: <float32>[batch, seq].
      column_ids, row_ids, input_mask: <int32>[batch, seq].
      max_num_rows, max_num_columns: the grid's size.

    Returns:
      cell_probabilities <float32>[batch, max_num_rows, max_num_columns], 0 for cells without
      tokens, and cell_mask <int32>[same], 1 for cells with tokens.
    """
    in_body = (row_ids > 0) & (column_ids > 0) & tf.equal(input_mask, 1)
    in_body &= (row_ids <= max_num_rows) & (column_ids <= max_num_columns)
    # Everything else goes to one extra row and column, dropped below.
    rows = segmented.IndexMap(tf.where(in_body, row_ids - 1, max_num_rows), max_num_rows + 1)
    columns = segmented.IndexMap(tf.where(in_body, column_ids - 1, max_num_columns), max_num_columns + 1)
    cells = segmented.ProductIndexMap(rows, columns)
    means, _ = segmented.reduce_mean(probabilities, cells)
    counts, _ = segmented.reduce_sum(tf.ones_like(probabilities), cells)
    grid = [-1, max_num_rows + 1, max_num_columns + 1]
    means = tf.reshape(means, grid)[:, :max_num_rows, :max_num_columns]
    counts = tf.reshape(counts, grid)[:, :max_num_rows, :max_num_columns]
    return means, tf.cast(counts > 0, tf.int32)


def serving_outputs(model, features: Mapping[str, tf.Tensor]) -> Dict[str, tf.Tensor]:
    """The signatures' outputs (see the module docstring) of `model` on `features`.

    Args:
      model: a TapasForQuestionAnswering.
      features: MODEL_INPUT_FEATURES, <int32>[batch, seq].
    """
    config = model.tapas_config
    input_ids = features["input_ids"]
    checks = [tf.debugging.assert_equal(tf.shape(features[name]), tf.shape(input_ids),
                                        message=f"{name} must have the shape of input_ids")
              for name in MODEL_INPUT_FEATURES]
    if not config.reset_position_index_per_cell:
        checks.append(tf.debugging.assert_less_equal(
            tf.shape(input_ids)[1], config.max_position_embeddings,
            message=f"sequences are longer than the model's {config.max_position_embeddings} positions"))
    with tf.control_dependencies(checks):
        features = {name: tf.identity(features[name]) for name in MODEL_INPUT_FEATURES}
    outputs = model(features, training=False)
    result = {"probabilities": outputs["probabilities"]}
    result["cell_probabilities"], result["cell_mask"] = cell_grid(
        outputs["probabilities"], features["column_ids"], features["row_ids"], features["input_mask"],
        config.max_num_rows, config.max_num_columns)
    result.update({name: features[name] for name in ECHOED_FEATURES})
    if "column_logits" in outputs:
        result["column_probabilities"] = tf.nn.softmax(outputs["column_logits"], axis=-1)
    if "aggregation_logits" in outputs:
        result["aggregation_probabilities"] = tf.nn.softmax(outputs["aggregation_logits"], axis=-1)
        result["aggregation"] = tf.argmax(outputs["aggregation_logits"], axis=-1, output_type=tf.int32)
    if "classification_logits" in outputs:
        result["classification_probabilities"] = tf.nn.softmax(outputs["classification_logits"], axis=-1)
        if config.num_classification_labels == 2:
            result["entailed_probability"] = result["classification_probabilities"][:, 1]
    return result


# --- the inputs -------------------------------------------------------------------------------


def real_length(input_mask: tf.Tensor) -> tf.Tensor:
    """<int32>[]: 1 + the last position where any example of the batch has input_mask 1 (at least 1).

    For create_data's examples, whose mask is a prefix of ones, this is max(sum(input_mask)).
    """
    positions = tf.range(1, tf.shape(input_mask)[1] + 1)
    last = tf.where(tf.not_equal(input_mask, 0), positions[None, :], 0)
    return tf.maximum(tf.reduce_max(last), 1)


def parse_examples(serialized: tf.Tensor) -> Dict[str, tf.Tensor]:
    """MODEL_INPUT_FEATURES of serialized classifier tf.Examples, cut to the batch's real length.

    Args:
      serialized: <string>[batch].

    Returns:
      dict of <int32>[batch, seq], seq = `real_length(input_mask)`. Every feature of an example
      must have as many values as its input_ids (any number): otherwise InvalidArgument.
    """
    spec = {name: tf.io.VarLenFeature(tf.int64) for name in MODEL_INPUT_FEATURES}
    parsed = tf.io.parse_example(serialized, spec)
    batch_size = tf.shape(serialized)[0]

    def lengths(values: tf.SparseTensor) -> tf.Tensor:
        rows = tf.cast(values.indices[:, 0], tf.int32)
        return tf.math.bincount(rows, minlength=batch_size, maxlength=batch_size)

    expected = lengths(parsed["input_ids"])
    checks = [tf.debugging.assert_equal(lengths(parsed[name]), expected,
                                        message=f"every tf.Example needs as many {name} as input_ids")
              for name in MODEL_INPUT_FEATURES[1:]]
    with tf.control_dependencies(checks):
        dense = {name: tf.cast(tf.sparse.to_dense(parsed[name]), tf.int32) for name in MODEL_INPUT_FEATURES}
    length = real_length(dense["input_mask"])
    return {name: value[:, :length] for name, value in dense.items()}


class ServingModule(tf.Module):
    """The exported functions of a TapasForQuestionAnswering.

    The module tracks the model's variables, not the Keras model itself, whose own SavedModel
    serialisation would trace its `call` again for nothing.

    Attributes:
      serve_examples: the `serving_default` function, examples <string>[batch].
      predict_features: the `predict_features` function, a dict of <int32>[batch, seq_len].
    """

    def __init__(self, model):
        super().__init__(name="tapas_serving")
        self.model_variables = list(model.variables)

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name=EXAMPLES_INPUT)])
        def serve_examples(examples):
            return serving_outputs(model, parse_examples(examples))

        specs = {name: tf.TensorSpec([None, None], tf.int32, name=name) for name in MODEL_INPUT_FEATURES}

        @tf.function(input_signature=[specs])
        def predict_features(features):
            return serving_outputs(model, features)

        self.serve_examples = serve_examples
        self.predict_features = predict_features

    def signatures(self) -> Dict[str, tf.types.experimental.ConcreteFunction]:
        return {SERVING_DEFAULT: self.serve_examples.get_concrete_function(),
                PREDICT_FEATURES: self.predict_features.get_concrete_function()}


# --- the versioned directory ------------------------------------------------------------------


def next_version(export_dir: str) -> int:
    """1 + the largest numeric subdirectory of `export_dir` (1 when there is none)."""
    if not tf.io.gfile.isdir(export_dir):
        return 1
    names = [name.rstrip("/") for name in tf.io.gfile.listdir(export_dir)]  # gfile marks remote dirs "/".
    return max((int(name) for name in names if name.isascii() and name.isdigit()), default=0) + 1


def new_version_dir(export_dir: str, version: Optional[int]) -> str:
    """`export_dir/<version>` (default the next version), checked to be free.

    Raises:
      FileExistsError: the version exists.
      ValueError: the version is not a positive integer.
    """
    if version is None:
        version = next_version(export_dir)
    elif isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise ValueError(f"an export version is a positive integer, got {version!r}")
    path = os.path.join(export_dir, str(version))
    if tf.io.gfile.exists(path):
        raise FileExistsError(f"{path} exists: version {version} is already exported; "
                              "choose another version or let the next free one be chosen")
    return path


def export_saved_model(model, export_dir: str, version: Optional[int] = None,
                       vocab_file: Optional[str] = None) -> str:
    """Writes `model` as SavedModel version `version` (default: the next) of `export_dir`.

    On a local disk the version is written under a temporary name in `export_dir` and renamed
    when complete, so a TF Serving instance watching `export_dir` never loads a half-written
    version; on a remote file system (gs://...) it is written in place.

    Args:
      model: a TapasForQuestionAnswering whose variables exist (called once).
      export_dir: the model's base path for TF Serving; created if needed.
      version: the version number; an existing version is never overwritten.
      vocab_file: copied to assets.extra/vocab.txt when given.

    Returns:
      The version directory, `export_dir/<version>`.

    Raises:
      FileExistsError: the version exists.
      ValueError: the version is not a positive integer.
    """
    module = ServingModule(model)

    def write(directory: str) -> None:
        tf.saved_model.save(module, directory, signatures=module.signatures())
        assets = os.path.join(directory, ASSETS_EXTRA)
        tf.io.gfile.makedirs(assets)
        with tf.io.gfile.GFile(os.path.join(assets, model_dir_lib.CONFIG_FILE), "w") as f:
            f.write(model.tapas_config.to_json_string())
        if vocab_file:
            tf.io.gfile.copy(vocab_file, os.path.join(assets, VOCAB_FILE))

    return write_version(export_dir, version, write)


def write_version(export_dir: str, version: Optional[int], write: Callable[[str], None]) -> str:
    """Runs `write(directory)` to fill version `version` (default the next) of `export_dir`.

    On a local disk `directory` is a temporary name in `export_dir`, renamed to the version when
    `write` returns and removed if it raises, so a TF Serving instance watching `export_dir`
    never loads a half-written version; on a remote file system (gs://...) it is the version
    itself.

    Returns:
      The version directory, `export_dir/<version>`.

    Raises:
      FileExistsError, ValueError: see `new_version_dir`; and what `write` raises.
    """
    path = new_version_dir(export_dir, version)
    tf.io.gfile.makedirs(export_dir)
    staging = path
    if "://" not in export_dir:
        # Not a number, so TF Serving skips it. Made with the umask's mode, unlike mkdtemp's 0700,
        # which would hide the version from a server running as another user.
        staging = os.path.join(export_dir, f".export-{os.path.basename(path)}-{uuid.uuid4().hex[:8]}")
    try:
        write(staging)
        if staging != path:
            os.rename(staging, path)  # Fails, rather than merging, if the version appeared meanwhile.
    except BaseException:
        if staging != path:
            shutil.rmtree(staging, ignore_errors=True)
        raise
    return path


def export_model_dir(model_dir: str, export_dir: str, version: Optional[int] = None,
                     checkpoint: Optional[str] = None, vocab_file: Optional[str] = None) -> str:
    """Exports a model directory's checkpoint (default the newest) to `export_dir/<version>`.

    The vocabulary is `vocab_file`, else the model directory's vocab.txt if it has one, else none.
    The version is checked before the model is loaded.

    Raises:
      FileNotFoundError: `model_dir`, its config or its checkpoint is missing.
      CorruptCheckpointError (a ValueError): the checkpoint cannot be read.
      FileExistsError, ValueError: see `export_saved_model`.
    """
    if not tf.io.gfile.isdir(model_dir):
        raise FileNotFoundError(f"model directory {model_dir} does not exist")
    new_version_dir(export_dir, version)
    if vocab_file is None and tf.io.gfile.exists(os.path.join(model_dir, VOCAB_FILE)):
        vocab_file = os.path.join(model_dir, VOCAB_FILE)
    if vocab_file:
        check_vocab_size(vocab_file, model_dir_lib.load_config(model_dir).vocab_size)
    model = model_dir_lib.load_model(model_dir, checkpoint)
    return export_saved_model(model, export_dir, version, vocab_file)


def check_vocab_size(vocab_file: str, model_vocab_size: int) -> None:
    """Refuses a vocabulary with more pieces than the model has word embeddings."""
    with tf.io.gfile.GFile(vocab_file) as f:
        pieces = sum(1 for line in f if line.strip())
    if pieces > model_vocab_size:
        raise ValueError(f"the vocabulary {vocab_file} has {pieces} pieces but the model has "
                         f"{model_vocab_size} word embeddings; pass the vocabulary it was trained with")
