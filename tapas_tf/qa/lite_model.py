"""A LiteRT (TensorFlow Lite) copy of a question-answering model, run without TensorFlow.

    model_dir/
      model.tflite         the forward pass, builtin ops only (no Flex delegate needed)
      model.tflite.json    the model's config, the outputs, and the fingerprint of the weights
                           the copy was converted from

or, in a compact model directory (`checkpoints.compact`, as the bundled models are), instead of
model.tflite: model.tflite.stripped, the copy without the weights weights_float16.npz already
holds, which `LiteRunner` puts back in memory (`lite_weights`; the info file's `shared_weights`).

`lite_export.export_lite_model` writes both (it needs TensorFlow). `LiteRunner` runs the copy with
the `ai-edge-litert` interpreter, which needs only NumPy, so a process that answers with it never
imports TensorFlow: `TableQA` picks it when the model directory has a current copy (see
`table_qa.BACKENDS`).

The model's signatures: MODEL_INPUT_FEATURES, each <int32>[1, seq_len] (one question at a time;
any sequence length up to the model's position table) -> "probabilities" <float32>[1, seq_len]
and, with an aggregation head, "aggregation_logits" <float32>[1, num_agg]: what `ask_results`
decodes. One signature per size of the heads' cell segments, sharing the weights (the info file's
`signatures`: key -> [rows, columns], smallest first): the model's trained limits (64 x 32 for
SQA's), and every row and column the embeddings address (256 x 256). Reducing over 65,536 cell
segments costs a quarter of a small model's call, so a question whose table fits the trained
limits runs on the small heads, with the same outputs; a copy without `signatures` has one.

A copy never answers for weights it was not made from. Its fingerprint hashes the config and the
weights the TensorFlow path would load (the newest checkpoint's index, which holds a checksum of
every tensor, else the compact float16 weights); when the directory has moved on (a newer
checkpoint, other weights) the copy is stale, and `read_current_lite_model` says so.
"""

import concurrent.futures
import contextlib
import dataclasses
import hashlib
import importlib.util
import json
import os
import queue
import re
import tempfile
import threading
import types
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from tapas_tf.checkpoints import model_dir as model_dir_lib
from tapas_tf.features.example_features import MODEL_INPUT_FEATURES, MODEL_OUTPUTS
from tapas_tf.qa import lite_weights

LITE_MODEL_FILE = "model.tflite"
LITE_STRIPPED_FILE = "model.tflite.stripped"
LITE_INFO_FILE = "model.tflite.json"
FORMAT_VERSION = 1
_CHECKPOINT_INDEX = "checkpoint"  # tf.train.CheckpointManager's text file naming the newest.
# A compact directory's weights (`checkpoints.compact`): float16 or int8, weights_<kind>.npz.
_COMPACT_WEIGHTS = re.compile(r"weights_\w+\.npz")
# The C++ runtime logs through stderr; the command lines' switch for TensorFlow's C++ lines hides it too.
_NATIVE_LOG_ENV = "TF_CPP_MIN_LOG_LEVEL"
_MAX_INTERPRETERS = 4


class LiteModelError(ValueError):
    """A LiteRT copy that cannot answer: missing, unreadable, stale, or no interpreter installed.

    Attributes:
      present: whether the model directory has a copy at all (a missing one is no news).
    """

    def __init__(self, message: str, present: bool = True):
        super().__init__(message)
        self.present = present


@dataclasses.dataclass(frozen=True)
class LiteModel:
    """A model directory's LiteRT copy, as its info file describes it.

    Attributes:
      path: the .tflite file.
      config: the model's TapasConfig as a dict (`TapasConfig.to_dict`).
      outputs: the signature's outputs, a subset of MODEL_OUTPUTS.
      fingerprint: `weights_fingerprint` of the weights it was converted from.
      signatures: (key, rows, columns) of each signature, smallest heads first; () for a copy with
        one unnamed signature.
      shared_weights: for a stripped copy (`path` is model.tflite.stripped), the info file's
        {"file": the compact weights, "sha256": of the whole copy, "segments": `lite_weights` segments};
        None for a whole one.
    """

    path: str
    config: Mapping[str, Any]
    outputs: Tuple[str, ...]
    fingerprint: str
    signatures: Tuple[Tuple[str, int, int], ...] = ()
    shared_weights: Optional[Mapping[str, Any]] = None

    def flatbuffer(self) -> bytes:
        """The copy's bytes; a stripped copy with its weights put back from the compact weights.

        Raises:
          LiteModelError: a stripped copy that does not rebuild into the copy that was exported.
        """
        with open(self.path, "rb") as f:
            data = f.read()
        if not self.shared_weights:
            return data
        weights_path = os.path.join(os.path.dirname(self.path), self.shared_weights["file"])
        try:
            with np.load(weights_path) as weights:
                return lite_weights.restore_shared_weights(
                    data, weights, [tuple(s) for s in self.shared_weights["segments"]],
                    self.shared_weights["sha256"], source=self.path)
        except OSError as e:
            raise LiteModelError(f"{self.path} takes its weights from {weights_path}, which cannot be read "
                                 f"({e})") from None
        except lite_weights.SharedWeightsError as e:
            raise LiteModelError(str(e)) from None

    def signature_for(self, row_ids: np.ndarray, column_ids: np.ndarray) -> Optional[str]:
        """The smallest signature whose heads hold every row and column id of a question (None: the
        copy's only one)."""
        if not self.signatures:
            return None
        rows, columns = int(np.max(row_ids, initial=0)), int(np.max(column_ids, initial=0))
        for key, max_rows, max_columns in self.signatures:
            if rows < max_rows and columns < max_columns:
                return key
        return self.signatures[-1][0]

    @property
    def model_config(self) -> types.SimpleNamespace:
        """The config's fields as attributes (what `TableEncoder.for_model` and the rules read)."""
        return types.SimpleNamespace(**self.config)


def litert_installed() -> bool:
    return importlib.util.find_spec("ai_edge_litert") is not None


# --- which weights ----------------------------------------------------------------------------


def newest_checkpoint(model_dir: str) -> Optional[str]:
    """The newest checkpoint prefix under model_dir/checkpoints (as tf.train.latest_checkpoint), or None."""
    directory = model_dir_lib.checkpoint_dir(model_dir)
    try:
        with open(os.path.join(directory, _CHECKPOINT_INDEX), encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return None
    found = re.search(r'^model_checkpoint_path:\s*"([^"]*)"', text, re.MULTILINE)
    if not found:
        return None
    prefix = found.group(1)
    prefix = prefix if os.path.isabs(prefix) else os.path.join(directory, prefix)
    return prefix if os.path.exists(prefix + ".index") else None


def weights_fingerprint(model_dir: str, checkpoint: Optional[str] = None) -> str:
    """A hash of the config and of the weights `checkpoint` (default: what TableQA loads) holds.

    Raises:
      FileNotFoundError: no config, or no weights.
    """
    checkpoint = checkpoint or newest_checkpoint(model_dir)
    if checkpoint:
        kind, weights = "checkpoint", [checkpoint + ".index"]
    else:
        names = sorted(os.listdir(model_dir)) if os.path.isdir(model_dir) else []
        kind, weights = "compact", [os.path.join(model_dir, n) for n in names if _COMPACT_WEIGHTS.fullmatch(n)]
    if checkpoint and not os.path.exists(weights[0]):
        raise FileNotFoundError(f"checkpoint {checkpoint}: {os.path.basename(weights[0])} is missing")
    if not weights:
        raise FileNotFoundError(f"{model_dir}: no checkpoint under checkpoints/ and no compact weights")
    config = model_dir_lib.config_path(model_dir)
    if not os.path.exists(config):
        raise FileNotFoundError(f"{model_dir}: {os.path.basename(config)} is missing")
    digest = hashlib.sha256()
    for path in [config] + weights:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    return f"{kind}:{digest.hexdigest()}"


# --- the info file ----------------------------------------------------------------------------


def write_lite_info(model_dir: str, config: Mapping[str, Any], outputs: Sequence[str], fingerprint: str,
                    source: Mapping[str, Any], signatures: Optional[Mapping[str, Sequence[int]]] = None,
                    shared_weights: Optional[Mapping[str, Any]] = None) -> str:
    """Writes model_dir/model.tflite.json; returns its path. `signatures`: key -> [rows, columns];
    `shared_weights`: as `LiteModel.shared_weights`, for a stripped copy."""
    model_file = LITE_STRIPPED_FILE if shared_weights else LITE_MODEL_FILE
    info = {"format": FORMAT_VERSION, "model": model_file, "inputs": list(MODEL_INPUT_FEATURES),
            "outputs": list(outputs), "fingerprint": fingerprint, "source": dict(source), "config": dict(config)}
    if signatures:
        info["signatures"] = {key: [int(rows), int(columns)] for key, (rows, columns) in signatures.items()}
    if shared_weights:
        segments = [[int(offset), str(name), str(layout)] for offset, name, layout in shared_weights["segments"]]
        info["shared_weights"] = {"file": str(shared_weights["file"]), "sha256": str(shared_weights["sha256"]),
                                  "segments": segments}
    path = os.path.join(model_dir, LITE_INFO_FILE)
    with open(path, "w", encoding="utf-8") as f:
        f.write(json.dumps(info, indent=2, sort_keys=True) + "\n")
    return path


def read_lite_model(model_dir: str) -> LiteModel:
    """The LiteRT copy of `model_dir` as its info file describes it (not checked for staleness).

    Raises:
      LiteModelError: no copy (present=False), or an info file that is not this format.
    """
    info_path = os.path.join(model_dir, LITE_INFO_FILE)
    if not any(os.path.exists(os.path.join(model_dir, f)) for f in (LITE_MODEL_FILE, LITE_STRIPPED_FILE)):
        raise LiteModelError(f"{model_dir} has no {LITE_MODEL_FILE}; write one with "
                             "`run_task.py --mode=export --export_lite --model_dir=...`", present=False)
    try:
        with open(info_path, encoding="utf-8") as f:
            info = json.load(f)
        outputs = tuple(info["outputs"])
        if info["format"] != FORMAT_VERSION or "probabilities" not in outputs or not set(outputs) <= set(MODEL_OUTPUTS):
            raise ValueError(f"format {info['format']!r} with outputs {list(outputs)}")
        signatures = tuple(sorted(((str(key), int(rows), int(columns))
                                   for key, (rows, columns) in info.get("signatures", {}).items()),
                                  key=lambda s: (s[1] * s[2], s[0])))
        shared = info.get("shared_weights")
        stripped = info["model"] == LITE_STRIPPED_FILE
        if info["model"] not in (LITE_MODEL_FILE, LITE_STRIPPED_FILE) or bool(shared) != stripped:
            raise ValueError(f"model {info['model']!r} with shared_weights {'' if shared else 'not '}given")
        path = os.path.join(model_dir, info["model"])
        if not os.path.exists(path):
            raise LiteModelError(f"{info_path} names {info['model']}, which is missing; export the copy again")
        return LiteModel(path, dict(info["config"]), outputs, str(info["fingerprint"]), signatures, shared)
    except LiteModelError:
        raise
    except FileNotFoundError:
        raise LiteModelError(f"{info_path} is missing; export the LiteRT copy again") from None
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise LiteModelError(f"{info_path} is not a LiteRT model info file ({e}); export the copy again") from None


def read_current_lite_model(model_dir: str, checkpoint: Optional[str] = None) -> LiteModel:
    """The LiteRT copy of `model_dir`, when it was made from the weights TableQA would load
    (`checkpoint`, default the newest) and an interpreter is installed.

    Raises:
      LiteModelError: saying why the copy cannot answer.
    """
    lite = read_lite_model(model_dir)
    try:
        current = weights_fingerprint(model_dir, checkpoint)
    except FileNotFoundError as e:
        raise LiteModelError(str(e)) from None
    if current != lite.fingerprint:
        which = f"checkpoint {checkpoint}" if checkpoint else "the model directory's newest weights"
        raise LiteModelError(f"{lite.path} was not made from {which} (it is stale); export it again "
                             "(`run_task.py --mode=export --export_lite`)")
    if not litert_installed():
        raise LiteModelError(f"{lite.path} needs the LiteRT interpreter: pip install ai-edge-litert")
    return lite


# --- running it -------------------------------------------------------------------------------


@contextlib.contextmanager
def _native_stderr_hidden() -> Iterator[None]:
    """Hides what native code writes to stderr inside (LiteRT's "Created TensorFlow Lite XNNPACK
    delegate" line) unless TF_CPP_MIN_LOG_LEVEL=0 asks for TensorFlow's native lines (as -v debug
    does); an error inside shows it after all."""
    if os.environ.get(_NATIVE_LOG_ENV) == "0":
        yield
        return
    saved = os.dup(2)
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield
        except BaseException:
            os.dup2(saved, 2)
            sink.seek(0)
            os.write(2, sink.read())
            raise
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def default_interpreters() -> int:
    """One interpreter per core this process may use, at most 4 (each holds its own packed weights)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # Not on Linux.
        cores = os.cpu_count() or 1
    return max(1, min(cores, _MAX_INTERPRETERS))


class LiteRunner:
    """Runs a LiteRT copy on batches of one bucket length: a pool of single-threaded interpreters,
    each answering one question at a time.

    Interpreters rather than one interpreter's threads: an interpreter splits every operation of
    one question over its threads and waits for the slowest, which cost about a third more CPU
    time per question than one thread (2.5 against 3.4 ms for the bundled model at 224 tokens on
    a busy 2-core machine); separate interpreters run separate questions with no waiting between
    them. The interpreter releases the GIL while it runs, so they run in parallel.

    Thread-safe: every call takes free interpreters (waiting while all are busy). A call with
    several rows spreads them over the interpreters; calls from several threads (a server's
    requests, `concurrent_calls` of them) run at once.

    Args:
      lite: the copy (`read_current_lite_model`).
      interpreters: how many; default `default_interpreters()`.
      num_threads: threads of each interpreter.
    """

    backend = "LiteRT"
    jit_compile = False
    precision = "float32"

    def __init__(self, lite: LiteModel, interpreters: Optional[int] = None, num_threads: int = 1):
        from ai_edge_litert.interpreter import Interpreter  # pylint: disable=import-outside-toplevel

        count = interpreters or default_interpreters()
        if count < 1 or num_threads < 1:
            raise ValueError(f"interpreters and num_threads must be at least 1, got {count} and {num_threads}")
        self.lite = lite
        content = lite.flatbuffer()  # Read once: every interpreter shares these bytes.
        # LIFO: a lone caller keeps reusing the interpreter whose buffers are warm in the cache.
        self._free: "queue.LifoQueue" = queue.LifoQueue()
        with _native_stderr_hidden():
            for _ in range(count):
                interpreter = Interpreter(model_content=content, num_threads=num_threads)
                interpreter.allocate_tensors()  # Applies the XNNPACK delegate, which logs a line.
                keys = [key for key, _, _ in lite.signatures] or [None]
                self._free.put({key: interpreter.get_signature_runner(key) for key in keys})
        self.concurrent_calls = count
        self._helpers: Optional[concurrent.futures.ThreadPoolExecutor] = None
        self._helpers_lock = threading.Lock()

    @property
    def has_aggregation_head(self) -> bool:
        return "aggregation_logits" in self.lite.outputs

    @property
    def has_classification_head(self) -> bool:
        return "classification_logits" in self.lite.outputs

    def __call__(self, length: int, rows: Sequence[Mapping[str, np.ndarray]]) -> Dict[str, np.ndarray]:
        """Model outputs for `rows` of MODEL_INPUT_FEATURES, each <int32>[length].

        Returns:
          the copy's MODEL_OUTPUTS: "probabilities" <float32>[len(rows), length] and, with those
          heads, "aggregation_logits" <float32>[len(rows), num_agg] and "classification_logits"
          <float32>[len(rows), num_classes].
        """
        parts = min(self.concurrent_calls, len(rows))
        if parts <= 1:
            results = self._run(length, rows)
        else:  # Consecutive shares, one per interpreter; this thread runs the first.
            bounds = np.linspace(0, len(rows), parts + 1).astype(int)
            shares = [rows[a:b] for a, b in zip(bounds[:-1], bounds[1:])]
            futures = [self._helper_pool().submit(self._run, length, share) for share in shares[1:]]
            results = self._run(length, shares[0])
            for future in futures:
                results += future.result()
        return {key: np.concatenate([r[key] for r in results]) for key in self.lite.outputs}

    def _run(self, length: int, rows: Sequence[Mapping[str, np.ndarray]]) -> List[Dict[str, np.ndarray]]:
        """Each row's outputs, <float32>[1, ...], from one interpreter taken for the whole share."""
        signatures = self._free.get()
        try:
            results = []
            for row in rows:
                inputs = {name: np.asarray(row[name], np.int32).reshape(1, length) for name in MODEL_INPUT_FEATURES}
                signature = signatures[self.lite.signature_for(inputs["row_ids"], inputs["column_ids"])]
                outputs = signature(**inputs)
                results.append({key: np.asarray(outputs[key]) for key in self.lite.outputs})
            return results
        finally:
            self._free.put(signatures)

    def _helper_pool(self) -> concurrent.futures.ThreadPoolExecutor:
        with self._helpers_lock:
            if self._helpers is None:  # Only batched calls need it: a lone question starts no thread.
                self._helpers = concurrent.futures.ThreadPoolExecutor(
                    self.concurrent_calls - 1, thread_name_prefix="litert")
            return self._helpers
