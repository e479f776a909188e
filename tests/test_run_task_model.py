"""run_task.py --model=NAME: fine-tune, predict and export a released model, end to end, offline.

A local server (`tests/checkpoints/release_server.py`, on 127.0.0.1) plays the Hugging Face Hub
with one tiny random WTQ-style model (`test_released.fixture_model`). Training downloads and
imports it through run_task itself; predict and export find it in a cache filled beforehand and
run with HF_HUB_OFFLINE=1, so they could not download it. Flag conflicts are one-line errors.
"""

import json
import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import pytest  # noqa: E402

from tapas_tf.checkpoints import model_dir as model_dir_lib, released  # noqa: E402
from tapas_tf.data.interaction_io import write_interactions  # noqa: E402
from tests.checkpoints.release_server import ReleaseServer  # noqa: E402
from tests.checkpoints.test_released import REPO, fixture_model  # noqa: E402,F401  (fixture_model: a fixture)
from tests.conversion_fixtures import make_interaction  # noqa: E402
from tests.test_run_task_cli import assert_short_error, run_task  # noqa: E402
from tests.training.test_input_pipeline import SEQ, TABLES, write_fixture_examples  # noqa: E402

NUM_QUESTIONS = sum(len(questions) for _, _, questions in TABLES)


@pytest.fixture(scope="module")
def hub(fixture_model, tmp_path_factory):  # noqa: F811
    """The server with the fixture repository, and inputs: training TFRecords and dev interactions."""
    root = tmp_path_factory.mktemp("run_task_model")
    write_fixture_examples(root)  # root/tf_examples/train.tfrecord at SEQ tokens, root/vocab.txt.
    interactions = [make_interaction(header, rows, questions, table_id=f"table_{t}")
                    for t, (header, rows, questions) in enumerate(TABLES)]
    for t, interaction in enumerate(interactions):
        interaction.id = f"i{t}-0"
        for q, question in enumerate(interaction.questions):
            question.id = f"i{t}-0_{q}"
    write_interactions(str(root / "dev.tfrecord"), interactions)
    with ReleaseServer() as server:
        server.add_repo(REPO, fixture_model["hf_files"])
        yield {"server": server, "root": root, "train_file": root / "tf_examples" / "train.tfrecord",
               "interactions": root / "dev.tfrecord"}


def hub_env(server, cache_dir, offline: bool = False) -> dict:
    """The environment of a run_task process that asks `server` for models and caches in `cache_dir`."""
    env = {"HF_ENDPOINT": server.url, "HF_HUB_CACHE": str(cache_dir / "hf"), "TAPAS_TF_CACHE": str(cache_dir),
           "NO_PROXY": "127.0.0.1,localhost", "HF_HUB_DISABLE_PROGRESS_BARS": "1", "HF_TOKEN": "",
           "HF_HUB_OFFLINE": "1" if offline else ""}
    return env


@pytest.fixture(scope="module")
def cached(hub, tmp_path_factory):
    """A cache that holds the imported model already (filled in this process, from the server)."""
    cache_dir = tmp_path_factory.mktemp("filled_cache")
    with pytest.MonkeyPatch.context() as patch:
        for name, value in hub_env(hub["server"], cache_dir).items():
            patch.setenv(name, value)
        patch.delenv("HF_HUB_OFFLINE")
        model_dir = released.released_model_dir(REPO)
    return {"cache_dir": cache_dir, "model_dir": model_dir}


def _listing(directory) -> set:
    return {os.path.relpath(os.path.join(folder, name), directory)
            for folder, _, names in os.walk(directory) for name in names}


def test_train_fine_tunes_the_released_model_for_two_steps(hub, fixture_model, tmp_path):  # noqa: F811
    server = hub["server"]
    before = len(server.requested("GET", f"/{REPO}/resolve/"))
    result = run_task("--task=SQA", "--mode=train", f"--model={REPO}", f"--train_file={hub['train_file']}",
                      f"--model_dir={tmp_path / 'tuned'}", f"--max_seq_length={SEQ}", "--train_steps=2",
                      "--train_batch_size=2", "--save_checkpoints_steps=2", "--noprogress_bar", "--seed=1",
                      cwd=tmp_path, env=hub_env(server, tmp_path / "cache"))
    assert result.returncode == 0, result.stderr[-3000:]
    # Downloaded (config.json, the weights, vocab.txt) and imported into the cache by run_task.
    assert len(server.requested("GET", f"/{REPO}/resolve/")) - before == 3
    cached_dir = str(tmp_path / "cache" / "models" / "hub" / "test-org--tiny-tapas-finetuned-wtq" / "main")
    assert released.read_manifest(cached_dir)["commit"] == server.repos[REPO]["refs"]["main"]
    # Fine-tuned from it: its encoder, in its size; the SQA heads start fresh.
    report = json.loads((tmp_path / "tuned" / "init_report.json").read_text())
    assert report["init_checkpoint"] == cached_dir
    assert report["loaded"] == ["embeddings", "layer_0", "layer_1", "pooler"] and report["loaded_heads"] == []
    config = model_dir_lib.load_config(str(tmp_path / "tuned"))
    released_config = fixture_model["config"]
    assert (config.hidden_size, config.num_hidden_layers, config.vocab_size) == (
        released_config.hidden_size, released_config.num_hidden_layers, released_config.vocab_size)
    assert config.num_aggregation_labels == 0  # SQA's heads, not WTQ's.
    assert model_dir_lib.latest_checkpoint(str(tmp_path / "tuned")).endswith("-2")
    assert not os.path.exists(os.path.join(cached_dir, "init_report.json"))  # The cache is only read.


def test_predict_and_evaluate_reads_the_cached_model_and_writes_into_model_dir(hub, cached, tmp_path):
    before = _listing(cached["model_dir"])
    result = run_task("--task=SQA", "--mode=predict_and_evaluate", f"--model={REPO}",
                      f"--interactions_file={hub['interactions']}", f"--model_dir={tmp_path / 'out'}",
                      f"--max_seq_length={SEQ}", "--noprogress_bar", cwd=tmp_path,
                      env=hub_env(hub["server"], cached["cache_dir"], offline=True))
    assert result.returncode == 0, result.stderr[-3000:]
    predictions = (tmp_path / "out" / "predictions" / "dev.tsv").read_text().splitlines()
    assert len(predictions) == 1 + NUM_QUESTIONS  # A header and a row per question.
    metrics = json.loads((tmp_path / "out" / "predictions" / "dev_metrics.json").read_text())
    assert (metrics["num_questions"], metrics["num_sequences"]) == (NUM_QUESTIONS, len(TABLES))
    assert os.listdir(tmp_path / "out" / "eval_dev")  # TensorBoard scalars.
    assert _listing(cached["model_dir"]) == before  # Nothing written into the released model's copy.


def test_export_exports_the_cached_model_with_its_vocabulary(hub, cached, tmp_path):
    result = run_task("--task=WTQ", "--mode=export", f"--model={REPO}", f"--export_dir={tmp_path / 'export'}",
                      cwd=tmp_path, env=hub_env(hub["server"], cached["cache_dir"], offline=True))
    assert result.returncode == 0, result.stderr[-3000:]
    version = tmp_path / "export" / "1"
    assert (version / "saved_model.pb").exists()
    assert (version / "assets.extra" / "vocab.txt").read_text() == open(
        os.path.join(cached["model_dir"], "vocab.txt")).read()
    assert json.loads((version / "assets.extra" / "tapas_config.json").read_text()) == json.loads(
        open(model_dir_lib.config_path(cached["model_dir"])).read())


def test_a_name_the_hub_does_not_know_is_one_line(hub, tmp_path):
    result = run_task("--task=WTQ", "--mode=export", "--model=test-org/no-such-model",
                      f"--export_dir={tmp_path / 'export'}", cwd=tmp_path,
                      env=hub_env(hub["server"], tmp_path))
    assert_short_error(result, 1, "test-org/no-such-model: no such model repository on " + hub["server"].url)


@pytest.mark.parametrize("args, expected", [
    (["--mode=train", "--init_checkpoint=ckpt", "--model_dir=m"],
     "give --model (a released model to fine-tune) or --init_checkpoint, not both"),
    (["--mode=export", "--model_dir=m", "--export_dir=e"], "give --model (a released model to export) or "
                                                           "--model_dir, not both"),
    (["--mode=predict", "--interactions_file=i"], "--mode=predict --model writes its predictions into "
                                                  "--model_dir"),
    (["--mode=predict_and_evaluate", "--model_dir=m", "--interactions_file=i", "--checkpoint=c"],
     "with --model the released model's own checkpoint is read"),
    (["--mode=create_data", "--input_dir=i", "--output_dir=o"], "not by --mode=create_data"),
])
def test_model_with_a_flag_it_replaces_is_a_usage_error(tmp_path, args, expected):
    result = run_task("--task=SQA", f"--model={REPO}", *args, cwd=tmp_path)
    assert_short_error(result, 2, expected)
    assert os.listdir(tmp_path) == []  # Refused before anything was written or downloaded.


def test_model_revision_needs_model(tmp_path):
    result = run_task("--task=SQA", "--mode=export", "--model_revision=main", "--model_dir=m",
                      "--export_dir=e", cwd=tmp_path)
    assert_short_error(result, 2, "--model_revision needs --model")
