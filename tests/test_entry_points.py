"""The usages of the design card and every entry point earlier releases' docs gave, in fresh processes.

Each is run as a user types it (`python beam_jobs/create_pretrain_data.py ...`, `python run_task.py
--task=SQA --mode=train ...`, `python -m tapas_tf.sample_data ...`), on tiny inputs the tests write,
and each test checks the work, not the exit code alone: records written and counted, a checkpoint
saved, a SavedModel that loads with its signatures and answers a serialized example.
"""

import glob
import json
import os
import subprocess
import sys

import pytest

from tapas_tf.cli import runner
from tapas_tf.cli.subcommands import SUBCOMMANDS
from tests.wikipedia.dump_fixtures import FixturePage, write_multistream

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HF_FIXTURE = os.path.join(ROOT, "tests", "fixtures", "tabfact_hf")  # A Hugging Face TAPAS checkpoint.
TABLE = ('{| class="wikitable"\n! Nation !! Gold !! Silver\n|-\n| Norway || 4 || 2\n|-\n| Sweden || 3 || 5\n'
         '|-\n| Finland || 1 || 1\n|}')
PAGES = [FixturePage("Winter games", "The '''Winter games''' were held in 1990.\n\n== Medals ==\n"
                     "The table lists the medals won by each nation.\n" + TABLE, page_id=1),
         FixturePage("Old games", "", page_id=2, redirect="Winter games")]


def _python(*args: str, cwd, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=cwd, timeout=timeout)


def _records(pattern: str) -> int:
    import tensorflow as tf

    return sum(1 for path in glob.glob(pattern) for _ in tf.data.TFRecordDataset(path))


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """A directory with a two-page multistream dump and the SQA sample (written by the old alias)."""
    root = tmp_path_factory.mktemp("entry_points")
    write_multistream(str(root / "dump.xml.bz2"), str(root / "index.txt.bz2"), PAGES, pages_per_stream=1)
    result = _python("-m", "tapas_tf.sample_data", "--output_dir=sample", cwd=root)
    assert result.returncode == 0, result.stderr[-2000:]
    return root


def test_python_m_sample_data_writes_the_sample(workspace):
    files = sorted(os.listdir(workspace / "sample"))
    assert files == ["random-split-1-dev.tsv", "random-split-1-train.tsv", "table_csv", "test.tsv"]
    assert len((workspace / "sample" / "random-split-1-train.tsv").read_text().splitlines()) == 10  # header + 9


@pytest.mark.parametrize("script, flag", [("create_pretrain_data.py", "--input_dumps"),
                                          ("create_task_data.py", "--task")])
def test_every_beam_job_script_prints_its_usage(workspace, script, flag):
    result = _python(os.path.join(ROOT, "beam_jobs", script), "--help", cwd=workspace)
    assert result.returncode == 0, result.stderr[-2000:]
    assert flag in result.stdout and result.stdout.count("\n") > 10  # The docstring, then the flags.


def test_every_beam_job_file_runs_its_job_when_executed():
    for path in glob.glob(os.path.join(ROOT, "beam_jobs", "*.py")):
        if os.path.basename(path) == "__init__.py":
            continue
        with open(path, encoding="utf-8") as f:
            assert 'if __name__ == "__main__":' in f.read(), f"{path} does nothing when it is executed"


def test_pretrain_script_on_the_direct_runner_writes_and_counts_examples(workspace):
    out = workspace / "pretrain"
    result = _python(os.path.join(ROOT, "beam_jobs", "create_pretrain_data.py"), "--runner=DirectRunner",
                     f"--input_dumps={workspace / 'dump.xml.bz2'}", f"--output_dir={out}",
                     "--noprogress_bar", cwd=workspace)
    assert result.returncode == 0, result.stderr[-3000:]
    printed = json.loads(result.stdout)
    report = json.loads((out / "pretrain_report.json").read_text())
    assert printed == report["counters"]
    written = report["counters"]["examples_written_train"]
    assert written > 0 and written == _records(str(out / "tf_examples" / "train-*.tfrecord"))
    assert report["counters"].get("examples_written_test", 0) == _records(str(out / "tf_examples" / "test-*.tfrecord"))
    assert report["counters"]["pages_with_tables"] == 1


def test_pretrain_script_translates_a_dataflow_job_without_submitting_it(workspace):
    result = _python(os.path.join(ROOT, "beam_jobs", "create_pretrain_data.py"), "--runner=DataflowRunner",
                     "--project=tapas-test", "--region=us-central1", "--temp_location=gs://tapas-test-bucket/tmp",
                     "--dry_run=True", f"--input_dumps={workspace / 'dump.xml.bz2'}",
                     f"--output_dir={workspace / 'dataflow_out'}", cwd=workspace, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Dry run: the job graph was translated" in result.stdout and "tapas_tf-" in result.stdout
    assert not (workspace / "dataflow_out" / "pretrain_report.json").exists()


def test_pretrain_script_refuses_a_misspelt_flag_in_one_line(workspace):
    result = _python(os.path.join(ROOT, "beam_jobs", "create_pretrain_data.py"), "--input_dump=x",
                     "--output_dir=o", cwd=workspace)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "create_pretrain_data.py: error: unknown flag --input_dump=x; did you mean --input_dumps?"]


@pytest.fixture(scope="module")
def task_data(workspace):
    """`python beam_jobs/create_task_data.py --task=SQA ...` on the sample: OUT/data."""
    result = _python(os.path.join(ROOT, "beam_jobs", "create_task_data.py"), "--task=SQA", "--input_dir=sample",
                     "--output_dir=data", "--max_seq_length=128", "--runner=DirectRunner", "--noprogress_bar",
                     cwd=workspace)
    assert result.returncode == 0, result.stderr[-3000:]
    return workspace / "data"


def test_task_data_script_writes_and_counts_examples(task_data):
    report = json.loads((task_data / "conversion_report.json").read_text())
    assert report["splits"]["train"]["examples_written"] == 9 == _records(str(task_data / "tf_examples" / "train.tfrecord"))
    assert report["splits"]["dev"]["examples_written"] == _records(str(task_data / "tf_examples" / "dev.tfrecord")) > 0


def test_run_task_trains_then_exports_a_savedmodel_for_tf_serving(workspace, task_data):
    import tensorflow as tf

    result = _python("run_task.py", "--task=SQA", "--mode=train", f"--output_dir={task_data}",
                     f"--model_dir={workspace / 'sqa_tiny'}", "--model_size=tiny", "--max_seq_length=128",
                     "--train_steps=2", "--train_batch_size=2", "--noprogress_bar", cwd=ROOT)
    assert result.returncode == 0, result.stderr[-3000:]
    checkpoint = tf.train.latest_checkpoint(str(workspace / "sqa_tiny" / "checkpoints"))
    assert checkpoint is not None and checkpoint.endswith("-2")

    result = _python("run_task.py", "--task=SQA", "--mode=export", f"--model_dir={workspace / 'sqa_tiny'}",
                     f"--export_dir={workspace / 'export'}", cwd=ROOT)
    assert result.returncode == 0, result.stderr[-3000:]
    loaded = tf.saved_model.load(str(workspace / "export" / "1"))
    assert set(loaded.signatures) == {"serving_default", "predict_features"}
    serialized = [r.numpy() for r in tf.data.TFRecordDataset(str(task_data / "tf_examples" / "dev.tfrecord"))]
    outputs = loaded.signatures["serving_default"](examples=tf.constant(serialized[:2]))
    probabilities = outputs["probabilities"].numpy()
    assert probabilities.shape[0] == 2 and ((probabilities >= 0) & (probabilities <= 1)).all()


def test_run_task_pre_trains_on_the_pretrain_scripts_examples(workspace):
    import tensorflow as tf

    out = workspace / "pretrain_for_training"
    result = _python(os.path.join(ROOT, "beam_jobs", "create_pretrain_data.py"),
                     f"--input_dumps={workspace / 'dump.xml.bz2'}", f"--output_dir={out}", "--noprogress_bar",
                     cwd=workspace)
    assert result.returncode == 0, result.stderr[-3000:]
    result = _python("run_task.py", "--task=PRETRAIN", "--mode=train", f"--output_dir={out}",
                     f"--model_dir={workspace / 'pretrained'}", "--model_size=tiny", "--train_steps=2",
                     "--train_batch_size=2", "--noprogress_bar", cwd=ROOT)
    assert result.returncode == 0, result.stderr[-3000:]
    assert tf.train.latest_checkpoint(str(workspace / "pretrained" / "checkpoints")).endswith("-2")


def test_python_m_import_checkpoint_imports_a_hugging_face_directory(workspace):
    result = _python("-m", "tapas_tf.import_checkpoint", "--format=hf", f"--source={HF_FIXTURE}",
                     f"--model_dir={workspace / 'imported'}", cwd=workspace)
    assert result.returncode == 0, result.stderr[-3000:]
    config = json.loads((workspace / "imported" / "tapas_config.json").read_text())
    assert config["num_hidden_layers"] >= 1
    assert glob.glob(str(workspace / "imported" / "checkpoints" / "*.index"))


def test_python_m_init_from_bert_writes_a_model_directory(workspace):
    result = _python("-m", "tapas_tf.init_from_bert", f"--model_dir={workspace / 'minilm'}", "--task=SQA",
                     cwd=workspace)
    assert result.returncode == 0, result.stderr[-3000:]
    config = json.loads((workspace / "minilm" / "tapas_config.json").read_text())
    assert (config["num_hidden_layers"], config["hidden_size"]) == (6, 384)
    assert glob.glob(str(workspace / "minilm" / "checkpoints" / "*.index"))


@pytest.mark.parametrize("args", [["-m", "tapas_tf.commands.verify"], ["-m", "tapas_tf.commands.collect_tables"],
                                  ["-m", "tapas_tf.commands.run_task"], ["experiments/bundle_model.py"]])
def test_module_aliases_run_their_command(args):
    result = _python(*args, "--help", cwd=ROOT)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "--model_dir" in result.stdout or "--interactions" in result.stdout


def test_every_command_module_runs_its_subcommand_when_executed():
    for name, sub in SUBCOMMANDS.items():
        path = os.path.join(ROOT, *sub.module.split(".")) + ".py"
        with open(path, encoding="utf-8") as f:
            source = f.read()
        assert 'if __name__ == "__main__":' in source, f"python -m {sub.module} would do nothing"
        if sub.mode is None:
            assert runner.subcommand_of_module(sub.module) == name


def test_a_replaced_script_names_its_command_in_one_line():
    result = _python("experiments/synthetic_tables.py", "--interactions=x", cwd=ROOT)
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert "tapas-tf collect-tables" in line
