"""The TF Serving REST client (tapas_tf/serving/serving_client.py), without a server.

The REST call is simulated: a transport sends the request body through JSON, feeds its inputs to
the exported SavedModel loaded in process, and answers with TF Serving's JSON response format.
The model is the trained tiny model of test_sequential, whose answers about its table are known:

    | city   | country | population |
    | paris  | france  | 2          |   row 0
    | berlin | germany | 4          |   row 1
    | london | england | 8          |   row 2
"""

import base64
import http.server
import json
import os
import threading

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

from tapas_tf.qa.table_qa import TableQA  # noqa: E402
from tapas_tf.serving import export, serving_client  # noqa: E402
from tapas_tf.serving.serving_client import ServingClient, ServingError  # noqa: E402
from tests.inference.test_sequential import HEADER, ROWS  # noqa: E402

FRAME = pd.DataFrame(ROWS, columns=HEADER)
URL = "http://serving.test:8501/v1/models/tapas"


def in_process_transport(saved_model_dir, calls=None):
    """A transport that answers as TF Serving would, from the SavedModel loaded in this process."""
    loaded = tf.saved_model.load(saved_model_dir)

    def post(url, body, timeout):
        request = json.loads(json.dumps(body))  # Only what survives JSON reaches the server.
        if calls is not None:
            calls.append((url, request))
        signature = loaded.signatures[request["signature_name"]]
        inputs = request["inputs"]
        if "examples" in inputs:
            tensors = {"examples": tf.constant([base64.b64decode(e["b64"]) for e in inputs["examples"]])}
        else:
            tensors = {name: tf.constant(value, tf.int32) for name, value in inputs.items()}
        try:
            outputs = signature(**tensors)
        except tf.errors.InvalidArgumentError as e:
            return {"error": e.message}
        return json.loads(json.dumps({"outputs": {k: v.numpy().tolist() for k, v in outputs.items()}}))

    return post


@pytest.fixture(scope="module")
def served(trained, tmp_path_factory):
    """The trained model exported with its vocabulary, and TableQA on its model directory."""
    export_dir = str(tmp_path_factory.mktemp("served") / "export")
    path = export.export_model_dir(trained["model_dir"], export_dir, vocab_file=trained["vocab"])
    return {"export_dir": export_dir, "path": path, "transport": in_process_transport(path),
            "qa": TableQA.from_model_dir(trained["model_dir"], vocab_file=trained["vocab"])}


# --- request and response bodies ----------------------------------------------------------------


def test_features_request_is_columnar_and_padded_to_the_longest_example():
    short = {name: np.arange(1, 4) for name in serving_client.MODEL_INPUT_FEATURES}
    long = {name: np.arange(1, 6) for name in serving_client.MODEL_INPUT_FEATURES}
    body = serving_client.features_request(serving_client.stack_features([short, long]))
    assert json.loads(json.dumps(body)) == body
    assert body["signature_name"] == "predict_features"
    assert set(body["inputs"]) == set(serving_client.MODEL_INPUT_FEATURES)
    assert body["inputs"]["input_mask"] == [[1, 2, 3, 0, 0], [1, 2, 3, 4, 5]]
    with pytest.raises(ValueError, match="one shape"):
        serving_client.features_request({**short, "row_ids": np.zeros([1, 3])})
    with pytest.raises(ValueError, match="lack input_ids"):
        serving_client.features_request({"input_mask": np.zeros([1, 3])})


def test_examples_request_is_base64():
    body = serving_client.examples_request([b"\x00\x01ab"])
    assert body == {"signature_name": "serving_default", "inputs": {"examples": [{"b64": "AAFhYg=="}]}}


def test_parse_response_types_and_errors():
    outputs = serving_client.parse_response(
        {"outputs": {"probabilities": [[0.25, 1.0]], "aggregation": [3], "cell_mask": [[[1, 0]]]}})
    assert outputs["probabilities"].dtype == np.float32 and outputs["probabilities"].shape == (1, 2)
    assert outputs["aggregation"].dtype == np.int32 and outputs["cell_mask"].shape == (1, 1, 2)
    with pytest.raises(ServingError, match="failed the request: input_ids must"):
        serving_client.parse_response({"error": "input_ids must ..."})
    with pytest.raises(ServingError, match="no named outputs"):
        serving_client.parse_response({"outputs": [1, 2]})


def test_predict_url():
    assert serving_client.predict_url(URL + "/") == URL + ":predict"
    assert serving_client.predict_url(URL + "/versions/2:predict") == URL + "/versions/2:predict"


# --- answers through the served model -----------------------------------------------------------


def test_served_answers_equal_table_qa(served):
    calls = []
    client = ServingClient.from_export(URL, served["export_dir"],
                                       transport=in_process_transport(served["path"], calls))
    qa = served["qa"]
    first = client.answer(FRAME, "which city?")
    assert first.answers == ("paris", "berlin", "london")  # What the tiny model was trained to answer.
    follow_up = client.answer(FRAME, "which country?", previous_answer=first)
    for result, expected in ((first, qa.answer(FRAME, "which city?")),
                             (follow_up, qa.answer(FRAME, "which country?", previous_answer=first))):
        assert (result.coordinates, result.operator, result.answers) == (
            expected.coordinates, expected.operator, expected.answers)
        assert result.cell_probabilities.keys() == expected.cell_probabilities.keys()
        for cell, probability in expected.cell_probabilities.items():
            assert result.cell_probabilities[cell] == pytest.approx(probability, abs=1e-5)
    url, request = calls[0]
    assert url == URL + ":predict" and request["signature_name"] == "predict_features"
    assert len(request["inputs"]["input_ids"][0]) == first.sequence_length  # The ask API's bucket.


def test_served_fallback_to_best_cell_equals_table_qa(served, trained):
    options = dict(threshold=1.0, fallback_to_best_cell=True)  # No cell passes: the best one is taken.
    client = ServingClient.from_export(URL, served["export_dir"], transport=served["transport"], **options)
    local = TableQA.from_model_dir(trained["model_dir"], vocab_file=trained["vocab"], **options)
    result, expected = client.answer(FRAME, "which city?"), local.answer(FRAME, "which city?")
    assert len(result.coordinates) == 1 and result.coordinates == expected.coordinates


def test_answer_many_is_one_request(served):
    calls = []
    transport = in_process_transport(served["path"], calls)
    client = ServingClient.from_export(URL, served["path"], transport=transport)  # A version directory.
    questions = ["which city?", "which country?", "what population?"]
    results = client.answer_many(FRAME, questions)
    assert len(calls) == 1 and len(calls[0][1]["inputs"]["input_ids"]) == 3
    expected = served["qa"].answer_many(FRAME, questions)
    assert [r.coordinates for r in results] == [e.coordinates for e in expected]


def test_a_table_beyond_the_served_limits_is_read_in_windows_over_the_signature(served):
    """The model's heads have max_num_rows=8 segments: windows of at most 7 body rows, one loop on the
    client, every request within the served limits."""
    big = pd.DataFrame([[f"city{i}", "france", str(i)] for i in range(12)], columns=HEADER)
    requests = []

    def transport(url, body, timeout):
        requests.append(body)
        return served["transport"](url, body, timeout)

    result = serving_client.ask_served(URL, big, "which city?", export_dir=served["export_dir"], transport=transport)
    assert result.reading.rows_read == 12 and result.reading.windows >= 2
    assert max(max(row) for body in requests for row in body["inputs"]["row_ids"]) <= 7
    assert all(0 <= r < 12 for r, _ in result.coordinates)


def test_the_client_loop_shows_a_progress_bar_when_asked(served, monkeypatch, capsys):
    from tapas_tf.qa import window_reading

    monkeypatch.setattr(window_reading, "CHUNK_WINDOWS", 1)
    big = pd.DataFrame([[f"city{i}", "france", str(i)] for i in range(12)], columns=HEADER)
    serving_client.ask_served(URL, big, "which city?", export_dir=served["export_dir"],
                              transport=served["transport"], progress=True)
    assert "TF Serving: 12 rows" in capsys.readouterr().err
    serving_client.ask_served(URL, big, "which city?", export_dir=served["export_dir"], transport=served["transport"])
    assert "TF Serving" not in capsys.readouterr().err


def test_ask_served_without_windows_prunes_to_the_served_limits(served):
    big = pd.DataFrame([[f"city{i}", "france", str(i)] for i in range(12)], columns=HEADER)
    result = serving_client.ask_served(URL, big, "which city?", export_dir=served["export_dir"],
                                       transport=served["transport"], windows=False)
    assert len(result.kept_rows) == 7 and result.reading is None
    assert any("pruned" in note for note in result.diagnostics)


def test_server_side_errors_reach_the_caller(served):
    encoder = served["qa"].encoder
    features = serving_client.stack_features([encoder.encode(encoder.prepare(FRAME), "which city?").features])
    body = serving_client.features_request(features)
    body["inputs"]["row_ids"] = [row[:-1] for row in body["inputs"]["row_ids"]]
    with pytest.raises(ServingError, match="row_ids must have the shape of input_ids"):
        serving_client.parse_response(served["transport"](URL, body, 1.0))


# --- HTTP, on the loopback interface ------------------------------------------------------------


class _Handler(http.server.BaseHTTPRequestHandler):
    """Answers like TF Serving: 400 with {"error": ...} for a request without inputs."""

    def do_POST(self):  # noqa: N802 (the http.server API)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if body.get("inputs"):
            status, answer = 200, {"outputs": {"probabilities": [[0.5]], "aggregation": [1]}}
        else:
            status, answer = 400, {"error": "Missing 'inputs' or 'instances' key"}
        data = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def test_http_transport():
    server = http.server.HTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_port}/v1/models/tapas:predict"
        answer = serving_client.post_json(url, {"inputs": {"x": [1]}}, timeout=10)
        assert serving_client.parse_response(answer)["aggregation"].tolist() == [1]
        with pytest.raises(ServingError, match="answered HTTP 400: Missing 'inputs' or 'instances' key"):
            serving_client.post_json(url, {"inputs": {}}, timeout=10)
    finally:
        server.shutdown()
        server.server_close()
    with pytest.raises(ServingError, match="cannot reach .*is TF Serving running there"):
        serving_client.post_json(url, {"inputs": {"x": [1]}}, timeout=10)
