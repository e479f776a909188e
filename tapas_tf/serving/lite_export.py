"""Writes a model directory's LiteRT copy (`lite_model`): model.tflite and model.tflite.json.

    export_lite_model("model_dirs/sqa_tiny")        # -> model_dirs/sqa_tiny/model.tflite
    python run_task.py --task=SQA --mode=export --export_lite --model_dir=model_dirs/sqa_tiny

The copy is the forward pass `TableQA` runs in TensorFlow (`tf_runner.load_inference_model`: the
heads' segments raised to 256 rows and columns), converted with builtin ops only, so that the
`ai-edge-litert` wheel (no Flex delegate) runs it: MODEL_INPUT_FEATURES <int32>[1, seq_len] ->
probabilities <float32>[1, seq_len] and, with an aggregation head, aggregation_logits
<float32>[1, num_agg]. It has a second signature with the heads at the model's trained limits
(when smaller), for the tables that fit them: the same outputs for a quarter less work
(`lite_model`); the converter stores the shared weights once. The batch is 1 because the converter lowers the cell positions' broadcast
comparisons (`models.embeddings.cell_position_ids`) to builtin ops only at a known batch size; the
sequence length stays dynamic. Weights stay float32: the converter's float16 mode also rounds the
graph's constants (a 1e-10 guard against dividing by zero becomes 0).

A compact model directory (float16 weights, no checkpoint: the bundled models) gets a stripped
copy, model.tflite.stripped, without the weights weights_float16.npz holds (`lite_weights`): the
runner puts them back when it loads the copy. That makes the copy about 0.5 MB instead of 18.7 MB
for a tiny model. `share_weights=False` (`--nolite_share_weights`) writes the whole model.tflite,
for use outside this package.

The conversion is checked before anything is written: on a sample input at two lengths, the
copy's outputs must equal TensorFlow's within `TOLERANCE`.
"""

import hashlib
import os
import tempfile
from typing import Dict, List, Optional, Tuple

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from tapas_tf.checkpoints import model_dir as model_dir_lib  # noqa: E402
from tapas_tf.features.example_features import MODEL_INPUT_FEATURES, MODEL_OUTPUTS  # noqa: E402
from tapas_tf.qa import lite_model, lite_weights  # noqa: E402
from tapas_tf.qa.tf_runner import inference_segments, load_inference_model  # noqa: E402

# Largest difference of any output between the copy and TensorFlow on the check's sample.
TOLERANCE = 1e-4
_CHECK_LENGTHS = (32, 77)


def export_lite_model(model_dir: str, checkpoint: Optional[str] = None, share_weights: bool = True) -> str:
    """Converts the question-answering model of `model_dir` (its newest weights, or `checkpoint`)
    and writes model.tflite (or, for a compact directory with `share_weights`, model.tflite.stripped)
    and model.tflite.json into `model_dir`, replacing an older copy.

    Returns:
      The path of the copy written.

    Raises:
      FileNotFoundError: no config, or no weights.
      ValueError: a masked-LM directory; or the copy does not answer as TensorFlow does.
    """
    if model_dir_lib.load_model_kind(model_dir) != model_dir_lib.QUESTION_ANSWERING:
        raise ValueError(f"{model_dir} holds a pre-trained masked-LM model; only question-answering models "
                         "are exported for asking")
    config = model_dir_lib.load_config(model_dir)
    fingerprint = lite_model.weights_fingerprint(model_dir, checkpoint)
    sizes = head_sizes(config)
    models = {signature_key(size): load_inference_model(model_dir, checkpoint, config, size) for size in sizes}
    functions = {key: _forward_function(model, key) for key, model in models.items()}
    flatbuffer = _convert(functions, models)
    outputs = tuple(key for key in MODEL_OUTPUTS if key in next(iter(functions.values())).structured_outputs)
    _check(flatbuffer, functions, config, outputs)
    newest = checkpoint or lite_model.newest_checkpoint(model_dir)
    shared = _shared_weights(model_dir, flatbuffer) if share_weights and not newest else None
    if shared:
        written, other = lite_model.LITE_STRIPPED_FILE, lite_model.LITE_MODEL_FILE
    else:
        written, other = lite_model.LITE_MODEL_FILE, lite_model.LITE_STRIPPED_FILE
    path = os.path.join(model_dir, written)
    _write_atomically(path, shared.pop("stripped") if shared else flatbuffer)
    if os.path.exists(os.path.join(model_dir, other)):  # The other form would be a second, stale copy.
        os.remove(os.path.join(model_dir, other))
    source = {"checkpoint": os.path.basename(newest or ""), "tensorflow": tf.__version__,
              "bytes": len(flatbuffer)}
    lite_model.write_lite_info(model_dir, config.to_dict(), outputs, fingerprint, source,
                               {signature_key(size): size for size in sizes}, shared)
    return path


def _shared_weights(model_dir: str, flatbuffer: bytes) -> Optional[Dict[str, object]]:
    """The stripped copy and its `shared_weights` entry, for a directory with float16 compact
    weights; None for others (checkpoints may change under the copy; int8 weights are not stored
    as the copy's float32 constants)."""
    weights_file = model_dir_lib.COMPACT_WEIGHTS_FILES["float16"]
    weights_path = os.path.join(model_dir, weights_file)
    if not os.path.exists(weights_path):
        return None
    with np.load(weights_path) as loaded:
        weights = {name: loaded[name] for name in loaded.files}
    stripped, segments = lite_weights.strip_shared_weights(flatbuffer, weights)
    digest = hashlib.sha256(flatbuffer).hexdigest()
    lite_weights.restore_shared_weights(stripped, weights, segments, digest)  # Raises if it would not rebuild.
    return {"stripped": stripped, "file": weights_file, "sha256": digest, "segments": segments}


def head_sizes(config) -> List[Tuple[int, int]]:
    """(rows, columns) of the heads of each signature, smallest first: the trained limits when
    they are smaller than what the embeddings address, then that."""
    full, trained = inference_segments(config), (config.max_num_rows, config.max_num_columns)
    return [trained, full] if trained != full else [full]


def signature_key(size: Tuple[int, int]) -> str:
    return f"rows_{size[0]}_columns_{size[1]}"


def _forward_function(model, key: str) -> tf.types.experimental.ConcreteFunction:
    spec = {name: tf.TensorSpec([1, None], tf.int32, name=name) for name in MODEL_INPUT_FEATURES}

    def forward(features):
        outputs = model(features, training=False)
        return {key: outputs[key] for key in MODEL_OUTPUTS if key in outputs}

    forward.__name__ = key  # The converter names each signature after its function.
    return tf.function(forward, input_signature=[spec]).get_concrete_function()


def _convert(functions: Dict[str, tf.types.experimental.ConcreteFunction], models: Dict[str, tf.Module]) -> bytes:
    trackable = tf.Module()
    trackable.models = list(models.values())
    converter = tf.lite.TFLiteConverter.from_concrete_functions(list(functions.values()), trackable)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    return converter.convert()


def sample_features(length: int, vocab_size: int, seed: int = 0) -> Dict[str, np.ndarray]:
    """A question and a small table as MODEL_INPUT_FEATURES <int32>[1, length], random but valid
    (padding at the end, cells spanning several tokens, a previous answer, ranks and relations)."""
    rng = np.random.default_rng(seed)
    real, question = length - length // 8, length // 4
    features = {name: np.zeros([1, length], np.int32) for name in MODEL_INPUT_FEATURES}
    features["input_ids"][0, :real] = rng.integers(1, vocab_size, real)
    features["input_mask"][0, :real] = 1
    table = slice(question, real)
    cells = np.sort(rng.integers(0, 12, real - question))  # Cell k: column k % 3 + 1, row k // 3.
    features["segment_ids"][0, table] = 1
    features["column_ids"][0, table] = cells % 3 + 1
    features["row_ids"][0, table] = cells // 3
    features["prev_label_ids"][0, table] = cells == 4
    features["column_ranks"][0, table] = rng.integers(0, 5, real - question)
    features["inv_column_ranks"][0, table] = rng.integers(0, 5, real - question)
    features["numeric_relations"][0, table] = rng.integers(0, 10, real - question)
    return features


def _check(flatbuffer: bytes, functions, config, outputs) -> None:
    """Raises ValueError when a signature of the copy is missing, or its outputs differ from
    TensorFlow's (or the signatures' from each other) on sample inputs."""
    from ai_edge_litert.interpreter import Interpreter  # pylint: disable=import-outside-toplevel

    interpreter = Interpreter(model_content=flatbuffer, num_threads=1)
    if set(interpreter.get_signature_list()) != set(functions):
        raise ValueError(f"the LiteRT copy's signatures are {sorted(interpreter.get_signature_list())}, not "
                         f"{sorted(functions)}; nothing was written")
    for length in _CHECK_LENGTHS:
        length = min(length, config.max_position_embeddings)
        features = sample_features(length, config.vocab_size)
        reference = None
        for key, function in functions.items():
            expected = function({k: tf.constant(v) for k, v in features.items()})
            got = interpreter.get_signature_runner(key)(**features)
            reference = reference or expected  # The sample fits every signature's heads: all agree.
            for output in outputs:
                for what, want in (("TensorFlow's", expected), ("the first signature's", reference)):
                    difference = float(np.max(np.abs(got[output] - want[output].numpy())))
                    if not difference <= TOLERANCE:
                        raise ValueError(f"the LiteRT copy's {output} ({key}) differ from {what} by {difference:g} "
                                         f"(more than {TOLERANCE:g}) at length {length}; nothing was written")


def _write_atomically(path: str, data: bytes) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    handle, tmp = tempfile.mkstemp(prefix=".model-", suffix=".tflite.tmp", dir=directory)
    try:
        with os.fdopen(handle, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
