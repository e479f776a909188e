"""The training loop: fitting, optimiser, distribution, kill and resume, initialisation, the CLI.

A tiny model (hidden 32, 2 layers, dropout off) trains on the eight fixture examples of
tests/test_input_pipeline.py (max_seq_length 64). Runs that must not share a process with the
others (two logical CPU devices, a SIGKILL) run in subprocesses.
"""

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import json  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import textwrap  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

from tapas_tf.checkpoints import model_dir as model_dir_lib  # noqa: E402
from tapas_tf.models.config import TapasConfig  # noqa: E402
from tapas_tf.models.encoder import TapasEncoder  # noqa: E402
from tapas_tf.models.qa_model import TapasForQuestionAnswering, dummy_features  # noqa: E402
from tapas_tf.task_registry.presets import Task  # noqa: E402
from tapas_tf.training import distribution, input_pipeline, trainer as training  # noqa: E402
from tapas_tf.training.config import (  # noqa: E402
    TrainConfig,
    base_model_config,
    model_config_for_task,
    parse_overrides,
    train_config_for_task,
)
from tests.training.test_input_pipeline import NUM_EXAMPLES, SEQ  # noqa: E402
from tests.model_fixtures import tiny_config  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TINY_CONFIG = tiny_config(max_position_embeddings=SEQ)


def tiny_configs(train_file: str, **train_options):
    """The SQA model config on the tiny encoder, and a training config (overridable).

    float32, whatever the machine (the default picks bfloat16 on CPUs that have it): the tests
    compare runs, and reloaded models, with float32 tolerances.
    """
    model_config = model_config_for_task(Task.SQA, TINY_CONFIG)
    values = dict(train_steps=10, train_batch_size=NUM_EXAMPLES, learning_rate=1e-2, warmup_ratio=0.0,
                  max_seq_length=SEQ, use_xla=False, log_steps=5, save_checkpoints_steps=100,
                  shuffle_buffer=1, seed=1, show_progress=False, precision="float32")
    values.update(train_options)
    return model_config, train_config_for_task(Task.SQA, train_file, **values)


def _run_script(script: str, *args: str, timeout: int = 240) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": ROOT, "TF_CPP_MIN_LOG_LEVEL": "2"}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script), *args], capture_output=True,
                          text=True, timeout=timeout, cwd=ROOT, env=env)


@pytest.fixture(scope="module")
def fitted(data, tmp_path_factory):
    """A tiny model trained 60 steps on all eight examples at once."""
    model_dir = str(tmp_path_factory.mktemp("fitted"))
    model_config, train_config = tiny_configs(data, train_steps=60, warmup_ratio=0.1, log_steps=20,
                                              save_checkpoints_steps=30)
    losses = []
    result = training.train(model_config, train_config, model_dir, distribution.get_strategy("one_device"),
                            on_step_end=lambda step, values: losses.append(values["total_loss"]))
    return result, losses, model_dir, model_config


# --- (a) fitting, and the model directory it leaves ---

def test_tiny_model_fits_the_fixture_examples(fitted, data):
    result, losses, model_dir, _ = fitted
    assert result.step == 60 and len(losses) == 60
    assert losses[-1] < losses[0] / 10, (losses[0], losses[-1])
    features = next(iter(input_pipeline.make_dataset(data, SEQ, NUM_EXAMPLES, training=False)))
    probabilities = result.model(features, training=False)["probabilities"].numpy()
    np.testing.assert_array_equal(probabilities > 0.5, features["label_ids"].numpy() == 1)
    # The last checkpoint is the trained model.
    restored = model_dir_lib.load_model(model_dir)
    np.testing.assert_allclose(restored(features, training=False)["probabilities"].numpy(), probabilities,
                               atol=1e-6)


def test_model_dir_holds_config_checkpoints_and_summaries(fitted):
    _, _, model_dir, model_config = fitted
    assert model_dir_lib.load_config(model_dir) == model_config
    assert model_dir_lib.latest_checkpoint(model_dir).endswith("ckpt-60")
    assert sorted(f for f in os.listdir(model_dir_lib.checkpoint_dir(model_dir)) if f.endswith(".index")) == [
        "ckpt-30.index", "ckpt-60.index"]
    scalars = _scalars(os.path.join(model_dir, training.TRAIN_DIR))
    assert sorted(scalars) == ["aggregation_loss", "answer_loss", "examples_per_second", "gradient_norm",
                               "learning_rate", "selection_loss", "total_loss"]
    assert [step for step, _ in scalars["total_loss"]] == [20, 40, 60]
    # Warm-up 6 steps to 1e-2, then linear decay to 0 at step 60: the rate of step 60 is 1/54 of it.
    np.testing.assert_allclose(scalars["learning_rate"][-1][1], 1e-2 / 54, rtol=1e-4)
    saved = json.load(open(os.path.join(model_dir, training.TRAIN_DIR, training.TRAIN_CONFIG_FILE)))
    assert saved["train_steps"] == 60 and saved["train_file"].endswith("train.tfrecord")


def test_finished_run_does_nothing_and_other_config_fails(fitted):
    _, _, model_dir, model_config = fitted
    data_file = json.load(open(os.path.join(model_dir, training.TRAIN_DIR, training.TRAIN_CONFIG_FILE)))["train_file"]
    _, train_config = tiny_configs(data_file, train_steps=60)
    assert training.train(model_config, train_config, model_dir).step == 60
    with pytest.raises(ValueError, match=r"another model config \(temperature: 1.0 there, 0.5 now\)"):
        training.train(model_config.replace(temperature=0.5), train_config, model_dir)


# --- optimiser ---

def test_learning_rate_warms_up_then_decays_to_zero():
    config = TrainConfig(train_file="x", train_steps=100, train_batch_size=1, learning_rate=1.0, warmup_ratio=0.2)
    _, schedule = training.build_optimizer(config)
    rates = [float(schedule(step)) for step in (0, 10, 20, 60, 100)]
    np.testing.assert_allclose(rates, [0.0, 0.5, 1.0, 0.5, 0.0], atol=1e-6)


def test_weight_decay_skips_layer_norm_and_bias():
    model = TapasForQuestionAnswering(model_config_for_task(Task.SQA, TINY_CONFIG))
    model(dummy_features(), training=False)
    config = TrainConfig(train_file="x", train_steps=10, train_batch_size=1, learning_rate=0.1, warmup_ratio=0.0)
    optimizer, _ = training.build_optimizer(config)
    before = {v.name: v.numpy() for v in model.trainable_variables}
    # With zero gradients Adam moves nothing; only the decoupled decay, lr * 0.01 * w, remains.
    optimizer.apply_gradients([(tf.zeros_like(v), v) for v in model.trainable_variables])
    after = {v.name: v.numpy() for v in model.trainable_variables}
    kept = sorted(name for name in before if np.array_equal(before[name], after[name]))
    decayed = sorted(name for name in before if np.allclose(after[name], before[name] * (1 - 0.1 * 0.01),
                                                            rtol=1e-6, atol=0) and name not in kept)
    assert len(kept) + len(decayed) == len(before)
    assert all(("bias" in name or "LayerNorm" in name or "layer_norm" in name) for name in kept)
    assert any("embeddings/LayerNorm/gamma" in name for name in kept)
    assert any(name.endswith("cell_selection/output_bias:0") for name in kept)
    assert any("word_embeddings" in name for name in decayed)
    assert any(name.endswith("cell_selection/output_weights:0") for name in decayed)


def test_bad_train_configs_are_named(data):
    with pytest.raises(ValueError, match="train_steps must be an int >= 1"):
        tiny_configs(data, train_steps=0)
    with pytest.raises(ValueError, match=r"train_batch_size \(8\) is not divisible by gradient_accumulation_steps \(3\)"):
        tiny_configs(data, gradient_accumulation_steps=3)
    with pytest.raises(ValueError, match="warmup_ratio must be in"):
        tiny_configs(data, warmup_ratio=1.5)
    with pytest.raises(ValueError, match="Unknown TapasConfig options: hidden_sise"):
        model_config_for_task(Task.SQA, TapasConfig.from_preset("tiny"), hidden_sise=3)
    with pytest.raises(ValueError, match="not both"):
        base_model_config("tiny", "config.json")
    assert parse_overrides(["hidden_dropout_prob=0.0", "hidden_act=relu", "huber_loss_delta=null"]) == {
        "hidden_dropout_prob": 0.0, "hidden_act": "relu", "huber_loss_delta": None}
    with pytest.raises(ValueError, match="name=value"):
        parse_overrides(["temperature"])


def test_task_preset_is_merged_under_overrides():
    config = model_config_for_task(Task.WTQ, TapasConfig.from_preset("tiny"), temperature=0.5)
    assert (config.temperature, config.num_aggregation_labels, config.use_answer_as_supervision) == (0.5, 4, True)
    assert (config.huber_loss_delta, config.init_cell_selection_weights_to_zero) == (0.121194, True)
    train_config = train_config_for_task(Task.WTQ, "f", train_steps=5)
    assert (train_config.train_steps, train_config.learning_rate, train_config.gradient_clipping) == (
        5, 1.93581e-5, 10.0)


def test_pretrain_preset_reads_masked_lm_examples():
    config = train_config_for_task(Task.PRETRAIN, "f")
    assert (config.learning_rate, config.warmup_ratio, config.max_seq_length, config.max_predictions_per_seq) == (
        5e-5, 0.01, 128, 20)
    assert training.model_kind(config) == model_dir_lib.MASKED_LM
    assert train_config_for_task(Task.SQA, "f").max_predictions_per_seq is None
    with pytest.raises(ValueError, match="max_predictions_per_seq is for PRETRAIN"):
        train_config_for_task(Task.SQA, "f", max_predictions_per_seq=20)


# --- (b) MirroredStrategy over two logical CPUs = one device = gradient accumulation ---

_DISTRIBUTED = """
    import json, os, sys
    os.environ["TF_USE_LEGACY_KERAS"] = "1"
    import tensorflow as tf
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    from tapas_tf.training import distribution
    from tapas_tf.training import trainer as training
    from tests.training.test_trainer import tiny_configs
    data, out = sys.argv[1], sys.argv[2]
    runs = {"one_device": ("one_device", 1, False), "mirrored": ("mirrored", 1, True),
            "accumulated": ("one_device", 2, False)}
    results = {}
    for name, (strategy_name, micro_batches, xla) in runs.items():
        # Batches of 4 examples: each step sees other examples; clipping acts on every step.
        model_config, train_config = tiny_configs(data, train_steps=4, train_batch_size=4,
            gradient_accumulation_steps=micro_batches, use_xla=xla, gradient_clipping=0.5, warmup_ratio=0.0)
        strategy = distribution.get_strategy(strategy_name)
        values = []
        training.train(model_config, train_config, os.path.join(out, name), strategy,
                       on_step_end=lambda step, v: values.append(v))
        results[name] = {"replicas": strategy.num_replicas_in_sync, "values": values}
    print("RESULT " + json.dumps(results))
"""


def test_mirrored_and_accumulated_training_match_one_device(data, tmp_path):
    result = _run_script(_DISTRIBUTED, data, str(tmp_path))
    assert result.returncode == 0, result.stderr[-3000:]
    runs = json.loads(result.stdout.split("RESULT ", 1)[1])
    assert [runs[name]["replicas"] for name in ("one_device", "mirrored", "accumulated")] == [1, 2, 1]
    reference = runs["one_device"]["values"]
    assert reference[0]["gradient_norm"] > 0.5  # So clipping changed the update.
    for name in ("mirrored", "accumulated"):
        for step, (expected, actual) in enumerate(zip(reference, runs[name]["values"]), start=1):
            for key in ("total_loss", "selection_loss", "gradient_norm", "learning_rate"):
                assert actual[key] == pytest.approx(expected[key], abs=1e-4), (name, step, key)
    # The losses move, so equal losses at step 4 mean equal updates before it.
    assert reference[-1]["total_loss"] != pytest.approx(reference[0]["total_loss"], abs=1e-2)


# --- length buckets ---


def test_loss_and_gradients_are_the_same_padded_to_the_bucket_or_to_max_seq_length(data):
    model_config, _ = tiny_configs(data)
    model = TapasForQuestionAnswering(model_config)
    model(dummy_features(1, 8), training=False)
    full = next(iter(input_pipeline.make_dataset(data, SEQ, NUM_EXAMPLES, training=False)))
    assert int(tf.reduce_max(input_pipeline.real_length(full["input_mask"]))) <= 24
    cut = {name: value[:, :24] if name in input_pipeline.TOKEN_FEATURES else value
           for name, value in full.items()}
    compute = training._gradient_function(model, 1, 1.0)
    (full_grads, full_values), (cut_grads, cut_values) = compute(full), compute(cut)
    assert cut_values["total_loss"].numpy() > 0.1
    for name in training.LOSS_TERMS:
        np.testing.assert_allclose(cut_values[name].numpy(), full_values[name].numpy(), atol=1e-5,
                                   err_msg=name)
    assert sum(g is not None for g in full_grads) > 10
    for variable, expected, actual in zip(model.trainable_variables, full_grads, cut_grads):
        assert (expected is None) == (actual is None), variable.name
        if expected is not None:
            np.testing.assert_allclose(actual.numpy(), expected.numpy(), atol=1e-5, err_msg=variable.name)


def test_logged_terms_add_up_to_the_loss_and_weak_supervision_logs_where_examples_go(data):
    features = next(iter(input_pipeline.make_dataset(data, SEQ, NUM_EXAMPLES, training=False)))
    sqa_config, train_config = tiny_configs(data)
    sqa_model = TapasForQuestionAnswering(sqa_config)
    assert training.loss_terms(train_config, sqa_model) == training.LOSS_TERMS
    wtq_config = model_config_for_task(Task.WTQ, TINY_CONFIG)
    model = TapasForQuestionAnswering(wtq_config)
    terms = training.loss_terms(train_config, model)
    assert set(terms) == {"total_loss", "selection_loss", "aggregation_loss", "answer_loss",
                          "aggregate_fraction", "answer_cut_fraction"}
    # Half the examples get a scalar answer far from anything the table sums to: they go to
    # aggregation, and the answer loss of every one of them is over WTQ's cutoff.
    answer = np.full([NUM_EXAMPLES], np.nan, np.float32)
    answer[::2] = 1e6
    features = {**features, "answer": tf.constant(answer)}
    _, values = training._gradient_function(model, 1, 1.0, terms)(features)
    values = {name: float(value) for name, value in values.items()}
    assert values["aggregate_fraction"] == pytest.approx(0.5)
    assert values["answer_cut_fraction"] == pytest.approx(0.5)
    assert values["answer_loss"] == 0.0
    np.testing.assert_allclose(values["selection_loss"] + values["aggregation_loss"] + values["answer_loss"],
                               values["total_loss"], rtol=1e-5)


def test_bucketed_training_traces_its_step_once(data, tmp_path, monkeypatch):
    steps = []
    make_train_step = training._make_train_step
    monkeypatch.setattr(training, "_make_train_step",
                        lambda *args: steps.append(make_train_step(*args)) or steps[-1])
    # Batches of four from buckets 16 and 32 (real lengths 15-18), in two micro-batches each.
    model_config, train_config = tiny_configs(data, train_steps=6, train_batch_size=4,
                                              gradient_accumulation_steps=2, shuffle_buffer=8,
                                              bucket_lengths=(16, 32))
    losses = []
    training.train(model_config, train_config, str(tmp_path), distribution.get_strategy("one_device"),
                   on_step_end=lambda step, values: losses.append(values["total_loss"]))
    assert len(losses) == 6 and all(np.isfinite(losses))
    assert steps[0].experimental_get_tracing_count() == 1


# --- (c) kill and resume ---

_KILLED = """
    import json, os, signal, sys
    from tapas_tf.training import distribution
    from tapas_tf.training import trainer as training
    from tests.training.test_trainer import tiny_configs
    data, model_dir = sys.argv[1], sys.argv[2]
    model_config, train_config = tiny_configs(data, train_steps=12, save_checkpoints_steps=3)

    def on_step_end(step, values):
        print("STEP " + json.dumps([step, values["total_loss"]]), flush=True)
        if step == 7:  # After the checkpoint of step 6; step 7 is lost.
            os.kill(os.getpid(), signal.SIGKILL)

    training.train(model_config, train_config, model_dir, distribution.get_strategy("one_device"),
                   on_step_end=on_step_end)
"""


def _losses_of():
    """A dict step -> total loss, and the on_step_end callback that fills it."""
    losses = {}
    return losses, (lambda step, values: losses.__setitem__(step, values["total_loss"]))


def test_killed_run_resumes_with_step_and_optimizer_state(data, tmp_path):
    killed_dir, reference_dir = str(tmp_path / "killed"), str(tmp_path / "reference")
    result = _run_script(_KILLED, data, killed_dir)
    assert result.returncode == -9, result.stderr[-3000:]
    killed = dict(json.loads(line[5:]) for line in result.stdout.splitlines() if line.startswith("STEP "))
    assert sorted(killed) == list(range(1, 8))
    assert model_dir_lib.latest_checkpoint(killed_dir).endswith("ckpt-6")

    model_config, train_config = tiny_configs(data, train_steps=12, save_checkpoints_steps=3)
    resumed, on_resumed = _losses_of()
    assert training.train(model_config, train_config, killed_dir, on_step_end=on_resumed).step == 12
    reference, on_reference = _losses_of()
    training.train(model_config, train_config, reference_dir, on_step_end=on_reference)

    assert sorted(resumed) == list(range(7, 13))  # Continues after the checkpoint of step 6.
    for step in range(1, 13):
        actual = killed[step] if step < 7 else resumed[step]
        assert actual == pytest.approx(reference[step], abs=1e-5), step
    # The optimiser state at the end is the uninterrupted run's: iterations and Adam moments.
    final = tf.train.load_checkpoint(model_dir_lib.latest_checkpoint(killed_dir))
    expected = tf.train.load_checkpoint(model_dir_lib.latest_checkpoint(reference_dir))
    names = [n for n in final.get_variable_to_shape_map() if "OPTIMIZER_SLOT" in n or n.startswith("optimizer/")]
    assert any("/m/" in n for n in names) and any("/v/" in n for n in names)
    assert final.get_tensor("optimizer/iter/.ATTRIBUTES/VARIABLE_VALUE") == 12
    assert final.get_tensor("step/.ATTRIBUTES/VARIABLE_VALUE") == 12
    for name in names:
        np.testing.assert_allclose(final.get_tensor(name), expected.get_tensor(name), rtol=1e-3, atol=1e-8,
                                   err_msg=name)


# --- initialisation from another checkpoint ---

def test_initialize_from_restores_the_encoder_only(fitted, tmp_path):
    _, _, model_dir, model_config = fitted
    trained = model_dir_lib.load_model(model_dir)
    model = TapasForQuestionAnswering(model_config)
    model(dummy_features(), training=False)
    restored = training.initialize_from(model, model_dir)
    assert restored == {"embeddings": True, "layer_0": True, "layer_1": True, "pooler": True}
    for ours, theirs in zip(model.encoder.weights, trained.encoder.weights):
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
    assert not np.array_equal(model.cell_selection_head.output_weights.numpy(),
                              trained.cell_selection_head.output_weights.numpy())

    # A masked-LM style checkpoint: an encoder without a pooler.
    encoder = TapasEncoder.from_tapas_config(model_config, add_pooling_layer=False, name="encoder")
    encoder(dummy_features())
    prefix = tf.train.Checkpoint(model=tf.train.Checkpoint(encoder=encoder)).save(str(tmp_path / "mlm" / "ckpt"))
    restored = training.initialize_from(model, prefix)
    assert restored == {"embeddings": True, "layer_0": True, "layer_1": True, "pooler": False}
    np.testing.assert_array_equal(model.encoder.embeddings.word_embeddings.numpy(),
                                  encoder.embeddings.word_embeddings.numpy())


def test_transfer_restores_the_heads_unless_the_cell_selection_head_is_reset(fitted):
    """An SQA model (a cell-selection head, no aggregation head) starts a WTQ model (both)."""
    _, _, model_dir, model_config = fitted
    trained = model_dir_lib.load_model(model_dir)
    wtq_config = model_config_for_task(Task.WTQ, model_config)

    def started(**options):
        model = TapasForQuestionAnswering(wtq_config)
        model(dummy_features(), training=False)
        config = train_config_for_task(Task.WTQ, "unused", init_heads=True, **options)
        return model, training.initialize_from(model, model_dir, training.heads_to_restore(config))

    kept, restored = started(reset_cell_selection_weights=False)
    assert (restored["cell_selection_head"], restored["aggregation_head"]) == (True, False)  # SQA has none.
    for ours, theirs in zip(kept.cell_selection_head.weights, trained.cell_selection_head.weights):
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())

    reset, restored = started()  # WTQ's preset resets the cell-selection weights (to zero).
    assert "cell_selection_head" not in restored and restored["aggregation_head"] is False
    assert not reset.cell_selection_head.output_weights.numpy().any()
    np.testing.assert_array_equal(reset.encoder.embeddings.word_embeddings.numpy(),
                                  trained.encoder.embeddings.word_embeddings.numpy())
    with pytest.raises(ValueError, match="Unknown heads"):
        training.initialize_from(reset, model_dir, ("pooler_head",))


def test_initialize_from_rejects_foreign_and_misfitting_checkpoints(fitted, tmp_path):
    _, _, model_dir, model_config = fitted
    model = TapasForQuestionAnswering(model_config.replace(hidden_size=64, num_attention_heads=2))
    with pytest.raises(ValueError, match="does not fit the model config"):
        training.initialize_from(model, model_dir)
    other = tf.train.Checkpoint(x=tf.Variable(1.0)).save(str(tmp_path / "other" / "ckpt"))
    with pytest.raises(ValueError, match="holds no TAPAS encoder weights"):
        training.initialize_from(model, other)
    with pytest.raises(FileNotFoundError, match="nowhere"):
        training.initialize_from(model, str(tmp_path / "nowhere"))


def _truncate(path: str, cut_bytes: int = 100) -> None:
    data = open(path, "rb").read()
    with open(path, "wb") as f:
        f.write(data[:-cut_bytes])


@pytest.mark.parametrize("suffix", [".data-00000-of-00001", ".index"])
def test_truncated_checkpoints_are_named(fitted, tmp_path, suffix, caplog):
    _, _, model_dir, model_config = fitted
    copy = shutil.copytree(model_dir, tmp_path / "model")
    latest = model_dir_lib.latest_checkpoint(str(copy))
    _truncate(latest + suffix)
    named = f"checkpoint {re.escape(latest)} is truncated or corrupt "
    with pytest.raises(model_dir_lib.CorruptCheckpointError, match=named + ".*; check --init_checkpoint"):
        training.initialize_from(TapasForQuestionAnswering(model_config), latest)
    with pytest.raises(model_dir_lib.CorruptCheckpointError, match=named):
        model_dir_lib.load_model(str(copy))

    # Resuming: from the newest checkpoint that reads (step 30), with a warning naming the other.
    with open(os.path.join(model_dir, training.TRAIN_DIR, training.TRAIN_CONFIG_FILE)) as f:
        _, train_config = tiny_configs(json.load(f)["train_file"], train_steps=32)
    older = shutil.copytree(copy, tmp_path / "older")
    resumed, on_resumed = _losses_of()
    with caplog.at_level("WARNING"):
        assert training.train(model_config, train_config, str(copy), on_step_end=on_resumed).step == 32
    assert sorted(resumed) == [31, 32]
    assert re.search(named, caplog.text) and "Resuming from the older checkpoint" in caplog.text
    # Without it, nothing reads: an error, not a run from step 0.
    for name in os.listdir(older / "checkpoints"):
        if name.startswith("ckpt-30."):
            os.remove(older / "checkpoints" / name)
    named = f"checkpoint {re.escape(model_dir_lib.checkpoint_dir(str(older)))}/ckpt-60 is truncated or corrupt "
    with pytest.raises(model_dir_lib.CorruptCheckpointError,
                       match=f"^No checkpoint in .* reads completely \\({named}.*train in a new --model_dir"):
        training.train(model_config, train_config, str(older))


def test_train_file_truncated_after_its_first_record_is_named(data, tmp_path):
    truncated = str(tmp_path / "train.tfrecord")
    shutil.copy(data, truncated)
    _truncate(truncated, cut_bytes=20)
    model_config, train_config = tiny_configs(truncated, train_steps=2)
    named = f"^{re.escape(truncated)} is truncated or corrupt"
    with pytest.raises(input_pipeline.DamagedDataError, match=named):
        training.train(model_config, train_config, str(tmp_path / "model"))


# --- (d) the CLI on the sample data ---

@pytest.fixture(scope="module")
def sample_output(tmp_path_factory):
    """create_data on the SQA sample at max_seq_length 128 (7 of its 9 training questions fit)."""
    from tapas_tf.beam_jobs.create_task_data import run_create_data
    from tapas_tf.data.sample_data import write_sample
    from tapas_tf.features.conversion_config import ConversionConfig
    from tests.vocab_fixture import write_test_vocab

    root = tmp_path_factory.mktemp("sample")
    write_sample(str(root / "data"))
    config = ConversionConfig(vocab_file=write_test_vocab(str(root / "vocab.txt")), max_seq_length=128)
    report = run_create_data(Task.SQA, str(root / "data"), str(root / "out"), config, ["--direct_num_workers=1"])
    assert report["splits"]["train"]["examples_written"] == 7
    return str(root / "out")


def test_cli_trains_on_the_sample_data(sample_output, tmp_path):
    model_dir = tmp_path / "model"
    model_config = tmp_path / "tiny.json"
    TINY_CONFIG.replace(max_position_embeddings=128).to_json_file(str(model_config))
    result = subprocess.run(
        [sys.executable, os.path.join(ROOT, "run_task.py"), "--task=SQA", "--mode=train",
         f"--output_dir={sample_output}", f"--model_dir={model_dir}", f"--model_config={model_config}",
         "--max_seq_length=128", "--train_steps=4", "--train_batch_size=4", "--learning_rate=1e-3",
         "--save_checkpoints_steps=2", "--keep_checkpoint_max=1", "--log_steps=2", "--temperature=0.5",
         "--model_option=reset_position_index_per_cell=false", "--seed=3", "--noprogress_bar"],
        capture_output=True, text=True, timeout=240, cwd=str(tmp_path),
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert result.returncode == 0, result.stderr[-3000:]
    assert "step 4/4" in result.stderr
    config = model_dir_lib.load_config(str(model_dir))
    assert (config.hidden_size, config.temperature, config.select_one_column) == (32, 0.5, True)
    assert config.reset_position_index_per_cell is False
    checkpoints = sorted(os.listdir(model_dir / "checkpoints"))
    assert [f for f in checkpoints if f.endswith(".index")] == ["ckpt-4.index"]  # keep_checkpoint_max=1
    assert tf.train.load_checkpoint(str(model_dir / "checkpoints" / "ckpt-4")).get_tensor(
        "step/.ATTRIBUTES/VARIABLE_VALUE") == 4
    scalars = _scalars(str(model_dir / "train"))
    assert [step for step, _ in scalars["selection_loss"]] == [2, 4]
    assert {"total_loss", "aggregation_loss", "answer_loss", "learning_rate", "examples_per_second"} <= set(scalars)
    saved = json.load(open(model_dir / "train" / "train_config.json"))
    # Flags where given, SQA's preset otherwise, XLA off on a CPU.
    assert (saved["train_steps"], saved["learning_rate"], saved["warmup_ratio"], saved["use_xla"]) == (
        4, 1e-3, 0.2, False)


def test_cli_trains_a_model_with_question_match_embeddings(sample_output, tmp_path):
    """--model_option=use_question_match_embeddings=true: the ignored ids come from the vocabulary."""
    from tapas_tf.features.question_match import ignored_ids
    from tests.vocab_fixture import write_test_vocab

    model_dir = tmp_path / "model"
    model_config = tmp_path / "tiny.json"
    TINY_CONFIG.replace(max_position_embeddings=128).to_json_file(str(model_config))
    vocab = write_test_vocab(str(tmp_path / "vocab.txt"))
    result = subprocess.run(
        [sys.executable, os.path.join(ROOT, "run_task.py"), "--task=SQA", "--mode=train",
         f"--output_dir={sample_output}", f"--model_dir={model_dir}", f"--model_config={model_config}",
         f"--vocab_file={vocab}", "--max_seq_length=128", "--train_steps=2", "--train_batch_size=4",
         "--save_checkpoints_steps=2", "--log_steps=2", "--model_option=use_question_match_embeddings=true",
         "--seed=3", "--noprogress_bar"],
        capture_output=True, text=True, timeout=240, cwd=str(tmp_path),
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert result.returncode == 0, result.stderr[-3000:]
    config = model_dir_lib.load_config(str(model_dir))
    assert config.use_question_match_embeddings is True
    assert config.question_match_ignored_ids == ignored_ids(vocab)
    names = [name for name, _ in tf.train.list_variables(str(model_dir / "checkpoints" / "ckpt-2"))]
    assert any("question_match_embeddings" in name for name in names)


def test_cli_train_needs_a_model_dir(tmp_path):
    result = subprocess.run([sys.executable, os.path.join(ROOT, "run_task.py"), "--task=SQA", "--mode=train",
                             f"--output_dir={tmp_path}"], capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert "--mode=train needs --model_dir" in result.stderr


def _scalars(directory: str) -> dict:
    """{tag: [(step, value), ...]} of every TensorBoard event file in `directory`."""
    scalars = {}
    for name in sorted(os.listdir(directory)):
        if not name.startswith("events."):
            continue
        for event in tf.compat.v1.train.summary_iterator(os.path.join(directory, name)):
            for value in event.summary.value:
                scalars.setdefault(value.tag, []).append((event.step, float(tf.make_ndarray(value.tensor))))
    return scalars


def test_dense_gradients_sum_an_embeddings_repeated_rows_and_keep_the_rest():
    # Rows 0 and 2 of a 3-row table; row 2 twice: its gradient is the sum of both.
    sparse = tf.IndexedSlices(values=tf.constant([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]),
                              indices=tf.constant([2, 0, 2]), dense_shape=tf.constant([3, 2]))
    dense = tf.constant([7.0])
    got = training.dense_gradients([sparse, dense, None])
    np.testing.assert_array_equal(got[0].numpy(), [[3.0, 4.0], [0.0, 0.0], [6.0, 8.0]])
    assert got[1] is dense and got[2] is None


def test_adam_on_the_dense_gradient_is_adam_on_the_sparse_one():
    def trained(densify):
        table = tf.Variable(tf.reshape(tf.range(12, dtype=tf.float32), [6, 2]))
        optimizer = training.build_optimizer(
            TrainConfig(train_file="x", train_steps=10, train_batch_size=1, learning_rate=0.1, warmup_ratio=0.0))[0]
        for ids in ([1, 1, 4], [0, 4, 5]):
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(tf.gather(table, ids) ** 2)
            grads = tape.gradient(loss, [table])
            assert isinstance(grads[0], tf.IndexedSlices)
            optimizer.apply_gradients(zip(training.dense_gradients(grads) if densify else grads, [table]))
        return table.numpy()

    np.testing.assert_allclose(trained(True), trained(False), rtol=1e-6)
