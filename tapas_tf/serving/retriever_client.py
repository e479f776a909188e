"""A client of an exported retriever (`retriever_export`): questions (strings) -> query embeddings.

    client = RetrieverServingClient.from_saved_model("export/retriever")     # tf.saved_model.load
    client = RetrieverServingClient.from_lite("model_dirs/dual")             # MODEL_DIR/query_tower.tflite
    client = RetrieverServingClient.from_url("http://localhost:8501/v1/models/retriever", "export/retriever")
    vectors = client.embed_questions(["how tall is torre jaume i?"])         # <float32>[1, client.dimension]
    client.model_id                                                          # match the tables' shards

Questions become the `query_embedding` signature's inputs with `RetrievalFeatures.questions` (the
features `DenseRetriever` embeds with): `[CLS] question [SEP]`, at most `max_query_length` word
pieces, padded to the longest question of the call. The lengths and the vocabulary come from the
export's assets.extra/ (dual_encoder.json, vocab.txt, embedder.json), or, for the LiteRT copy,
from its model directory and query_tower.tflite.json. The embeddings are the model's, so a
client's vector scores against table embeddings (`encode-tables` shards with the same
`model_id`) as `DenseRetriever.embed_questions`' does.

Importing this module loads no TensorFlow: only `from_saved_model` does (`from_lite` needs the
`ai-edge-litert` wheel, `from_url` only the standard library). REST requests use TF Serving's
columnar format, `{"signature_name": "query_embedding", "inputs": {"input_ids": [[...]],
"input_mask": [[...]]}}`, answered by `{"outputs": {"embeddings": [[...]]}}` (`serving_client`'s
transport and errors).
"""

import collections
import hashlib
import os
from typing import Any, Callable, Dict, Mapping, Optional, Sequence, Tuple

import numpy as np

from tapas_tf.features.retrieval_features import STAT_QUESTION_CUT, RetrievalFeatures
from tapas_tf.models.config import read_json_object
from tapas_tf.serving.serving_client import ASSETS_EXTRA, Transport, parse_response, post_json, predict_url, version_dir

# retriever_export's names, repeated so that this module loads no TensorFlow.
QUERY_EMBEDDING = "query_embedding"
EMBEDDINGS = "embeddings"
QUERY_INPUTS = ("input_ids", "input_mask")
CONFIG_FILE = "dual_encoder.json"
EMBEDDER_FILE = "embedder.json"
VOCAB_FILE = "vocab.txt"
LITE_FILE = "query_tower.tflite"
LITE_INFO_FILE = "query_tower.tflite.json"
LITE_FORMAT_VERSION = 1
DEFAULT_BATCH_SIZE = 32

# input_ids, input_mask <int32>[batch, seq_len] -> embeddings <float32>[batch, dim].
QueryRunner = Callable[[np.ndarray, np.ndarray], np.ndarray]


# --- the assets -------------------------------------------------------------------------------


def _read_json(path: str) -> Dict[str, Any]:
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: no such file")
    return read_json_object(path)


def read_retriever_assets(export_dir: str) -> Tuple[Dict[str, Any], Dict[str, Any], Optional[str]]:
    """(dual_encoder.json, embedder.json, the vocabulary's path or None) of an export's
    assets.extra/; `export_dir` is a version or the base directory (its highest version)."""
    assets = os.path.join(version_dir(export_dir), ASSETS_EXTRA)
    config = _read_json(os.path.join(assets, CONFIG_FILE))
    record = _read_json(os.path.join(assets, EMBEDDER_FILE))
    vocab = os.path.join(assets, VOCAB_FILE)
    return config, record, vocab if os.path.exists(vocab) else None


def query_features(config: Mapping[str, Any], vocab_file: Optional[str]) -> RetrievalFeatures:
    """The feature builder of a dual encoder's config (a dict, as dual_encoder.json holds it), as
    `DenseRetriever.features_for` builds it from the DualEncoderConfig."""
    type_vocab_sizes = config["encoder"]["type_vocab_sizes"]
    return RetrievalFeatures.create(vocab_file, int(config["max_query_length"]), int(config["max_table_length"]),
                                    max_column_id=int(type_vocab_sizes[1]), max_row_id=int(type_vocab_sizes[2]))


# --- the runners ------------------------------------------------------------------------------


def query_request(input_ids: np.ndarray, input_mask: np.ndarray, signature_name: str = QUERY_EMBEDDING) -> dict:
    """The JSON body of a `query_embedding` request, columnar format.

    Args:
      input_ids, input_mask: <int>[batch, seq_len].
    """
    if np.shape(input_ids) != np.shape(input_mask) or len(np.shape(input_ids)) != 2:
        raise ValueError(f"input_ids and input_mask must be [batch, seq_len] of one shape, got "
                         f"{np.shape(input_ids)} and {np.shape(input_mask)}")
    inputs = {"input_ids": np.asarray(input_ids, np.int64).tolist(),
              "input_mask": np.asarray(input_mask, np.int64).tolist()}
    return {"signature_name": signature_name, "inputs": inputs}


def rest_runner(url: str, timeout: float = 60.0, transport: Transport = post_json) -> QueryRunner:
    """Runs `query_embedding` behind TF Serving's REST API at `url` (`:predict` is added)."""
    endpoint = predict_url(url)

    def run(input_ids: np.ndarray, input_mask: np.ndarray) -> np.ndarray:
        outputs = parse_response(transport(endpoint, query_request(input_ids, input_mask), timeout))
        if EMBEDDINGS not in outputs:
            raise ValueError(f"{endpoint} answered without {EMBEDDINGS!r}: {sorted(outputs)}")
        return outputs[EMBEDDINGS]

    return run


def saved_model_runner(export_dir: str) -> QueryRunner:
    """Runs the `query_embedding` signature of an export (a version or base directory) in this
    process, loaded with `tf.saved_model.load`."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    loaded = tf.saved_model.load(version_dir(export_dir))
    signature = loaded.signatures[QUERY_EMBEDDING]

    def run(input_ids: np.ndarray, input_mask: np.ndarray) -> np.ndarray:
        return signature(input_ids=tf.constant(input_ids, tf.int32),
                         input_mask=tf.constant(input_mask, tf.int32))[EMBEDDINGS].numpy()

    return _keeping(run, loaded)


def _keeping(run: QueryRunner, owner: Any) -> QueryRunner:
    """`run`, holding a reference to `owner` (a loaded SavedModel owns the variables its signatures read)."""
    run.owner = owner  # type: ignore[attr-defined]
    return run


def lite_runner(path: str, batch_size: Optional[int] = None, num_threads: Optional[int] = None) -> QueryRunner:
    """Runs the `query_embedding` signature of a LiteRT copy with `ai_edge_litert`.

    Args:
      path: the .tflite file.
      batch_size: the copy's batch (query_tower.tflite.json): None for any, 1 for one question
        per call, each then cut to its own length.
      num_threads: the interpreter's threads (default LiteRT's).

    The runner is not thread-safe, as a LiteRT interpreter is not.
    """
    from ai_edge_litert.interpreter import Interpreter  # pylint: disable=import-outside-toplevel

    interpreter = Interpreter(model_path=path, num_threads=num_threads)
    signature = interpreter.get_signature_runner(QUERY_EMBEDDING)

    def run(input_ids: np.ndarray, input_mask: np.ndarray) -> np.ndarray:
        input_ids, input_mask = np.asarray(input_ids, np.int32), np.asarray(input_mask, np.int32)
        if batch_size is None:
            return signature(input_ids=input_ids, input_mask=input_mask)[EMBEDDINGS]
        rows = []
        for ids, mask in zip(input_ids, input_mask):
            length = max(int(np.max(np.nonzero(mask)[0], initial=0)) + 1, 1)  # Its padding is not run.
            rows.append(signature(input_ids=ids[None, :length], input_mask=mask[None, :length])[EMBEDDINGS][0])
        return np.stack(rows)

    return _keeping(run, interpreter)


# --- the client -------------------------------------------------------------------------------


class RetrieverServingClient:
    """Embeds questions with an exported retriever's query tower.

    Args:
      features: builds the inputs (`query_features`).
      run: a `QueryRunner` (`saved_model_runner`, `lite_runner`, `rest_runner` or your own).
      model_id: the model's fingerprint (embedder.json's), to match table embeddings with.
      dimension: the embeddings' size.
      similarity: "dot" or "cosine" (the model normalises its vectors): how scores compare.
      batch_size: questions per call of `run`.

    Attributes:
      cuts: word pieces cut from questions longer than max_query_length, so far.
    """

    def __init__(self, features: RetrievalFeatures, run: QueryRunner, model_id: str, dimension: int,
                 similarity: str = "dot", batch_size: int = DEFAULT_BATCH_SIZE):
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        self.features = features
        self.run = run
        self.model_id = model_id
        self.dimension = int(dimension)
        self.similarity = similarity
        self.batch_size = batch_size
        self.cuts: Dict[str, int] = collections.Counter()

    @classmethod
    def from_export(cls, export_dir: str, run: QueryRunner, **options) -> "RetrieverServingClient":
        """A client whose features and model_id are the export's (a version or base directory)."""
        config, record, vocab = read_retriever_assets(export_dir)
        return cls(query_features(config, vocab), run, record["model_id"], record["dimension"],
                   record.get("similarity", "dot"), **options)

    @classmethod
    def from_saved_model(cls, export_dir: str, **options) -> "RetrieverServingClient":
        """Runs the export in this process (TensorFlow)."""
        return cls.from_export(export_dir, saved_model_runner(export_dir), **options)

    @classmethod
    def from_url(cls, url: str, export_dir: str, timeout: float = 60.0, transport: Transport = post_json,
                 **options) -> "RetrieverServingClient":
        """Sends the questions to TF Serving at `url` (e.g. "http://localhost:8501/v1/models/retriever"),
        serving `export_dir`."""
        return cls.from_export(export_dir, rest_runner(url, timeout, transport), **options)

    @classmethod
    def from_lite(cls, model_dir: str, num_threads: Optional[int] = None, **options) -> "RetrieverServingClient":
        """Runs MODEL_DIR/query_tower.tflite (`export-retriever` writes it) with LiteRT.

        Raises:
          FileNotFoundError: no copy or no record of it.
          ValueError: a record of another format, or of another copy (its SHA-256 differs: the
            two files were not written together).
        """
        path = os.path.join(model_dir, LITE_FILE)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{path}: no such file; write it with tapas-tf export-retriever")
        info = _read_json(os.path.join(model_dir, LITE_INFO_FILE))
        if info.get("format_version") != LITE_FORMAT_VERSION:
            raise ValueError(f"{os.path.join(model_dir, LITE_INFO_FILE)}: format_version {info.get('format_version')!r}, "
                             f"not {LITE_FORMAT_VERSION}")
        with open(path, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()
        if digest != info.get("sha256"):
            raise ValueError(f"{path} is not the copy {LITE_INFO_FILE} describes (SHA-256 {digest[:12]}..., recorded "
                             f"{str(info.get('sha256'))[:12]}...); export it again")
        config = _read_json(os.path.join(model_dir, CONFIG_FILE))
        vocab = os.path.join(model_dir, VOCAB_FILE)
        run = lite_runner(path, info.get("batch_size"), num_threads)
        return cls(query_features(config, vocab if os.path.exists(vocab) else None), run, info["model_id"],
                   info["dimension"], info.get("similarity", "dot"), **options)

    def query_inputs(self, questions: Sequence[str]) -> Dict[str, np.ndarray]:
        """input_ids, input_mask <int32>[len(questions), longest] of `questions` (cuts counted)."""
        input_ids, input_mask, cut = self.features.questions(questions)
        if cut:
            self.cuts[STAT_QUESTION_CUT] += cut
        return {"input_ids": input_ids, "input_mask": input_mask}

    def embed_questions(self, questions: Sequence[str]) -> np.ndarray:
        """<float32>[len(questions), dimension], row i the embedding of questions[i]."""
        if isinstance(questions, str):
            raise TypeError("embed_questions takes a list of questions, not one string")
        out = np.zeros([len(questions), self.dimension], np.float32)
        for start in range(0, len(questions), self.batch_size):
            inputs = self.query_inputs(questions[start:start + self.batch_size])
            vectors = np.asarray(self.run(inputs["input_ids"], inputs["input_mask"]), np.float32)
            if vectors.shape != (len(inputs["input_ids"]), self.dimension):
                raise ValueError(f"the model answered embeddings of shape {vectors.shape}, not "
                                 f"{(len(inputs['input_ids']), self.dimension)}")
            out[start:start + len(vectors)] = vectors
        return out
