"""SavedModel export (tapas_tf/serving/export.py) and run_task.py --mode=export.

Two tiny untrained models (hidden 32, 2 layers, seeded; the cell head's weights scaled up and its
bias centred on the fixture's cells, so that about half of the cells are selected and none is near
the 0.5 threshold): `column`, with select_one_column and no aggregation (SQA), and
`aggregation`, without select_one_column and with four operators (WTQ). Each is saved as a model
directory, exported, and loaded in a fresh process that imports no tapas_tf; its outputs are
compared with the Keras model's on the same inputs. The tables (0-based body coordinates):

    short: | city   | country | population |      long: | name | team  | points | goals | rank |
           | paris  | france  | 2          |            | john | red   | 12     | 3     | 1    |
           | berlin | germany | 4          |            | mary | blue  | 10     | 5     | 2    |
           | london | england | 8          |            | ...  (seven rows)                    |
"""

import json
import os
import pickle
import shutil
import subprocess
import sys
import textwrap

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402
import tf_keras  # noqa: E402

from tapas_tf.features.example_features import MODEL_INPUT_FEATURES, to_tf_example  # noqa: E402
from tapas_tf.inference import decoding  # noqa: E402
from tapas_tf.models.qa_model import TapasForQuestionAnswering, dummy_features  # noqa: E402
from tapas_tf.serving import export  # noqa: E402
from tests.conversion_fixtures import make_converter, make_interaction  # noqa: E402
from tests.inference.test_sequential import save_model_dir  # noqa: E402
from tests.model_fixtures import tiny_config  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAVED_MODEL_CLI = os.path.join(os.path.dirname(sys.executable), "saved_model_cli")
ATOL = 1e-5
# Scales the cell and column head weights: logits of several units instead of about 0.1.
WEIGHT_SCALE = 100.0

SHORT = (["city", "country", "population"],
         [["paris", "france", "2"], ["berlin", "germany", "4"], ["london", "england", "8"]],
         [("which city?", [(0, 0)]), ("what population?", [(2, 2)])])
LONG = (["name", "team", "points", "goals", "rank"],
        [["john", "red", "12", "3", "1"], ["mary", "blue", "10", "5", "2"],
         ["smith", "green", "9", "7", "3"], ["paris", "red", "8", "1", "4"],
         ["london", "blue", "7", "2", "5"], ["berlin", "green", "6", "4", "6"],
         ["france", "red", "5", "6", "7"]],
        [("how many points?", [(0, 2)])])
MODELS = {
    "column": dict(select_one_column=True),
    "aggregation": dict(select_one_column=False, num_aggregation_labels=4),
}
# Request name -> the signature it calls; `data` builds its inputs.
REQUESTS = {
    "features_40": "predict_features",
    "features_64": "predict_features",
    "examples_40": "serving_default",
    "examples_64": "serving_default",
    "examples_64_and_512": "serving_default",
}
# Runs in a fresh interpreter: loads each export and runs each request; tapas_tf is never imported.
FRESH_PROCESS = textwrap.dedent("""
    import pickle, sys
    import tensorflow as tf
    jobs = pickle.load(open(sys.argv[1], "rb"))
    results = {}
    for export_dir, requests in jobs.items():
        loaded = tf.saved_model.load(export_dir)  # Keep a reference: it owns the variables.
        for name, (signature, inputs) in requests.items():
            outputs = loaded.signatures[signature](**{k: tf.constant(v) for k, v in inputs.items()})
            results[export_dir, name] = {k: v.numpy() for k, v in outputs.items()}
    assert not [m for m in sys.modules if m.startswith("tapas_tf")], "the SavedModel must stand alone"
    pickle.dump(results, open(sys.argv[2], "wb"))
""")


# --- fixtures ----------------------------------------------------------------------------------


def _batch(examples, names=MODEL_INPUT_FEATURES):
    return {name: np.stack([np.asarray(e[name]) for e in examples]).astype(np.int32) for name in names}


def _serialize(examples):
    return [to_tf_example(e).SerializeToString() for e in examples]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """Interactions and their examples at 40, 64 and 512 tokens; the requests' inputs."""
    tmp = tmp_path_factory.mktemp("data")
    short, long = make_interaction(*SHORT, table_id="short"), make_interaction(*LONG, table_id="long")
    converters = {n: make_converter(str(tmp), max_seq_length=n) for n in (40, 64, 512)}
    # (interaction, question index) of every example, in batch order: two short tables fit in 40
    # tokens; the long table needs more.
    pairs = {40: [(short, 0), (short, 1)], 64: [(short, 0), (long, 0)], 512: [(short, 0), (long, 0)]}
    examples = {n: [converters[n].convert(i, k).features for i, k in pairs[n]] for n in pairs}
    mixed = [examples[64][0], examples[512][1]]  # Padded to 64 and to 512 in one batch.
    inputs = {
        "features_40": _batch(examples[40]),
        "features_64": _batch(examples[64]),
        "examples_40": {"examples": _serialize(examples[40])},
        "examples_64": {"examples": _serialize(examples[64])},
        "examples_64_and_512": {"examples": _serialize(mixed)},
    }
    # What each request runs the model on: the features as given, or the examples cut to the
    # longest real length of the batch.
    padded = {"features_40": examples[40], "features_64": examples[64], "examples_40": examples[40],
              "examples_64": examples[64], "examples_64_and_512": examples[512]}
    model_inputs = {}
    for name, rows in padded.items():
        batch = _batch(rows)
        length = int(batch["input_mask"].sum(axis=1).max()) if name.startswith("examples") else None
        model_inputs[name] = {k: v[:, :length] for k, v in batch.items()}
    tables = {name: [i.table for i, _ in pairs[40 if name.endswith("40") else 64]] for name in REQUESTS}
    return {"inputs": inputs, "model_inputs": model_inputs, "padded": padded, "tables": tables,
            "vocab": converters[40].config.vocab_file}


@pytest.fixture(scope="module")
def exported(data, tmp_path_factory):
    """Per model kind: the Keras model, its model directory, its export and the fresh-process outputs."""
    tmp = tmp_path_factory.mktemp("exports")
    kinds = {}
    for seed, (kind, options) in enumerate(MODELS.items()):
        tf_keras.utils.set_random_seed(seed)  # Also Python's: unseeded tf_keras initialisers draw from it.
        config = tiny_config(max_position_embeddings=512, **options)
        model = TapasForQuestionAnswering(config)
        model(dummy_features(1, 8), training=False)
        _spread_cell_probabilities(model, data["model_inputs"])
        model_dir = tmp / kind
        save_model_dir(model_dir, model, config)
        if kind == "column":
            shutil.copyfile(data["vocab"], model_dir / "vocab.txt")
        export_dir = str(tmp / f"{kind}_export")
        path = export.export_model_dir(str(model_dir), export_dir)
        kinds[kind] = {"model": model, "model_dir": str(model_dir), "export_dir": export_dir, "path": path}
    jobs = {k["path"]: {name: (REQUESTS[name], data["inputs"][name]) for name in REQUESTS}
            for k in kinds.values()}
    with open(tmp / "jobs.pkl", "wb") as f:
        pickle.dump(jobs, f)
    result = subprocess.run(
        [sys.executable, "-c", FRESH_PROCESS, str(tmp / "jobs.pkl"), str(tmp / "out.pkl")], cwd=str(tmp),
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    with open(tmp / "out.pkl", "rb") as f:
        served = pickle.load(f)
    for k in kinds.values():
        k["served"] = {name: served[k["path"], name] for name in REQUESTS}
    return kinds


def _spread_cell_probabilities(model, requests):
    """Scales the cell head's weights and centres its bias between the middle body token logits."""
    head = model.cell_selection_head
    for weights in head.weight_map().values():
        weights.assign(weights * WEIGHT_SCALE)
    logits = [_keras(model, f)["token_logits"][(f["row_ids"] > 0) & (f["column_ids"] > 0)]
              for f in requests.values()]
    values = np.unique(np.concatenate(logits).round(3))
    middle = len(values) // 2
    head.output_bias.assign_sub((values[middle - 1] + values[middle]) / 2)  # Between two logits, on no token.
    for features in requests.values():
        probabilities = _keras(model, features)["probabilities"]
        for b in range(len(probabilities)):
            cells = decoding.cell_probabilities(probabilities[b], features["column_ids"][b],
                                                features["row_ids"][b], features["input_mask"][b])
            assert min(abs(p - 0.5) for p in cells.values()) > 1e-3, "a cell too close to the threshold"


def _keras(model, features):
    outputs = model({k: tf.constant(v) for k, v in features.items()}, training=False)
    return {k: v.numpy() for k, v in outputs.items()}


def _softmax(logits):
    exp = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return exp / exp.sum(axis=-1, keepdims=True)


def _grid_cells(cell_probabilities, cell_mask):
    """(row, column) -> probability of the cells that the mask marks."""
    return {(int(r), int(c)): float(cell_probabilities[r, c]) for r, c in zip(*np.nonzero(cell_mask))}


def _decoded(question_id, probabilities, features, aggregation_probabilities, table):
    """(coordinates, aggregation, answer) of decoding.decode_prediction; NaN answers as the string "nan"."""
    logits = None if aggregation_probabilities is None else np.log(aggregation_probabilities)
    prediction = decoding.decode_prediction(question_id, probabilities, features["column_ids"],
                                            features["row_ids"], features["input_mask"],
                                            aggregation_logits=logits, table=table)
    answer = prediction.answer
    return prediction.coordinates, prediction.aggregation, "nan" if answer != answer else answer


# --- outputs against the Keras model -----------------------------------------------------------


@pytest.mark.parametrize("request_name", REQUESTS)
@pytest.mark.parametrize("kind", MODELS)
def test_fresh_process_outputs_match_keras(exported, data, kind, request_name):
    model, served = exported[kind]["model"], exported[kind]["served"][request_name]
    features = data["model_inputs"][request_name]
    expected = _keras(model, features)
    config = model.tapas_config
    keys = {"probabilities", "cell_probabilities", "cell_mask", "column_ids", "row_ids", "input_mask"}
    keys |= {"column_probabilities"} if kind == "column" else {"aggregation_probabilities", "aggregation"}
    assert set(served) == keys

    batch, seq = features["input_ids"].shape
    assert served["probabilities"].shape == (batch, seq)  # Examples run at their real length only.
    np.testing.assert_allclose(served["probabilities"], expected["probabilities"], atol=ATOL, rtol=0)
    for name in ("column_ids", "row_ids", "input_mask"):
        np.testing.assert_array_equal(served[name], features[name])
    assert served["cell_probabilities"].shape == (batch, config.max_num_rows, config.max_num_columns)
    for b in range(batch):
        # The Keras probabilities, decoded as prediction decodes them.
        cells = decoding.cell_probabilities(expected["probabilities"][b], features["column_ids"][b],
                                            features["row_ids"][b], features["input_mask"][b])
        served_cells = _grid_cells(served["cell_probabilities"][b], served["cell_mask"][b])
        assert served_cells.keys() == cells.keys()
        np.testing.assert_allclose([served_cells[c] for c in cells], list(cells.values()), atol=ATOL, rtol=0)
        assert not served["cell_probabilities"][b][served["cell_mask"][b] == 0].any()
    if kind == "column":
        np.testing.assert_allclose(served["column_probabilities"], _softmax(expected["column_logits"]),
                                   atol=ATOL, rtol=0)
    else:
        np.testing.assert_allclose(served["aggregation_probabilities"],
                                   _softmax(expected["aggregation_logits"]), atol=ATOL, rtol=0)
        np.testing.assert_array_equal(served["aggregation"], expected["aggregation_logits"].argmax(axis=-1))


@pytest.mark.parametrize("kind", MODELS)
def test_cell_grid_equals_decoding_cell_probabilities(exported, kind):
    """The served grid and decoding.cell_probabilities of the served token probabilities agree."""
    served = exported[kind]["served"]["examples_64_and_512"]
    for b in range(served["probabilities"].shape[0]):
        cells = decoding.cell_probabilities(served["probabilities"][b], served["column_ids"][b],
                                            served["row_ids"][b], served["input_mask"][b])
        assert len(cells) in (9, 35)  # Every body cell of the short and the long table.
        grid = _grid_cells(served["cell_probabilities"][b], served["cell_mask"][b])
        assert grid == pytest.approx(cells, abs=1e-6)


@pytest.mark.parametrize("request_name", REQUESTS)
@pytest.mark.parametrize("kind", MODELS)
def test_decoded_answers_equal(exported, data, kind, request_name):
    """Decoded from the served outputs or from the Keras model on the padded examples: the same answers."""
    model, served = exported[kind]["model"], exported[kind]["served"][request_name]
    padded = _batch(data["padded"][request_name])
    expected = _keras(model, padded)
    answers = set()
    for b, table in enumerate(data["tables"][request_name]):
        from_keras = _decoded("q", expected["probabilities"][b], {k: v[b] for k, v in padded.items()},
                              _softmax(expected["aggregation_logits"][b]) if kind == "aggregation" else None,
                              table)
        from_served = _decoded("q", served["probabilities"][b], {k: v[b] for k, v in served.items()},
                               served["aggregation_probabilities"][b] if kind == "aggregation" else None,
                               table)
        assert from_served == from_keras
        answers.add(from_keras)
    assert any(coordinates for coordinates, _, _ in answers)  # Not a vacuous comparison.


def test_examples_run_at_the_real_length_of_the_batch(exported, data):
    served = exported["column"]["served"]
    real_lengths = data["model_inputs"]["examples_64_and_512"]["input_mask"].sum(axis=1)
    assert served["examples_64_and_512"]["probabilities"].shape == (2, real_lengths.max())
    assert served["examples_40"]["probabilities"].shape[1] < 40
    assert served["features_40"]["probabilities"].shape == (2, 40)  # predict_features keeps the length given.


def test_bad_examples_fail_with_a_message(exported, data):
    loaded = tf.saved_model.load(exported["column"]["path"])
    example = dict(data["padded"]["examples_40"][0])
    example["input_mask"] = example["input_mask"][:-1]
    with pytest.raises(tf.errors.InvalidArgumentError, match="needs as many input_mask as input_ids"):
        loaded.signatures["serving_default"](examples=tf.constant(_serialize([example])))
    features = {k: tf.constant(v) for k, v in data["inputs"]["features_40"].items()}
    features["row_ids"] = features["row_ids"][:, :-1]
    with pytest.raises(tf.errors.InvalidArgumentError, match="row_ids must have the shape of input_ids"):
        loaded.signatures["predict_features"](**features)


# --- the SavedModel's directory ----------------------------------------------------------------


def test_saved_model_cli_lists_both_signatures(exported):
    result = subprocess.run([SAVED_MODEL_CLI, "show", "--all", "--dir", exported["aggregation"]["path"]],
                            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    text = result.stdout
    default_start = text.index("signature_def['serving_default']")
    default = text[default_start:]
    features = text[text.index("signature_def['predict_features']"):default_start]
    assert "inputs['examples'] tensor_info:\n        dtype: DT_STRING\n        shape: (-1)" in default
    for name in MODEL_INPUT_FEATURES:
        assert f"inputs['{name}'] tensor_info:\n        dtype: DT_INT32\n        shape: (-1, -1)" in features
    for signature in (default, features):
        for name in ("probabilities", "cell_probabilities", "cell_mask", "aggregation_probabilities",
                     "aggregation", "column_ids", "row_ids"):
            assert f"outputs['{name}']" in signature


def test_assets_extra_hold_the_config_and_the_vocabulary(exported, data):
    for kind, has_vocab in (("column", True), ("aggregation", False)):
        assets = os.path.join(exported[kind]["path"], "assets.extra")
        with open(os.path.join(assets, "tapas_config.json")) as f:
            assert json.load(f) == json.loads(exported[kind]["model"].tapas_config.to_json_string())
        assert os.path.exists(os.path.join(assets, "vocab.txt")) == has_vocab
    with open(os.path.join(exported["column"]["path"], "assets.extra", "vocab.txt")) as f:
        assert f.read() == open(data["vocab"]).read()


def test_versions_count_up_and_are_never_overwritten(exported, tmp_path):
    for name in ("1", "7", "0003", "tmp", ".export-9-abc"):
        (tmp_path / name).mkdir()
    (tmp_path / "12").write_text("a file still claims its number")
    assert export.next_version(str(tmp_path)) == 13
    assert export.next_version(str(tmp_path / "missing")) == 1
    with pytest.raises(FileExistsError, match=f"{tmp_path / '7'} exists"):
        export.export_saved_model(exported["column"]["model"], str(tmp_path), version=7)
    with pytest.raises(ValueError, match="positive integer"):
        export.export_saved_model(exported["column"]["model"], str(tmp_path), version=0)
    # The fixture's export left no staging directory behind.
    assert os.listdir(exported["column"]["export_dir"]) == ["1"]


# --- run_task.py --mode=export -----------------------------------------------------------------


def run_task(*args, cwd):
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    env.pop("TAPAS_TF_DEBUG", None)
    return subprocess.run([sys.executable, os.path.join(ROOT, "run_task.py"), *args], cwd=str(cwd), env=env,
                          capture_output=True, text=True, timeout=300)


def _error_line(result):
    errors = [line for line in result.stderr.splitlines() if line.startswith("run_task.py: error: ")]
    assert len(errors) == 1 and "Traceback" not in result.stderr, result.stderr[-3000:]
    return errors[0]


def test_cli_export_writes_versions_1_then_2(exported, tmp_path):
    model_dir = exported["column"]["model_dir"]
    for task, version in (("SQA", "1"), ("WTQ", "2")):
        result = run_task(f"--task={task}", "--mode=export", f"--model_dir={model_dir}",
                          f"--export_dir={tmp_path / 'export'}", cwd=tmp_path)
        assert result.returncode == 0, result.stderr[-3000:]
        assert sorted(os.listdir(tmp_path / "export")) == sorted(["1", "2"][:int(version)])
        assert os.path.exists(tmp_path / "export" / version / "saved_model.pb")
    result = run_task("--task=WIKISQL", "--mode=export", f"--model_dir={model_dir}",
                      f"--export_dir={tmp_path / 'export'}", "--export_version=2", cwd=tmp_path)
    assert result.returncode == 1
    assert f"{tmp_path / 'export' / '2'} exists" in _error_line(result)


def test_cli_export_without_a_checkpoint_names_the_model_dir(exported, tmp_path):
    model_dir = tmp_path / "model"
    shutil.copytree(exported["column"]["model_dir"], model_dir, ignore=shutil.ignore_patterns("checkpoints"))
    result = run_task("--task=SQA", "--mode=export", f"--model_dir={model_dir}",
                      f"--export_dir={tmp_path / 'export'}", cwd=tmp_path)
    assert result.returncode == 1
    assert f"{model_dir}: no checkpoint under checkpoints/" in _error_line(result)
    assert os.listdir(tmp_path / "export") == []


def test_cli_export_needs_an_export_dir(tmp_path):
    result = run_task("--task=SQA", "--mode=export", "--model_dir=model", cwd=tmp_path)
    assert result.returncode == 2
    assert _error_line(result).endswith("--mode=export needs --export_dir")
