"""Released TabFact models by name: `TableFactChecker.from_pretrained`, `released_model_dir(task=
"classification")`, and the refusals of a model of the other kind.

No network and no PyTorch: `release_server.ReleaseServer` plays the Hugging Face Hub and the host
of Google's release zips (as in test_released). The Hub repository is tests/fixtures/tabfact_hf, a
tiny random `TapasForSequenceClassification` saved by transformers itself, with what HF's
`TapasTokenizer` made of a few statements and transformers' own P(entailed) for them
(benchmarks/make_tabfact_fixture.py writes it). The release zip is a TF1 checkpoint written here
from a tiny random TabFact model, with its classifier as `output_weights_cls`, `output_bias_cls`.
"""

import io
import json
import os
import zipfile

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402
from safetensors.numpy import load_file  # noqa: E402

import tapas_tf  # noqa: E402
from tapas_tf.checkpoints import importer as ic, released  # noqa: E402
from tapas_tf.qa.fact_checker import TableFactChecker, entailed_probability  # noqa: E402
from tapas_tf.qa.table_qa import TableQA  # noqa: E402
from tapas_tf.task_registry.presets import TABFACT_PRESET  # noqa: E402
from tests.checkpoints.release_server import ReleaseServer, use_local_hub  # noqa: E402
from tests.checkpoints.test_importer import _assert_same_weights, _random_model, _write_tf1  # noqa: E402
from tests.checkpoints.test_released import _one_line_error  # noqa: E402
from tests.model_fixtures import tiny_config  # noqa: E402
from tests.vocab_fixture import write_test_vocab  # noqa: E402

FIXTURE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "tabfact_hf")
REPO_FILES = ("config.json", "model.safetensors", "vocab.txt")
TABFACT_REPO = "test-org/tiny-tapas-finetuned-tabfact"
QA_REPO = "test-org/tiny-tapas-finetuned-wtq"
TABFACT_ZIP = "/tapas_models/2020_10_07/tapas_tabfact_inter_masklm_tiny.zip"
QA_ZIP = "/tapas_models/2020_10_07/tapas_wtq_wikisql_sqa_inter_masklm_tiny_reset.zip"
# HF's token_type_ids, in order.
TOKEN_TYPES = ("segment_ids", "column_ids", "row_ids", "prev_label_ids", "column_ranks", "inv_column_ranks",
               "numeric_relations")
EMPTY_ID = 1  # [EMPTY] in the test vocabulary.
TOLERANCE = 1e-4
TABLE = pd.DataFrame({"city": ["paris", "london", "berlin"], "population": ["2", "9", "4"]})


def _cases():
    with open(os.path.join(FIXTURE, "cases.json"), encoding="utf-8") as f:
        return json.load(f)["cases"]


PARITY_CASES = [case for case in _cases() if "known_difference" not in case]


def _repo_files(**config_changes):
    files = {}
    for name in REPO_FILES:
        with open(os.path.join(FIXTURE, name), "rb") as f:
            files[name] = f.read()
    if config_changes:
        config = {**json.loads(files["config.json"]), **config_changes}
        files["config.json"] = json.dumps(config).encode()
    return files


@pytest.fixture(scope="module")
def tabfact_release(tmp_path_factory):
    """A tiny random TabFact model and its original (TF1) release zip, as bytes."""
    root = tmp_path_factory.mktemp("tabfact_release")
    config = tiny_config(**ic.preset_options(TABFACT_PRESET), reset_position_index_per_cell=False,
                         hidden_act="gelu_tanh")
    model = _random_model(config, seed=5)
    stem = os.path.basename(TABFACT_ZIP)[:-len(".zip")]
    release = root / stem
    prefix = _write_tf1(release, model, config)
    write_test_vocab(str(release / "vocab.txt"))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in sorted(os.listdir(release)):
            archive.write(release / name, f"{stem}/{name}")
    return {"model": model, "variables": dict(tf.train.list_variables(prefix)), "zip": buffer.getvalue()}


@pytest.fixture
def server(tabfact_release, tmp_path, monkeypatch):
    """The local server with the TabFact repository and zip, a question-answering repository whose
    config is all it needs (it is refused before its weights), and every cache in tmp_path."""
    with ReleaseServer() as running:
        running.add_repo(TABFACT_REPO, _repo_files())
        running.add_repo(QA_REPO, _repo_files(architectures=["TapasForQuestionAnswering"]))
        running.add_file(TABFACT_ZIP, tabfact_release["zip"])
        running.add_file(QA_ZIP, b"never downloaded")
        use_local_hub(monkeypatch, running.url, tmp_path)
        yield running


def _check_case(checker, case):
    """Our encoding is HF's TapasTokenizer's, and P(entailed) is transformers' own."""
    table = pd.DataFrame(case["table"])
    encoded = checker.encoder.encode(checker.encoder.prepare(table), case["statement"])
    length = len(case["input_ids"])
    assert encoded.real_length == length, case["name"]
    assert encoded.features["input_ids"][:length].tolist() == case["input_ids"], case["name"]
    for index, name in enumerate(TOKEN_TYPES):
        hf_ids = [token_types[index] for token_types in case["token_type_ids"]]
        assert encoded.features[name][:length].tolist() == hf_ids, f"{case['name']}: {name}"
    result = checker.verify(table, case["statement"])
    assert result.probability == pytest.approx(case["p_entailed"], abs=TOLERANCE), case["name"]
    assert result.entailed == (case["p_entailed"] >= 0.5)
    assert result.model == TABFACT_REPO


# --- the Hub: parity with transformers ---------------------------------------------------------


def test_fixture_is_small_and_spreads_both_verdicts():
    assert sum(os.path.getsize(os.path.join(FIXTURE, name)) for name in os.listdir(FIXTURE)) < 1_000_000
    assert len(PARITY_CASES) >= 3
    assert {case["p_entailed"] >= 0.5 for case in PARITY_CASES} == {True, False}


def test_hub_tabfact_model_matches_transformers_then_loads_without_network(server, forbid_network):
    checker = TableFactChecker.from_pretrained(TABFACT_REPO)

    model_dir = released.cached_model_dir(released.parse_name(TABFACT_REPO))
    manifest = released.read_manifest(model_dir)
    assert manifest["model_kind"] == "classification" and manifest["source"] == "hub"
    assert sorted(manifest["files"]) == sorted(REPO_FILES)
    config = tapas_tf.checkpoints.model_dir.load_config(model_dir)
    assert (config.num_classification_labels, config.num_aggregation_labels) == (2, 0)
    assert config.disable_per_token_loss and not config.select_one_column
    for case in PARITY_CASES:
        _check_case(checker, case)

    server.stop()
    attempts = forbid_network()
    again = TableFactChecker.from_pretrained(TABFACT_REPO, threshold=0.55)
    assert again.threshold == 0.55
    _check_case(again, PARITY_CASES[0])
    assert released.released_model_dir(TABFACT_REPO, task="classification") == model_dir
    assert attempts == []


def test_hub_classifier_weights_are_taken_as_they_are(server):
    model_dir = released.released_model_dir(TABFACT_REPO, task="classification")
    tensors = load_file(os.path.join(FIXTURE, "model.safetensors"))
    model = tapas_tf.load_model(model_dir)
    weights = {name: variable.numpy() for name, variable in model.weight_map().items()}
    np.testing.assert_array_equal(weights["output_weights_cls"], tensors["classifier.weight"])
    np.testing.assert_array_equal(weights["output_bias_cls"], tensors["classifier.bias"])
    np.testing.assert_array_equal(weights["bert/pooler/dense/kernel"], tensors["tapas.pooler.dense.weight"].T)
    # HF's classifier has no cell-selection head; ours is zero, and unused.
    assert not weights["output_weights"].any() and not weights["output_bias"].any()
    with open(os.path.join(model_dir, ic.REPORT_FILE), encoding="utf-8") as f:
        report = json.load(f)
    assert any(note.startswith("set output_weights, output_bias to zero") for note in report["notes"])


def test_an_empty_string_cell_is_the_known_difference_from_hf_tokenizer(server):
    """HF gives a cell of "" no token; the original TAPAS encoding, which trained the released models
    and which tapas-tf follows, gives it [EMPTY] (both give "-" [EMPTY]). Everything else is equal."""
    checker = TableFactChecker.from_pretrained(TABFACT_REPO)
    (case,) = [case for case in _cases() if "known_difference" in case]
    encoded = checker.encoder.encode(checker.encoder.prepare(pd.DataFrame(case["table"])), case["statement"])
    ours = encoded.features["input_ids"][:encoded.real_length].tolist()
    assert len(ours) == len(case["input_ids"]) + 1
    assert ours.count(EMPTY_ID) == case["input_ids"].count(EMPTY_ID) + 1
    assert [i for i in ours if i != EMPTY_ID] == [i for i in case["input_ids"] if i != EMPTY_ID]


# --- the other kind: refused in one line, before the weights ----------------------------------


def test_question_answering_repository_is_no_fact_checker(server):
    _one_line_error(lambda: TableFactChecker.from_pretrained(QA_REPO), QA_REPO, "TapasForQuestionAnswering",
                    "TableQA.from_pretrained")
    assert not server.requested("GET", "model.safetensors")


def test_tabfact_repository_is_no_question_answerer(server, forbid_network):
    _one_line_error(lambda: TableQA.from_pretrained(TABFACT_REPO), TABFACT_REPO,
                    "TapasForSequenceClassification", "TableFactChecker.from_pretrained")
    assert not server.requested("GET", "model.safetensors")
    # Once imported as a classifier, the cache refuses it as TableQA's too, without the network.
    released.released_model_dir(TABFACT_REPO, task="classification")
    server.stop()
    attempts = forbid_network()
    _one_line_error(lambda: TableQA.from_pretrained(TABFACT_REPO), TABFACT_REPO,
                    "TableFactChecker.from_pretrained")
    assert attempts == []


@pytest.mark.parametrize("change, message", [
    ({"architectures": ["TapasForSequenceClassification"], "id2label": {"0": "a", "1": "b", "2": "c"}},
     "with 3 labels; a TabFact classifier has 2"),
    ({"architectures": ["TapasForMaskedLM"]}, "is a TapasForMaskedLM, not a table classifier"),
    ({"architectures": None}, "names no architecture"),
])
def test_hub_models_that_are_no_tabfact_classifier_are_refused(server, change, message):
    server.add_repo("test-org/other", _repo_files(**change))
    _one_line_error(lambda: released.released_model_dir("test-org/other", task="classification"), message)
    assert not server.requested("GET", "model.safetensors")


def test_release_zips_of_the_other_kind_are_refused_before_downloading(server):
    _one_line_error(lambda: TableFactChecker.from_pretrained(server.url + QA_ZIP),
                    "tapas_wtq_wikisql_sqa_inter_masklm_tiny_reset is a question-answering release",
                    "TableQA.from_pretrained")
    _one_line_error(lambda: TableQA.from_pretrained(server.url + TABFACT_ZIP),
                    "tapas_tabfact_inter_masklm_tiny is a TabFact table classifier",
                    "TableFactChecker.from_pretrained")
    assert server.requests == []


@pytest.mark.parametrize("stem, expected", [
    ("tapas_tabfact_inter_masklm_base_reset", ("TABFACT", True)),
    ("tapas_tabfact_inter_masklm_tiny", ("TABFACT", False)),
])
def test_tabfact_release_names(stem, expected):
    assert released.release_zip_options(f"https://h/{stem}.zip", "classification") == expected


@pytest.mark.parametrize("stem, message", [
    ("tapas_sqa_inter_masklm_base_reset", "question-answering release (SQA)"),
    ("tapas_inter_masklm_base_reset", "pre-trained (masked-LM) checkpoint without a classifier"),
    ("my_model", "cannot tell from the name my_model that it is a TabFact classifier"),
])
def test_release_names_that_judge_no_statements_are_refused(stem, message):
    _one_line_error(lambda: released.release_zip_options(f"https://h/{stem}.zip", "classification"), message)


def test_unknown_task_is_refused():
    with pytest.raises(ValueError, match="task must be one of"):
        released.released_model_dir("google/tapas-base-finetuned-tabfact", task="tabfact")


# --- Google's TabFact release zip (TF1) ---------------------------------------------------------


def test_tabfact_release_zip_is_imported_as_a_classifier(server, tabfact_release, forbid_network):
    assert tabfact_release["variables"]["output_weights_cls"] == [2, 32]
    assert tabfact_release["variables"]["output_bias_cls"] == [2]
    url = server.url + TABFACT_ZIP
    checker = TableFactChecker.from_pretrained(url)

    model_dir = released.released_model_dir(url, task="classification")
    manifest = released.read_manifest(model_dir)
    assert (manifest["task"], manifest["model_kind"]) == ("TABFACT", "classification")
    assert manifest["reset_position_index_per_cell"] is False  # No _reset in the name.
    loaded = tapas_tf.load_model(model_dir)
    _assert_same_weights(tabfact_release["model"], loaded)
    config = loaded.tapas_config
    assert (config.num_classification_labels, config.num_aggregation_labels) == (2, 0)
    assert config.disable_per_token_loss and not config.select_one_column
    assert not config.reset_position_index_per_cell

    statement = "london has the most population"
    encoded = checker.encoder.encode(checker.encoder.prepare(TABLE), statement)
    features = {name: tf.constant(value[None]) for name, value in encoded.features.items()}
    logits = tabfact_release["model"](features, training=False)["classification_logits"].numpy()
    result = checker.verify(TABLE, statement)
    assert result.probability == pytest.approx(float(entailed_probability(logits)[0]), abs=1e-5)
    assert result.model == "tapas_tabfact_inter_masklm_tiny"

    server.stop()
    attempts = forbid_network()
    assert TableFactChecker.from_pretrained(url).verify(TABLE, statement).probability == result.probability
    assert attempts == []


# --- the command lines with a released TabFact model -------------------------------------------

def test_verify_and_export_take_a_released_tabfact_model(server, tmp_path):
    import subprocess
    import sys

    case = PARITY_CASES[0]
    table = tmp_path / "table.csv"
    pd.DataFrame(case["table"]).to_csv(table, index=False)
    result = subprocess.run([sys.executable, "-m", "tapas_tf.commands.dispatch", "verify", f"--table={table}",
                             f"--model={TABFACT_REPO}", "--json", case["statement"]], cwd=str(tmp_path),
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    line = json.loads(result.stdout.splitlines()[0])
    assert line["probability"] == pytest.approx(case["p_entailed"], abs=TOLERANCE)
    assert line["model"] == TABFACT_REPO

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    result = subprocess.run([sys.executable, os.path.join(root, "run_task.py"), "--task=TABFACT", "--mode=export",
                             f"--model={TABFACT_REPO}", f"--export_dir={tmp_path / 'export'}"],
                            cwd=str(tmp_path), capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    loaded = tf.saved_model.load(str(tmp_path / "export" / "1"))
    assert "entailed_probability" in loaded.signatures["serving_default"].structured_outputs
