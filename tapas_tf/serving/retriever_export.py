"""Export of a table-retrieval dual encoder: a SavedModel for TF Serving and a LiteRT query tower.

    version_dir = export_retriever("model_dirs/dual", "export/retriever")   # "export/retriever/1", then 2
    tapas-tf export-retriever --model_dir=model_dirs/dual --export_dir=export/retriever

The model directory is a dual-encoder directory (`checkpoints.retriever`: dual_encoder.json,
vocab.txt, checkpoints/, embedder.json). The export is a versioned directory written as
`export.write_version` writes the QA model's (a temporary name, renamed when complete; an
existing version is never overwritten):

    export/retriever/1/
      saved_model.pb, variables/       what TF Serving loads (`--model_base_path=export/retriever`)
      assets.extra/dual_encoder.json   the DualEncoderConfig (TF Serving ignores assets.extra/)
      assets.extra/vocab.txt           the vocabulary, when the model directory has one
      assets.extra/embedder.json       the model's record: model_id, dimension, similarity, ...

Signatures (batch and sequence length dynamic; a client pads to the longest input of its batch):

- `query_embedding`: input_ids, input_mask <int32>[batch, seq_len], `[CLS] question [SEP]` as
  `RetrievalFeatures.questions` builds them -> embeddings <float32>[batch, dim]
  (`TableDualEncoder.embed_queries`).
- `table_embedding`: input_ids, input_mask and the seven token types <int32>[batch, seq_len],
  as `RetrievalFeatures.table` builds them -> embeddings <float32>[batch, dim] (`embed_tables`).
- `serving_default`: `query_embedding` (what a request without a signature name asks for).

A question's score for a table is the inner product of their embeddings (cosine when
embedder.json's "similarity" is "cosine": the model normalises both). Inputs of unequal shapes,
or longer than the position table, fail the request with an InvalidArgument error.

The checkpoint exported is the one embedder.json records (its model_id fingerprints that one, and
the embedding shards of `encode-tables` carry the same id), else the newest; `checkpoint` chooses
another, and assets.extra/embedder.json then holds that checkpoint's own model_id.

With `lite` (the default) the query tower is also converted for LiteRT and written into the model
directory, as the QA model's copy is (model.tflite): MODEL_DIR/query_tower.tflite, signature
`query_embedding` (input_ids, input_mask -> embeddings), builtin ops only (the `ai-edge-litert`
wheel runs it), float32 weights, and MODEL_DIR/query_tower.tflite.json, its record (model_id,
dimension, batch size, the copy's SHA-256). The batch is dynamic, except for an encoder with
`reset_position_index_per_cell`, whose cell positions the converter lowers to builtin ops only at
a known batch size: that copy takes one question per call (the client loops). Before anything is
written, the copy's embeddings of sample questions at a few lengths must equal TensorFlow's
within `lite_export.TOLERANCE`.

`retriever_client.RetrieverServingClient` embeds questions with the export, the LiteRT copy or a
TF Serving URL.
"""

import hashlib
import json
import os
import tempfile
from typing import Any, Dict, NamedTuple, Optional, Sequence, Tuple

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from tapas_tf.checkpoints import importer, model_dir as model_dir_lib, retriever  # noqa: E402
from tapas_tf.features.retrieval_features import TABLE_INPUT_FEATURES  # noqa: E402
from tapas_tf.serving import lite_export  # noqa: E402
from tapas_tf.serving.export import (ASSETS_EXTRA, SERVING_DEFAULT, check_vocab_size, new_version_dir,  # noqa: E402
                                     write_version)

QUERY_EMBEDDING = "query_embedding"
TABLE_EMBEDDING = "table_embedding"
EMBEDDINGS = "embeddings"
QUERY_INPUTS = ("input_ids", "input_mask")
LITE_FILE = "query_tower.tflite"
LITE_INFO_FILE = "query_tower.tflite.json"
LITE_FORMAT_VERSION = 1
# Sequence lengths of the LiteRT check's sample questions (at most max_query_length each).
_CHECK_LENGTHS = (3, 11, 40)
# Word-piece ids of the samples start above BERT's special pieces ([PAD], [UNK], [CLS], ...).
_FIRST_SAMPLE_ID = 6


# --- the model directory ----------------------------------------------------------------------


def read_dual_encoder_config(model_dir: str):
    """The DualEncoderConfig of `model_dir`, read without loading any weights.

    Raises:
      FileNotFoundError: `model_dir` does not exist.
      ValueError: it has no dual_encoder.json (naming a QA model directory as such), or an
        invalid one.
    """
    from tapas_tf.models.dual_encoder import DualEncoderConfig  # pylint: disable=import-outside-toplevel

    if not os.path.isdir(model_dir):
        raise FileNotFoundError(f"model directory {model_dir} does not exist")
    if not os.path.exists(retriever.config_path(model_dir)):
        hint = ""
        if os.path.exists(model_dir_lib.config_path(model_dir)):
            hint = f" (its {model_dir_lib.CONFIG_FILE} is a question-answering model's: export it with tapas-tf export)"
        raise ValueError(f"{model_dir} is not a dual-encoder directory: it has no {retriever.CONFIG_FILE}{hint}")
    try:
        return DualEncoderConfig.from_json_file(retriever.config_path(model_dir))
    except (TypeError, ValueError) as e:
        raise ValueError(f"{retriever.config_path(model_dir)}: {e}") from None


def _recorded(model_dir: str) -> Optional[Dict[str, Any]]:
    """The object of MODEL_DIR/embedder.json when it is a dual encoder's, else None."""
    path = os.path.join(model_dir, retriever.EMBEDDER_FILE)
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        try:
            record = json.load(f)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path} is not valid JSON: {e}") from None
    return record if isinstance(record, dict) and record.get("kind") == retriever.KIND else None


def _checkpoint_to_export(model_dir: str, checkpoint: Optional[str]) -> str:
    """`checkpoint`, else the one embedder.json records, else the newest complete one."""
    recorded = _recorded(model_dir) or {}
    if checkpoint is None and recorded.get("checkpoint"):
        return os.path.join(model_dir, recorded["checkpoint"])
    checkpoint = checkpoint or model_dir_lib.latest_checkpoint(model_dir)
    if checkpoint is None:
        raise FileNotFoundError(f"{model_dir}: no checkpoint under {model_dir_lib.CHECKPOINT_DIR}/")
    return checkpoint


def embedder_record_of(model_dir: str, config, checkpoint: str, has_vocab: bool) -> Dict[str, Any]:
    """embedder.json's object for `checkpoint`: the model directory's own when it records that
    checkpoint (the model_id of its embedding shards), else a new one with that checkpoint's
    model_id."""
    relative = os.path.relpath(checkpoint, model_dir)
    recorded = _recorded(model_dir)
    if recorded and os.path.normpath(recorded.get("checkpoint") or "") == os.path.normpath(relative):
        return recorded
    return retriever.embedder_record(model_dir, config, relative, has_vocab)


def _vocab_file(model_dir: str) -> Optional[str]:
    path = os.path.join(model_dir, importer.VOCAB_FILE)
    return path if os.path.exists(path) else None


# --- the SavedModel ---------------------------------------------------------------------------


def checked_inputs(features: Dict[str, tf.Tensor], max_length: Optional[int]) -> Dict[str, tf.Tensor]:
    """`features` (each <int32>[batch, seq_len]) once they all have input_ids' shape and, with
    `max_length`, at most that many positions: otherwise the request fails, saying why."""
    input_ids = features["input_ids"]
    checks = [tf.debugging.assert_equal(tf.shape(value), tf.shape(input_ids),
                                        message=f"{name} must have the shape of input_ids")
              for name, value in features.items()]
    if max_length is not None:
        checks.append(tf.debugging.assert_less_equal(
            tf.shape(input_ids)[1], max_length, message=f"sequences are longer than the {max_length} positions of the model"))
    with tf.control_dependencies(checks):
        return {name: tf.identity(value) for name, value in features.items()}


class RetrieverServingModule(tf.Module):
    """The exported functions of a TableDualEncoder (see the module docstring).

    Like `export.ServingModule`, it tracks the model's variables, not the Keras model, whose own
    SavedModel serialisation would trace its `call` again for nothing.

    Attributes:
      query_embedding: input_ids, input_mask <int32>[batch, seq_len] -> {"embeddings": <float32>[batch, dim]}.
      table_embedding: TABLE_INPUT_FEATURES <int32>[batch, seq_len] -> {"embeddings": <float32>[batch, dim]}.
    """

    def __init__(self, model, config):
        super().__init__(name="retriever_serving")
        self.model_variables = list(model.variables)
        encoder = config.encoder
        # Cell positions restart in every cell: only absolute positions are bounded by the table.
        max_length = None if encoder.reset_position_index_per_cell else encoder.max_position_embeddings

        @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32, name=name) for name in QUERY_INPUTS])
        def query_embedding(input_ids, input_mask):
            inputs = checked_inputs({"input_ids": input_ids, "input_mask": input_mask}, max_length)
            return {EMBEDDINGS: model.embed_queries(inputs["input_ids"], inputs["input_mask"], training=False)}

        specs = {name: tf.TensorSpec([None, None], tf.int32, name=name) for name in TABLE_INPUT_FEATURES}

        @tf.function(input_signature=[specs])
        def table_embedding(features):
            return {EMBEDDINGS: model.embed_tables(checked_inputs(features, max_length), training=False)}

        self.query_embedding = query_embedding
        self.table_embedding = table_embedding

    def signatures(self) -> Dict[str, tf.types.experimental.ConcreteFunction]:
        query = self.query_embedding.get_concrete_function()
        return {SERVING_DEFAULT: query, QUERY_EMBEDDING: query,
                TABLE_EMBEDDING: self.table_embedding.get_concrete_function()}


def _write_saved_model(directory: str, model, config, record: Dict[str, Any], vocab_file: Optional[str]) -> None:
    """The SavedModel and its assets.extra/ into `directory` (a version being written)."""
    module = RetrieverServingModule(model, config)
    tf.saved_model.save(module, directory, signatures=module.signatures())
    assets = os.path.join(directory, ASSETS_EXTRA)
    tf.io.gfile.makedirs(assets)
    for name, values in ((retriever.CONFIG_FILE, config.to_dict()), (retriever.EMBEDDER_FILE, record)):
        with tf.io.gfile.GFile(os.path.join(assets, name), "w") as f:
            f.write(json.dumps(values, indent=2, sort_keys=True) + "\n")
    if vocab_file:
        tf.io.gfile.copy(vocab_file, os.path.join(assets, importer.VOCAB_FILE))


# --- the LiteRT query tower -------------------------------------------------------------------


class LiteCopy(NamedTuple):
    """A converted and checked query tower, not yet written."""

    flatbuffer: bytes
    batch_size: Optional[int]  # None: any batch; 1: one question per call.


def lite_batch_size(config) -> Optional[int]:
    """The LiteRT copy's batch: dynamic, but 1 for an encoder with cell positions (see the module
    docstring)."""
    return 1 if config.encoder.reset_position_index_per_cell else None


def query_function(model, batch_size: Optional[int]) -> tf.types.experimental.ConcreteFunction:
    """`embed_queries` on input_ids, input_mask <int32>[batch_size, None] -> {"embeddings": ...}."""
    specs = [tf.TensorSpec([batch_size, None], tf.int32, name=name) for name in QUERY_INPUTS]

    def query_embedding(input_ids, input_mask):
        return {EMBEDDINGS: model.embed_queries(input_ids, input_mask, training=False)}

    return tf.function(query_embedding, input_signature=specs).get_concrete_function()


def convert_query_tower(model, config) -> LiteCopy:
    """The query tower as a checked LiteRT flatbuffer (raises ValueError if the check fails)."""
    batch_size = lite_batch_size(config)
    function = query_function(model, batch_size)
    with tempfile.TemporaryDirectory(prefix="query-tower-") as scratch:
        # Through a SavedModel: `from_concrete_functions` names a lone function "serving_default",
        # `from_saved_model` keeps the signature's own key.
        module = tf.Module()
        module.query_variables = list(function.variables)  # Only the query tower's weights.
        tf.saved_model.save(module, scratch, signatures={QUERY_EMBEDDING: function})
        converter = tf.lite.TFLiteConverter.from_saved_model(scratch, signature_keys=[QUERY_EMBEDDING])
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
        flatbuffer = converter.convert()
    check_query_tower(flatbuffer, function, config, batch_size)
    return LiteCopy(flatbuffer, batch_size)


def sample_queries(length: int, batch_size: int, vocab_size: int, seed: int = 0) -> Tuple[np.ndarray, np.ndarray]:
    """Random questions as input_ids, input_mask <int32>[batch_size, length]: row 0 fills the
    length, the others are shorter, padded at the end as `RetrievalFeatures.questions` pads."""
    rng = np.random.default_rng(seed)
    input_ids = rng.integers(min(_FIRST_SAMPLE_ID, vocab_size - 1), vocab_size, [batch_size, length]).astype(np.int32)
    input_mask = np.ones([batch_size, length], np.int32)
    for row in range(1, batch_size):
        real = max(2, length - 2 * row)
        input_ids[row, real:] = 0
        input_mask[row, real:] = 0
    return input_ids, input_mask


def check_lengths(config) -> Sequence[int]:
    """The sample lengths of the check: a few, within [3, max_query_length]."""
    return sorted({min(max(length, 3), config.max_query_length) for length in _CHECK_LENGTHS + (config.max_query_length,)})


def check_query_tower(flatbuffer: bytes, function, config, batch_size: Optional[int]) -> None:
    """Raises ValueError when the copy lacks the `query_embedding` signature, or its embeddings of
    sample questions differ from TensorFlow's by more than `lite_export.TOLERANCE`."""
    from ai_edge_litert.interpreter import Interpreter  # pylint: disable=import-outside-toplevel

    interpreter = Interpreter(model_content=flatbuffer, num_threads=1)
    signatures = interpreter.get_signature_list()
    if list(signatures) != [QUERY_EMBEDDING]:
        raise ValueError(f"the LiteRT query tower's signatures are {sorted(signatures)}, not [{QUERY_EMBEDDING!r}]; "
                         "nothing was written")
    runner = interpreter.get_signature_runner(QUERY_EMBEDDING)
    for length in check_lengths(config):
        input_ids, input_mask = sample_queries(length, batch_size or 2, config.encoder.vocab_size, seed=length)
        expected = function(tf.constant(input_ids), tf.constant(input_mask))[EMBEDDINGS].numpy()
        got = runner(input_ids=input_ids, input_mask=input_mask)[EMBEDDINGS]
        difference = float(np.max(np.abs(got - expected))) if got.shape == expected.shape else float("inf")
        if not difference <= lite_export.TOLERANCE:
            raise ValueError(f"the LiteRT query tower's embeddings differ from TensorFlow's by {difference:g} (more than "
                             f"{lite_export.TOLERANCE:g}) at length {length}; nothing was written")


def lite_record(copy: LiteCopy, config, record: Dict[str, Any]) -> Dict[str, Any]:
    """The object of query_tower.tflite.json: what a client needs besides the copy."""
    return {
        "format_version": LITE_FORMAT_VERSION,
        "file": LITE_FILE,
        "signature": QUERY_EMBEDDING,
        "inputs": list(QUERY_INPUTS),
        "output": EMBEDDINGS,
        "batch_size": copy.batch_size,
        "dimension": config.embedding_dim,
        "similarity": record.get("similarity", "cosine" if config.normalize else "dot"),
        "max_query_length": config.max_query_length,
        "model_id": record["model_id"],
        "checkpoint": record.get("checkpoint"),
        "tensorflow": tf.__version__,
        "bytes": len(copy.flatbuffer),
        "sha256": hashlib.sha256(copy.flatbuffer).hexdigest(),
    }


def write_query_tower(model_dir: str, copy: LiteCopy, config, record: Dict[str, Any]) -> str:
    """Writes MODEL_DIR/query_tower.tflite, then its record, each atomically; returns the copy's path."""
    path = os.path.join(model_dir, LITE_FILE)
    lite_export._write_atomically(path, copy.flatbuffer)  # pylint: disable=protected-access
    info = json.dumps(lite_record(copy, config, record), indent=2, sort_keys=True) + "\n"
    lite_export._write_atomically(os.path.join(model_dir, LITE_INFO_FILE), info.encode("utf-8"))  # pylint: disable=protected-access
    return path


def _check_writable(model_dir: str) -> None:
    if not os.access(model_dir, os.W_OK):
        raise PermissionError(f"cannot write the LiteRT query tower into {model_dir}: export without it "
                              "(--nolite, lite=False)")


def export_query_tower(model_dir: str, checkpoint: Optional[str] = None) -> str:
    """Converts, checks and writes MODEL_DIR/query_tower.tflite (and its .json) alone.

    Raises:
      FileNotFoundError, ValueError: see `export_retriever`; ValueError when the copy does not
        embed as TensorFlow does (nothing is written then).
    """
    config = read_dual_encoder_config(model_dir)
    _check_writable(model_dir)
    checkpoint = _checkpoint_to_export(model_dir, checkpoint)
    model, config = retriever.load_dual_encoder(model_dir, checkpoint)
    record = embedder_record_of(model_dir, config, checkpoint, _vocab_file(model_dir) is not None)
    return write_query_tower(model_dir, convert_query_tower(model, config), config, record)


# --- the export -------------------------------------------------------------------------------


def export_retriever(model_dir: str, export_dir: str, version: Optional[int] = None, checkpoint: Optional[str] = None,
                     lite: bool = True) -> str:
    """Exports a dual-encoder directory to `export_dir/<version>` and, with `lite`, its LiteRT
    query tower to MODEL_DIR/query_tower.tflite (see the module docstring).

    The directory, the version and the vocabulary are checked before the model is loaded, and
    the LiteRT copy is converted and checked before anything is written.

    Args:
      model_dir: a dual-encoder directory.
      export_dir: the model's base path for TF Serving; created if needed.
      version: the version number (default: the next); an existing version is never overwritten.
      checkpoint: a checkpoint prefix; default the one embedder.json records, else the newest.
      lite: also write the LiteRT query tower.

    Returns:
      The version directory, `export_dir/<version>`.

    Raises:
      FileNotFoundError: `model_dir` or its checkpoint is missing.
      ValueError: not a dual-encoder directory, a vocabulary larger than the model's, a checkpoint
        that does not fit, a version that is not a positive integer, or a LiteRT copy that does
        not embed as TensorFlow does.
      FileExistsError: the version exists.
      PermissionError: `lite` and `model_dir` is not writable.
    """
    config = read_dual_encoder_config(model_dir)
    new_version_dir(export_dir, version)
    if lite:
        _check_writable(model_dir)
    vocab_file = _vocab_file(model_dir)
    if vocab_file:
        check_vocab_size(vocab_file, config.encoder.vocab_size)
    checkpoint = _checkpoint_to_export(model_dir, checkpoint)
    model, config = retriever.load_dual_encoder(model_dir, checkpoint)
    record = embedder_record_of(model_dir, config, checkpoint, vocab_file is not None)
    copy = convert_query_tower(model, config) if lite else None
    path = write_version(export_dir, version, lambda directory: _write_saved_model(directory, model, config, record,
                                                                                  vocab_file))
    if copy is not None:
        write_query_tower(model_dir, copy, config, record)
    return path
