"""Released models by name (`tapas_tf.checkpoints.released`, `TableQA.from_pretrained`, `--model`).

No test reaches the network: a local server (`release_server.ReleaseServer`, on 127.0.0.1) plays
the Hugging Face Hub (`HF_ENDPOINT` points at it) and the host of Google's release zips. The
fixture repositories are written here from one tiny random WTQ-style model: a Hugging Face
TAPAS (config.json, model.safetensors, vocab.txt) and an original TF1 release zip. A cache hit is
tested with the server stopped and every socket connection refused.
"""

import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import zipfile

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from safetensors.numpy import save as save_safetensors  # noqa: E402

import tapas_tf  # noqa: E402
from tapas_tf.checkpoints import download, hf, importer as ic, released  # noqa: E402
from tapas_tf.checkpoints.released import ReleasedModelError  # noqa: E402
from tests.checkpoints.release_server import ReleaseServer, use_local_hub  # noqa: E402
from tests.checkpoints.test_importer import (  # noqa: E402
    _assert_same_weights,
    _hf_config,
    _random_model,
    _write_tf1,
)
from tests.model_fixtures import tiny_config  # noqa: E402
from tests.vocab_fixture import write_test_vocab  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REPO = "test-org/tiny-tapas-finetuned-wtq"
ZIP_STEM = "tapas_wtq_wikisql_sqa_inter_masklm_tiny_reset"
ZIP_PATH = f"/tapas_models/2020_10_07/{ZIP_STEM}.zip"
TABLE = pd.DataFrame({"city": ["paris", "london", "berlin"], "country": ["france", "england", "germany"],
                      "population": ["2100000", "8900000", "3600000"]})


# --- fixtures: one tiny model as a Hub repository and as a release zip -------------------------


@pytest.fixture(scope="module")
def fixture_model(tmp_path_factory):
    """The model, its HF repository files and its TF1 release zip (bytes)."""
    root = tmp_path_factory.mktemp("fixture_model")
    config = tiny_config(**ic.task_options("WTQ"), reset_position_index_per_cell=True, hidden_act="gelu_tanh")
    model = _random_model(config, seed=3)
    write_test_vocab(str(root / "vocab.txt"))
    vocab = (root / "vocab.txt").read_bytes()
    tensors = hf.canonical_to_hf(ic.export_tf1_arrays(model), "tapas.")
    hf_files = {"config.json": json.dumps(_hf_config(config)).encode(),
                "model.safetensors": save_safetensors(tensors), "vocab.txt": vocab}
    release = root / ZIP_STEM
    _write_tf1(release, model, config)
    (release / "vocab.txt").write_bytes(vocab)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in sorted(os.listdir(release)):
            archive.write(release / name, f"{ZIP_STEM}/{name}")
    return {"model": model, "config": config, "hf_files": hf_files, "zip": buffer.getvalue()}


@pytest.fixture
def server(fixture_model, tmp_path, monkeypatch):
    """The local server with the fixture repository and zip, and every cache in tmp_path."""
    with ReleaseServer() as running:
        running.add_repo(REPO, fixture_model["hf_files"])
        running.add_file(ZIP_PATH, fixture_model["zip"])
        use_local_hub(monkeypatch, running.url, tmp_path)
        yield running


def _zip_url(server) -> str:
    return server.url + ZIP_PATH


def _part_path(url: str) -> str:
    return os.path.join(released.models_cache_dir(), "downloads", released._zip_key(url) + ".zip.part")


def _one_line_error(call, *texts) -> str:
    with pytest.raises(ReleasedModelError) as raised:
        call()
    message = str(raised.value)
    assert "\n" not in message, message
    for text in texts:
        assert text in message, message
    return message


# --- names ---------------------------------------------------------------------------------------


WTQ_BASE = "google/tapas-base-finetuned-wtq"


@pytest.mark.parametrize("name, revision, expected", [
    (WTQ_BASE, None, ("hub", WTQ_BASE, None, None)),
    (WTQ_BASE + "@no_reset", None, ("hub", WTQ_BASE, "no_reset", None)),
    (WTQ_BASE, "refs/pr/3", ("hub", WTQ_BASE, "refs/pr/3", None)),
    ("https://h/x/tapas_sqa_base.zip#sha256=" + "AB" * 32, None,
     ("zip", "https://h/x/tapas_sqa_base.zip", None, "ab" * 32)),
])
def test_names_are_hub_repositories_or_release_addresses(name, revision, expected):
    release = released.parse_name(name, revision)
    assert (release.kind, release.location, release.revision, release.sha256) == expected


@pytest.mark.parametrize("name, revision, message", [
    ("", None, "empty"),
    ("google/tapas@", None, "revision after '@' is empty"),
    ("google/tapas@v1", "v2", "revision 'v2' is given too"),
    ("not a name!", None, "is not a Hugging Face repository id"),
    ("ftp://host/tapas_sqa_base.zip", None, "only http and https"),
    ("https://host/tapas_sqa_base.tar.gz", None, "names a .zip file"),
    ("https://host/tapas_sqa_base.zip", "main", "not to a release address"),
    ("https://host/tapas_sqa_base.zip#md5=00", None, "#sha256=HEX"),
    ("https://host/tapas_sqa_base.zip#sha256=123", None, "not a SHA-256 digest"),
])
def test_malformed_names_are_refused_in_one_line(name, revision, message):
    _one_line_error(lambda: released.parse_name(name, revision), message)


def test_a_model_directory_is_pointed_to_model_dir(tmp_path):
    (tmp_path / "tapas_config.json").write_text("{}")
    _one_line_error(lambda: released.parse_name(str(tmp_path)), "is a tapas-tf model directory",
                    "--model_dir")


@pytest.mark.parametrize("stem, expected", [
    ("tapas_wtq_wikisql_sqa_inter_masklm_base_reset", ("WTQ", True)),
    ("tapas_wikisql_sqa_inter_masklm_large", ("WIKISQL_SUPERVISED", False)),
    ("tapas_sqa_inter_masklm_small_reset", ("SQA", True)),
    ("tapas_sqa_base", ("SQA", False)),
])
def test_release_names_give_the_task_and_the_position_reset(stem, expected):
    assert released.release_zip_options(f"https://h/{stem}.zip") == expected


@pytest.mark.parametrize("stem, message", [
    ("tapas_tabfact_inter_masklm_base_reset", "TabFact table classifier"),
    ("tapas_inter_masklm_base_reset", "pre-trained (masked-LM)"),
    ("tapas_masklm_large", "pre-trained (masked-LM)"),
    ("tapas_base", "pre-trained (masked-LM)"),
    ("my_model", "cannot tell from the name my_model"),
])
def test_release_names_that_answer_no_questions_are_refused(stem, message):
    _one_line_error(lambda: released.release_zip_options(f"https://h/{stem}.zip"), message)


# --- the Hub -------------------------------------------------------------------------------------


def test_hub_model_is_imported_once_then_loaded_without_network(server, fixture_model, forbid_network):
    model_dir = released.released_model_dir(REPO)

    assert model_dir == os.path.join(released.models_cache_dir(), "hub", "test-org--tiny-tapas-finetuned-wtq",
                                     "main")
    manifest = released.read_manifest(model_dir)
    assert manifest["commit"] == server.repos[REPO]["refs"]["main"] and manifest["source"] == "hub"
    assert sorted(manifest["files"]) == ["config.json", "model.safetensors", "vocab.txt"]
    assert [path for _, path, _ in server.requested("GET", "/resolve/")] == [
        f"/{REPO}/resolve/main/config.json", f"/{REPO}/resolve/{manifest['commit']}/model.safetensors",
        f"/{REPO}/resolve/{manifest['commit']}/vocab.txt"]
    loaded = tapas_tf.load_model(model_dir)
    _assert_same_weights(fixture_model["model"], loaded)
    assert loaded.tapas_config.select_one_column and loaded.tapas_config.num_aggregation_labels == 4
    assert loaded.tapas_config.reset_position_index_per_cell  # config.json decides the task settings.

    server.stop()
    attempts = forbid_network()
    assert released.released_model_dir(REPO) == model_dir
    from tapas_tf.qa.table_qa import TableQA  # pylint: disable=import-outside-toplevel

    qa = TableQA.from_pretrained(REPO, threshold=0.4)
    result = qa.answer(TABLE, "which city is the largest?")
    assert result.model == REPO and qa.rule.threshold == 0.4
    assert qa.rule.fallback_to_best_cell  # WTQ's config (answers only) sets the decoding defaults.
    assert attempts == []


def test_offline_mode_with_and_without_a_cached_copy(server, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    _one_line_error(lambda: released.released_model_dir(REPO), REPO, "HF_HUB_OFFLINE",
                    "not in the Hugging Face cache")
    _one_line_error(lambda: released.released_model_dir(server.url + ZIP_PATH), "HF_HUB_OFFLINE")
    assert server.requests == []

    monkeypatch.delenv("HF_HUB_OFFLINE")
    model_dir = released.released_model_dir(REPO)
    server.stop()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert released.released_model_dir(REPO) == model_dir  # Our cache.
    shutil.rmtree(model_dir)
    assert released.released_model_dir(REPO) == model_dir  # Imported again from huggingface_hub's cache.
    assert released.read_manifest(model_dir)["files"] == ["config.json", "model.safetensors", "vocab.txt"]


def test_revisions_by_at_and_by_argument(server, fixture_model):
    config = {**json.loads(fixture_model["hf_files"]["config.json"]), "reset_position_index_per_cell": False}
    files = dict(fixture_model["hf_files"], **{"config.json": json.dumps(config).encode()})
    commit = server.add_repo(REPO, files, revision="no_reset")
    by_at = released.released_model_dir(f"{REPO}@no_reset")
    assert by_at.endswith(os.path.join("test-org--tiny-tapas-finetuned-wtq", "no_reset"))
    assert released.read_manifest(by_at)["commit"] == commit
    assert not tapas_tf.checkpoints.model_dir.load_config(by_at).reset_position_index_per_cell
    assert released.released_model_dir(REPO, revision="no_reset") == by_at
    _one_line_error(lambda: released.released_model_dir(REPO, revision="v9"), f"{REPO} has no revision 'v9'")


def test_wrong_name_is_one_line(server):
    _one_line_error(lambda: released.released_model_dir("test-org/no-such-model"),
                    "test-org/no-such-model: no such model repository on " + server.url)


@pytest.mark.parametrize("change, message", [
    ({"model_type": "bert"}, "is a 'bert' model, not TAPAS"),
    ({"architectures": ["TapasForMaskedLM"]}, "TapasForMaskedLM, a pre-trained masked-LM checkpoint"),
    ({"architectures": ["TapasForSequenceClassification"]},
     "TapasForSequenceClassification, a table classifier"),
    ({"use_gumbel_for_cells": True}, "use_gumbel_for_cells=True"),
])
def test_hub_models_that_cannot_answer_are_refused_before_their_weights(server, fixture_model, change,
                                                                        message):
    config = {**json.loads(fixture_model["hf_files"]["config.json"]), **change}
    files = dict(fixture_model["hf_files"], **{"config.json": json.dumps(config).encode()})
    server.add_repo("test-org/other", files)
    _one_line_error(lambda: released.released_model_dir("test-org/other"), message)
    assert not server.requested("GET", "model.safetensors")


def test_pytorch_only_repository_is_refused_with_the_reason(server, fixture_model):
    files = {"config.json": fixture_model["hf_files"]["config.json"], "pytorch_model.bin": b"pickle"}
    server.add_repo("test-org/bin-only", files)
    _one_line_error(lambda: released.released_model_dir("test-org/bin-only"),
                    "only as pytorch_model.bin, a pickle that can run code")
    assert not server.requested("GET", "pytorch_model.bin")
    server.add_repo("test-org/no-weights", {"config.json": fixture_model["hf_files"]["config.json"]})
    _one_line_error(lambda: released.released_model_dir("test-org/no-weights"), "has no model.safetensors")


def test_unreachable_hub_without_cache_is_one_line(server):
    import time

    server.stop()
    started = time.monotonic()
    _one_line_error(lambda: released.released_model_dir(REPO), "cannot reach", "Connection refused",
                    "not in the Hugging Face cache", "HF_HUB_OFFLINE=1", "tapas-tf import --format=hf")
    assert time.monotonic() - started < 10  # No retries of a Hub that does not answer.


def test_unreachable_hub_with_a_cached_copy_uses_it_at_once(server):
    model_dir = released.released_model_dir(REPO)
    shutil.rmtree(model_dir)  # Our import is gone; huggingface_hub's cache still has the files.
    server.stop()
    assert released.released_model_dir(REPO) == model_dir
    assert released.read_manifest(model_dir)["files"] == ["config.json", "model.safetensors", "vocab.txt"]


# --- release zips ------------------------------------------------------------------------------


def test_release_zip_is_imported_with_its_digest_recorded(server, fixture_model, forbid_network):
    digest = hashlib.sha256(fixture_model["zip"]).hexdigest()
    url = _zip_url(server)
    model_dir = released.released_model_dir(f"{url}#sha256={digest.upper()}")

    manifest = released.read_manifest(model_dir)
    assert manifest["sha256"] == digest and manifest["task"] == "WTQ"
    assert manifest["reset_position_index_per_cell"]
    assert manifest["name"] == ZIP_STEM
    _assert_same_weights(fixture_model["model"], tapas_tf.load_model(model_dir))
    assert not os.listdir(os.path.join(released.models_cache_dir(), "downloads"))  # The zip is not kept.

    server.stop()
    attempts = forbid_network()
    assert released.released_model_dir(url) == model_dir  # No network: the cache.
    assert released.released_model_dir(f"{url}#sha256={digest}") == model_dir
    _one_line_error(lambda: released.released_model_dir(f"{url}#sha256={'0' * 64}"), "the cached copy",
                    f"has SHA-256 {digest}")
    assert attempts == []


def test_checksum_mismatch_deletes_the_download(server):
    url = _zip_url(server)
    _one_line_error(lambda: released.released_model_dir(f"{url}#sha256={'0' * 64}"), "SHA-256 mismatch",
                    "was deleted")
    assert not os.path.exists(_part_path(url)) and not os.path.exists(released.cached_model_dir(
        released.parse_name(url)))


def test_partial_download_is_resumed_with_a_range_request(server, fixture_model):
    url = _zip_url(server)
    data = fixture_model["zip"]
    os.makedirs(os.path.dirname(_part_path(url)))
    with open(_part_path(url), "wb") as f:
        f.write(data[:1000])

    model_dir = released.released_model_dir(url)

    (_, _, headers), = server.requested("GET", ZIP_PATH)
    assert headers["Range"] == "bytes=1000-"
    assert released.read_manifest(model_dir)["sha256"] == hashlib.sha256(data).hexdigest()
    assert not os.path.exists(_part_path(url))


def test_broken_transfer_keeps_the_part_and_the_next_call_resumes(server, fixture_model):
    url = _zip_url(server)
    data = fixture_model["zip"]
    server.cut_after[ZIP_PATH] = 700
    _one_line_error(lambda: released.released_model_dir(url), f"stopped at 700 of {len(data):,} bytes",
                    "run again to resume")
    assert os.path.getsize(_part_path(url)) == 700

    del server.cut_after[ZIP_PATH]
    model_dir = released.released_model_dir(url)
    first, second = server.requested("GET", ZIP_PATH)
    assert "Range" not in first[2] and second[2]["Range"] == "bytes=700-" and second[2]["If-Range"]
    _assert_same_weights(fixture_model["model"], tapas_tf.load_model(model_dir))


def test_truncated_zip_file_is_refused_and_deleted(server, fixture_model):
    url = server.add_file("/tapas_models/tapas_sqa_tiny.zip", fixture_model["zip"][:-200])
    _one_line_error(lambda: released.released_model_dir(url), "not a valid zip file", "deleted")
    assert not os.listdir(os.path.join(released.models_cache_dir(), "downloads"))


def test_missing_zip_and_unknown_release_kinds(server, fixture_model):
    missing = server.url + "/tapas_models/tapas_sqa_nope.zip"
    _one_line_error(lambda: released.released_model_dir(missing), "HTTP 404")
    url = server.add_file("/tapas_models/tapas_tabfact_tiny.zip", fixture_model["zip"])
    _one_line_error(lambda: released.released_model_dir(url), "TabFact")
    assert not server.requested("GET", "tabfact")


def test_download_file_starts_over_when_the_file_changed(server, tmp_path):
    url = server.add_file("/file.bin", b"new content " * 1000)
    target = str(tmp_path / "file.bin")
    with open(target + ".part", "wb") as f:
        f.write(b"old content")
    with open(target + ".part.json", "w") as f:
        json.dump({"validator": '"old-etag"'}, f)
    digest = download.download_file(url, target)
    with open(target, "rb") as f:
        assert f.read() == b"new content " * 1000
    assert digest == hashlib.sha256(b"new content " * 1000).hexdigest()
    assert server.requested("GET", "/file.bin")[0][2]["If-Range"] == '"old-etag"'


# --- the command line ----------------------------------------------------------------------------


def _ask(*args, env):
    environment = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", **env}
    return subprocess.run([sys.executable, "-m", "tapas_tf.ask", *args], capture_output=True, text=True,
                          timeout=600, cwd=ROOT, env=environment)


def test_ask_answers_with_a_released_model(server, tmp_path):
    table = tmp_path / "cities.csv"
    TABLE.to_csv(table, index=False)
    result = _ask("--model=test-org/no-such-model", f"--table={table}", "which city?", env={})
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.strip().splitlines() == [
        (f"ask: error: test-org/no-such-model: no such model repository on {server.url} (a private one "
         "needs a token: hf auth login, or HF_TOKEN)")]
    result = _ask(f"--model={REPO}", f"--table={table}", "which city is the largest?", env={})
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Q: which city is the largest?" in result.stdout and "\nA: " in result.stdout
    assert f"answered by: {REPO}" in result.stdout


def test_ask_refuses_model_and_model_dir_together(tmp_path):
    table = tmp_path / "t.csv"
    table.write_text("a\n1\n")
    result = _ask(f"--model={WTQ_BASE}", f"--model_dir={tmp_path}", f"--table={table}", "q", env={})
    assert result.returncode == 2 and result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ask: error: ") and "not both" in lines[0], result.stderr
    result = _ask("--model_revision=main", f"--table={table}", "q", env={})
    assert result.returncode == 2 and "--model_revision needs --model" in result.stderr
