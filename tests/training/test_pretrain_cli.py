"""run_task.py --task=PRETRAIN: train the masked-LM model, then evaluate it, in subprocesses.

Masked-LM examples are made in process (no Beam run) from three small tables with the test
vocabulary, at the PRETRAIN defaults (128 tokens, 20 predictions), and written where the
pre-training data job writes them: OUTPUT_DIR/tf_examples/{train,test}-00000-of-00001.tfrecord.
"""

import json
import os
import subprocess
import sys

import pytest
import tensorflow as tf

from tapas_tf.checkpoints import model_dir as model_dir_lib
from tapas_tf.data.protos import interaction_pb2
from tapas_tf.features.pretrain_config import PretrainConfig
from tapas_tf.features.pretrain_examples import PretrainExample, PretrainExampleMaker
from tapas_tf.features.tokenization import TapasTokenizer
from tapas_tf.training.masked_lm_eval import LOCATIONS, TARGETS
from tests.conversion_fixtures import make_table
from tests.vocab_fixture import vocab_tokens, write_test_vocab

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# (table id, header, rows, text)
TABLES = [
    ("cities", ["city", "country", "population"],
     [["paris", "france", "2"], ["berlin", "germany", "4"], ["london", "england", "9"]],
     "the capital city of france is paris and the capital of germany is berlin"),
    ("medals", ["nation", "gold", "silver"], [["france", "10", "7"], ["germany", "8", "12"]],
     "the nation with the most gold medals won the first place in the games"),
    ("players", ["player", "team", "goals"], [["john smith", "red", "3"], ["mary smith", "blue", "5"]],
     "the player with the highest number of goals in the season was mary smith"),
]


def _write_examples(path: str, maker: PretrainExampleMaker, tables) -> int:
    count = 0
    with tf.io.TFRecordWriter(path) as writer:
        for table_id, header, rows, text in tables:
            interaction = interaction_pb2.Interaction(id=table_id)
            interaction.table.CopyFrom(make_table(table_id, header, rows))
            interaction.questions.add(id="TITLE", original_text=text)
            for example in maker.make(interaction):
                assert isinstance(example, PretrainExample), example
                writer.write(example.to_tf_example().SerializeToString())
                count += 1
    return count


@pytest.fixture(scope="module")
def output_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("pretrain")
    vocab = write_test_vocab(root / "vocab.txt")
    maker = PretrainExampleMaker(PretrainConfig(vocab_file=vocab, dupe_factor=4), TapasTokenizer(vocab))
    os.makedirs(root / "tf_examples")
    assert _write_examples(str(root / "tf_examples" / "train-00000-of-00001.tfrecord"), maker, TABLES) == 12
    assert _write_examples(str(root / "tf_examples" / "test-00000-of-00001.tfrecord"), maker, TABLES[:1]) == 4
    # As the pre-training job does: evaluate finds the examples' vocabulary here.
    (root / "pretrain_report.json").write_text(json.dumps({"config": {"vocab_file": str(vocab)}}))
    return root


def _run_task(*args: str, cwd) -> subprocess.CompletedProcess:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    env.pop("TAPAS_TF_DEBUG", None)
    return subprocess.run([sys.executable, os.path.join(ROOT, "run_task.py"), *args], cwd=str(cwd), env=env,
                          capture_output=True, text=True, timeout=240)


def _scalars(directory: str) -> dict:
    """{tag: [(step, value), ...]} of the TensorBoard event files in `directory`."""
    scalars = {}
    for name in sorted(os.listdir(directory)):
        if name.startswith("events."):
            for event in tf.compat.v1.train.summary_iterator(os.path.join(directory, name)):
                for value in event.summary.value:
                    scalars.setdefault(value.tag, []).append((event.step, float(tf.make_ndarray(value.tensor))))
    return scalars


def test_pretrain_train_then_evaluate(output_dir, tmp_path):
    model_dir = tmp_path / "model"
    result = _run_task("--task=PRETRAIN", "--mode=train", f"--output_dir={output_dir}", f"--model_dir={model_dir}",
                       "--model_size=tiny", f"--model_option=vocab_size={len(vocab_tokens())}",
                       "--model_option=hidden_dropout_prob=0.0", "--train_steps=20", "--train_batch_size=4",
                       "--learning_rate=1e-3", "--log_steps=5", "--seed=1", "--noprogress_bar", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    # A self-describing masked-LM model directory.
    assert model_dir_lib.load_model_kind(str(model_dir)) == model_dir_lib.MASKED_LM
    assert model_dir_lib.load_config(str(model_dir)).hidden_size == 128  # tiny
    assert model_dir_lib.latest_checkpoint(str(model_dir)).endswith("ckpt-20")
    saved = json.load(open(model_dir / "train" / "train_config.json"))
    # PRETRAIN's preset where no flag is given.
    assert (saved["max_seq_length"], saved["max_predictions_per_seq"], saved["warmup_ratio"]) == (128, 20, 0.01)
    losses = [value for _, value in _scalars(str(model_dir / "train"))["mlm_loss"]]
    assert len(losses) == 4 and losses[-1] < losses[0], losses

    # A masked-LM directory is not a question-answering model.
    with pytest.raises(ValueError, match="masked-LM model"):
        model_dir_lib.load_model(str(model_dir))

    result = _run_task("--task=PRETRAIN", "--mode=evaluate", f"--output_dir={output_dir}",
                       f"--model_dir={model_dir}", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    metrics = json.load(open(model_dir / "eval_pretrain" / "metrics.json"))
    assert set(metrics) == {"accuracy", "predictions", "mlm_loss", "examples", "checkpoint", "step", "eval_file",
                            "soft_number_accuracy", "number_pieces"}
    assert set(metrics["soft_number_accuracy"]) == set(LOCATIONS)
    assert (metrics["examples"], metrics["step"]) == (4, 20)
    for key in ("accuracy", "predictions"):
        assert set(metrics[key]) == set(LOCATIONS)
        assert all(set(row) == set(TARGETS) for row in metrics[key].values())
    assert 0.0 <= metrics["accuracy"]["all"]["all"] <= 1.0
    assert metrics["predictions"]["all"]["all"] == pytest.approx(
        sum(metrics["predictions"][location]["all"] for location in LOCATIONS[1:]))
    assert metrics["predictions"]["all"]["all"] > 0 and metrics["mlm_loss"] > 0
    scalars = _scalars(str(model_dir / "eval_pretrain"))
    assert scalars["masked_lm_accuracy/all_all"] == [(20, pytest.approx(metrics["accuracy"]["all"]["all"]))]


def test_pretrain_evaluate_refuses_a_question_answering_model(output_dir, tmp_path):
    from tapas_tf.models.config import TapasConfig

    model_dir = str(tmp_path / "qa")
    model_dir_lib.save_config(model_dir, TapasConfig.from_preset("tiny"))  # No model_kind.json: QA.
    result = _run_task("--task=PRETRAIN", "--mode=evaluate", f"--output_dir={output_dir}",
                       f"--model_dir={model_dir}", cwd=tmp_path)
    assert result.returncode == 1
    assert f"run_task.py: error: {model_dir} holds a question_answering model" in result.stderr


def test_fine_tuning_starts_from_the_pretrained_encoder_and_reports_it(output_dir, tmp_path):
    """PRETRAIN -> SQA: the encoder comes from the masked-LM model, the heads start fresh, and
    MODEL_DIR/init_report.json says which is which."""
    from tapas_tf.beam_jobs.create_task_data import run_create_data
    from tapas_tf.data.sample_data import write_sample
    from tapas_tf.features.conversion_config import ConversionConfig
    from tapas_tf.task_registry.presets import Task

    pretrained = tmp_path / "pretrained"
    common = (f"--model_option=vocab_size={len(vocab_tokens())}", "--train_batch_size=4", "--noprogress_bar")
    result = _run_task("--task=PRETRAIN", "--mode=train", f"--output_dir={output_dir}", f"--model_dir={pretrained}",
                       "--model_size=tiny", "--train_steps=3", *common, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    write_sample(str(tmp_path / "sqa"))
    run_create_data(Task.SQA, str(tmp_path / "sqa"), str(tmp_path / "sqa_data"),
                    ConversionConfig(vocab_file=str(output_dir / "vocab.txt"), max_seq_length=128),
                    ["--direct_num_workers=1"])
    fine_tuned = tmp_path / "fine_tuned"
    result = _run_task("--task=SQA", "--mode=train", f"--output_dir={tmp_path / 'sqa_data'}",
                       f"--model_dir={fine_tuned}", "--model_size=tiny", "--max_seq_length=128", "--train_steps=2",
                       f"--init_checkpoint={pretrained}", *common, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.load(open(fine_tuned / "init_report.json"))
    assert report["init_checkpoint"] == str(pretrained)
    assert {"embeddings", "layer_0", "layer_1"} <= set(report["loaded"])
    assert report["fresh_weights"] and not any("encoder" in name for name in report["fresh_weights"])
    assert model_dir_lib.load_model_kind(str(fine_tuned)) == model_dir_lib.QUESTION_ANSWERING
