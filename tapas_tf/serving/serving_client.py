"""A small client for a model served by TF Serving's REST API (an `export` SavedModel).

    client = ServingClient.from_export("http://localhost:8501/v1/models/tapas", "export")
    result = client.answer("cities.csv", "which city has the most people?")   # an AskResult
    result.summary                                                            # "Paris"

    ask_served("http://localhost:8501/v1/models/tapas", frame, "how many cities?", export_dir="export")

Questions are encoded with the ask API's `TableEncoder` and answers decoded with its
`decode_answer`, so a served model answers as `TableQA` does. A table bigger than one request's
example is read in windows of rows, as `TableQA` reads it (`window_reading`): a loop on the client
over the exported signature, one request per batch of windows, so counts and totals cover every
row (`windows=False`: pruned instead). The served model keeps the segments its heads were
configured for (`max_num_rows - 1` rows and `max_num_columns - 1` columns, 63 and 31 for released
models), where TableQA widens them to 255: its windows hold at most that many rows.

Requests use the `predict_features` signature in TF Serving's columnar format
(`{"signature_name": ..., "inputs": {name: [[...], ...]}}`); `examples_request` builds one for
`serving_default` from serialized tf.Examples. Only NumPy, pandas and the standard library are
needed, not TensorFlow.
"""

import base64
import json
import os
import urllib.error
import urllib.request
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from tapas_tf.features.vocab import resolve_vocab_file
from tapas_tf.inference.decoding import DecodingRule
from tapas_tf.qa import arithmetic
from tapas_tf.qa.ask_encoding import MODEL_INPUT_FEATURES, TableEncoder, TableTooBig
from tapas_tf.qa.ask_results import AskResult, decode_answer
from tapas_tf.qa.tables import TableLike
from tapas_tf.qa.window_encoding import WindowedQuestion, encode_windows
from tapas_tf.qa.window_reading import WindowReader, progress_bar

PREDICT_FEATURES = "predict_features"
SERVING_DEFAULT = "serving_default"
ASSETS_EXTRA = "assets.extra"
# Outputs that are integers; every other output is <float32>.
INT_OUTPUTS = ("cell_mask", "aggregation", "column_ids", "row_ids", "input_mask")
# The limits of released TAPAS models (TapasConfig's defaults), used without an export directory.
RELEASED_MODEL_LIMITS = {"max_position_embeddings": 1024, "max_num_rows": 64, "max_num_columns": 32}

# (predict URL, JSON body, timeout in seconds) -> the JSON response, parsed.
Transport = Callable[[str, dict, float], dict]


class ServingError(OSError):
    """The server could not be reached, or refused or failed the request (its message is kept)."""


# --- request and response bodies ----------------------------------------------------------------


def stack_features(rows: Sequence[Mapping[str, np.ndarray]]) -> Dict[str, np.ndarray]:
    """Per-example MODEL_INPUT_FEATURES <int>[seq_len_i] -> <int32>[batch, max seq_len_i], zero-padded.

    Padding has input_mask 0 and row and column id 0, so it changes no answer.
    """
    if not rows:
        raise ValueError("a request needs at least one example")
    length = max(len(row["input_ids"]) for row in rows)
    batch = {name: np.zeros([len(rows), length], np.int32) for name in MODEL_INPUT_FEATURES}
    for index, row in enumerate(rows):
        for name in MODEL_INPUT_FEATURES:
            values = np.asarray(row[name])
            batch[name][index, :len(values)] = values
    return batch


def features_request(features: Mapping[str, np.ndarray], signature_name: str = PREDICT_FEATURES) -> dict:
    """The JSON body of a `predict_features` request, columnar format.

    Args:
      features: MODEL_INPUT_FEATURES, each <int>[batch, seq_len] (see `stack_features`).

    Returns:
      {"signature_name": ..., "inputs": {name: [[int, ...], ...]}}, ready for `json.dumps`.
    """
    missing = [name for name in MODEL_INPUT_FEATURES if name not in features]
    if missing:
        raise ValueError(f"features lack {', '.join(missing)}")
    shapes = {name: np.shape(features[name]) for name in MODEL_INPUT_FEATURES}
    if len(set(shapes.values())) != 1 or len(shapes["input_ids"]) != 2:
        raise ValueError(f"features must all be [batch, seq_len] of one shape, got {shapes}")
    inputs = {name: np.asarray(features[name], np.int64).tolist() for name in MODEL_INPUT_FEATURES}
    return {"signature_name": signature_name, "inputs": inputs}


def examples_request(serialized: Sequence[bytes]) -> dict:
    """The JSON body of a `serving_default` request: serialized tf.Examples, base64 as TF Serving wants."""
    encoded = [{"b64": base64.b64encode(example).decode("ascii")} for example in serialized]
    return {"signature_name": SERVING_DEFAULT, "inputs": {"examples": encoded}}


def parse_response(body: Mapping) -> Dict[str, np.ndarray]:
    """TF Serving's JSON response (columnar, `{"outputs": {...}}`) -> NumPy arrays.

    Raises:
      ServingError: the body is an error (`{"error": ...}`) or has no named outputs.
    """
    if "error" in body:
        raise ServingError(f"the server failed the request: {body['error']}")
    outputs = body.get("outputs")
    if not isinstance(outputs, Mapping):
        raise ServingError(f"the response has no named outputs: {json.dumps(body)[:200]}")
    return {name: np.asarray(value, np.int32 if name in INT_OUTPUTS else np.float32)
            for name, value in outputs.items()}


def predict_url(url: str) -> str:
    """The `:predict` endpoint of a model URL ("http://host:8501/v1/models/tapas[/versions/2]")."""
    url = url.rstrip("/")
    return url if url.endswith(":predict") else url + ":predict"


def post_json(url: str, body: dict, timeout: float) -> dict:
    """POSTs `body` as JSON and returns the parsed JSON answer; TF Serving's errors become ServingError."""
    request = urllib.request.Request(url, data=json.dumps(body).encode("utf-8"),
                                     headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.loads(response.read().decode("utf-8"))
    except urllib.error.HTTPError as e:
        text = e.read().decode("utf-8", "replace")
        try:
            message = json.loads(text).get("error", text)
        except (ValueError, AttributeError):
            message = text
        raise ServingError(f"{url} answered HTTP {e.code}: {' '.join(str(message).split())[:500]}") from None
    except (urllib.error.URLError, TimeoutError, ConnectionError) as e:
        reason = getattr(e, "reason", e)
        raise ServingError(f"cannot reach {url} ({reason}); is TF Serving running there?") from None
    except ValueError as e:
        raise ServingError(f"{url} did not answer JSON ({e})") from None


# --- the encoder of a served model --------------------------------------------------------------


def version_dir(export_dir: str) -> str:
    """`export_dir` if it is a SavedModel, else its highest numeric version, as TF Serving picks."""
    if os.path.exists(os.path.join(export_dir, "saved_model.pb")):
        return export_dir
    versions = [n for n in os.listdir(export_dir) if n.isascii() and n.isdigit()] \
        if os.path.isdir(export_dir) else []
    if not versions:
        raise FileNotFoundError(f"{export_dir} holds no SavedModel and no numeric version directory")
    return os.path.join(export_dir, max(versions, key=int))


def read_export_assets(export_dir: str) -> Tuple[dict, Optional[str]]:
    """(the model config as a dict, the vocabulary's path or None) from an export's assets.extra/."""
    assets = os.path.join(version_dir(export_dir), ASSETS_EXTRA)
    with open(os.path.join(assets, "tapas_config.json"), encoding="utf-8") as f:
        config = json.load(f)
    vocab = os.path.join(assets, "vocab.txt")
    return config, vocab if os.path.exists(vocab) else None


def served_encoder(model_config: Mapping, vocab_file: Optional[str] = None, prune: bool = True,
                   max_seq_length: Optional[int] = None) -> TableEncoder:
    """The `TableEncoder` for a served model: `TableEncoder.for_model` on the export's config dict,
    its tables limited to the segments of the exported heads (the trained ones).

    Args:
      model_config: the model's config as a dict (`read_export_assets`).
      vocab_file: default BERT's uncased vocabulary (`resolve_vocab_file(None)`).
    """
    segments = (int(model_config["max_num_rows"]), int(model_config["max_num_columns"]))
    return TableEncoder.for_model(model_config, resolve_vocab_file(vocab_file), prune=prune,
                                  max_seq_length=max_seq_length, segments=segments)


# --- the client ---------------------------------------------------------------------------------


class ServingClient:
    """Answers questions about tables with a model behind TF Serving's REST API.

    Args:
      url: the model's URL, e.g. "http://localhost:8501/v1/models/tapas" (`:predict` is added).
      encoder: see `served_encoder`.
      rule: how probabilities become cells (`decoding.DecodingRule`, as `TableQA`'s); `decoding`
        options (`threshold=0.4`, `fallback_to_best_cell=True`, ...) replace its own.
      timeout: seconds to wait for an answer.
      transport: sends a request; default `post_json` (tests pass a function that runs the
        SavedModel in process).
      windows, max_rows, time_budget, progress: how a table too big for one example is read
        (`TableQA`'s).
    """

    def __init__(self, url: str, encoder: TableEncoder, rule: DecodingRule = DecodingRule(), timeout: float = 60.0,
                 transport: Transport = post_json, windows: bool = True, max_rows: Optional[int] = None,
                 time_budget: Optional[float] = None, progress: Optional[bool] = False, **decoding):
        self.windows, self.max_rows, self.time_budget = windows, max_rows, time_budget
        self.progress = progress
        self.url = predict_url(url)
        self.encoder = encoder
        self.rule = rule.with_overrides(**decoding)
        self.timeout = timeout
        self.transport = transport

    @classmethod
    def from_export(cls, url: str, export_dir: str, vocab_file: Optional[str] = None, prune: bool = True,
                    **options) -> "ServingClient":
        """A client whose encoder and decoding rule match the export's config and vocabulary (a
        version or base dir)."""
        config, vocab = read_export_assets(export_dir)
        options.setdefault("rule", DecodingRule.for_model(config))  # The exported model's own rule.
        return cls(url, served_encoder(config, vocab_file or vocab, prune), **options)

    def predict(self, features: Mapping[str, np.ndarray]) -> Dict[str, np.ndarray]:
        """The signature's outputs (see `export`) for MODEL_INPUT_FEATURES <int>[batch, seq_len]."""
        return parse_response(self.transport(self.url, features_request(features), self.timeout))

    def answer(self, table: TableLike, question: str, previous_answer=None) -> AskResult:
        """Answers one question; `previous_answer` (an AskResult or (row, column) pairs) as in SQA."""
        prepared = self.encoder.prepare(table)
        previous = previous_answer.coordinates if isinstance(previous_answer, AskResult) else previous_answer
        return self._run([self._encode(prepared, question, previous)])[0]

    def answer_many(self, table: TableLike, questions: Sequence[str]) -> List[AskResult]:
        """Answers independent questions about one table: those in one example in one request."""
        prepared = self.encoder.prepare(table)
        return self._run([self._encode(prepared, question) for question in questions])

    def _encode(self, prepared, question: str, previous=None):
        if not self.windows:
            return self.encoder.encode(prepared, question, previous)
        if self.max_rows is None or len(prepared.table.rows) <= self.max_rows:
            try:
                return self.encoder.encode(prepared, question, previous, prune=False)
            except TableTooBig:
                pass
        return encode_windows(self.encoder, prepared, question, previous or (), self.max_rows)

    def run_model(self, length: int, rows: Sequence[Mapping[str, np.ndarray]]) -> Dict[str, np.ndarray]:
        """A `TableQA` runner over the served model: rows of features <int32>[length] -> probabilities
        and, with an aggregation head, aggregation logits (one request)."""
        outputs = self.predict(stack_features(rows))
        result = {"probabilities": outputs["probabilities"]}
        if "aggregation_probabilities" in outputs:
            with np.errstate(divide="ignore"):  # log(0) = -inf: a softmax weight of 0.
                result["aggregation_logits"] = np.log(outputs["aggregation_probabilities"])
        return result

    def _run(self, encoded) -> List[AskResult]:
        results: List[Optional[AskResult]] = [None] * len(encoded)
        examples = [i for i, item in enumerate(encoded) if not isinstance(item, WindowedQuestion)]
        for index, result in zip(examples, self._run_examples([encoded[i] for i in examples])):
            results[index] = result
        for index, item in enumerate(encoded):
            if isinstance(item, WindowedQuestion):
                bar = progress_bar(f"TF Serving: {item.rows_read:,} rows", self.progress)
                reader = WindowReader(self.run_model, self.rule, time_budget=self.time_budget, progress=bar)
                results[index] = arithmetic.with_computed(
                    reader.answer(item), lambda row, item=item: [c.text for c in item.table.table.rows[row].cells])
        return results  # type: ignore[return-value]

    def _run_examples(self, encoded) -> List[AskResult]:
        if not encoded:
            return []
        outputs = self.predict(stack_features([item.features for item in encoded]))
        results = []
        for row, item in enumerate(encoded):
            logits = None
            if "aggregation_probabilities" in outputs:
                with np.errstate(divide="ignore"):  # log(0) = -inf: a softmax weight of 0.
                    logits = np.log(outputs["aggregation_probabilities"][row])
            result = decode_answer(item, outputs["probabilities"][row], logits, self.rule)
            results.append(arithmetic.with_computed(result, _row_texts(item.pruned)))
        return results


def _row_texts(pruned) -> arithmetic.RowTexts:
    kept = {row: index for index, row in enumerate(pruned.rows)}
    return lambda row: [cell.text for cell in pruned.table.rows[kept[row]].cells] if row in kept else []


def ask_served(url: str, table: TableLike, question: str, export_dir: Optional[str] = None,
               previous_answer=None, **options) -> AskResult:
    """Asks a served model one question.

    Args:
      url: the model's URL, e.g. "http://localhost:8501/v1/models/tapas".
      export_dir: the export (base or version directory) for its config and vocabulary; without
        it, the limits of released TAPAS models and BERT's uncased vocabulary.
      options: ServingClient's (rule, timeout, transport, and decoding options such as threshold).
    """
    if export_dir is not None:
        client = ServingClient.from_export(url, export_dir, **options)
    else:
        client = ServingClient(url, served_encoder(RELEASED_MODEL_LIMITS), **options)
    return client.answer(table, question, previous_answer)
