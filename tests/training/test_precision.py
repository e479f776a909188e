"""Training precision: the choice at start-up, and bfloat16 training against float32.

bfloat16 keeps 8 significant bits, so the two precisions cannot agree to float32 tolerances; what
must hold is that a bfloat16 run starts from the same loss (the same weights, rounded products),
learns as well, and predicts the same cells.
"""

import json
import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tf_keras  # noqa: E402

from tapas_tf.checkpoints import model_dir as model_dir_lib  # noqa: E402
from tapas_tf.training import distribution, input_pipeline, precision, trainer as training  # noqa: E402
from tests.training.test_input_pipeline import NUM_EXAMPLES, SEQ, write_fixture_examples  # noqa: E402
from tests.training.test_trainer import tiny_configs  # noqa: E402

# The first step sees the same weights and batch in both precisions: only the rounding of the
# encoder's products to bfloat16 differs.
FIRST_LOSS_RTOL = 0.02


def _cpuinfo(tmp_path, flags: str) -> str:
    path = tmp_path / "cpuinfo"
    path.write_text(f"processor\t: 0\nmodel name\t: Test CPU\nflags\t\t: fpu sse2 avx2 {flags}\n\n")
    return str(path)


@pytest.mark.parametrize("flags, expected", [
    ("avx512f avx512_bf16", "bfloat16"),
    ("amx_bf16 amx_tile", "bfloat16"),
    ("avx512f avx512_vnni", "float32"),
    ("", "float32"),
])
def test_default_precision_follows_the_cpu_flags(tmp_path, flags, expected):
    choice = precision.choose_precision(None, cpuinfo_path=_cpuinfo(tmp_path, flags))
    assert choice.precision == expected
    assert choice.reason.startswith("CPU has" if expected == "bfloat16" else "CPU without")


def test_a_requested_precision_wins_and_a_bad_one_is_refused(tmp_path):
    cpuinfo = _cpuinfo(tmp_path, "avx512_bf16")
    assert precision.choose_precision("float32", cpuinfo_path=cpuinfo) == precision.PrecisionChoice(
        "float32", "--precision=float32")
    assert precision.choose_precision(None, uses_tpu=True, cpuinfo_path=_cpuinfo(tmp_path, "")).precision == "bfloat16"
    assert precision.choose_precision(None, cpuinfo_path=str(tmp_path / "missing")).precision == "float32"
    with pytest.raises(ValueError, match="precision must be one of"):
        precision.choose_precision("float16")


def test_policy_scope_sets_and_restores_the_keras_policy():
    before = tf_keras.mixed_precision.global_policy().name
    with precision.policy_scope("bfloat16"):
        assert tf_keras.mixed_precision.global_policy().name == "mixed_bfloat16"
        layer = tf_keras.layers.Dense(2)
        assert (layer.compute_dtype, layer.variable_dtype) == ("bfloat16", "float32")
    assert tf_keras.mixed_precision.global_policy().name == before


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The same 60 steps (same seed, so the same initial weights and batches) in each precision."""
    directory = tmp_path_factory.mktemp("data")
    write_fixture_examples(directory)
    data = str(directory / "tf_examples" / "train.tfrecord")
    results = {}
    for name in precision.PRECISIONS:
        model_dir = str(tmp_path_factory.mktemp(name))
        model_config, train_config = tiny_configs(data, train_steps=60, warmup_ratio=0.1, precision=name)
        losses = []
        result = training.train(model_config, train_config, model_dir, distribution.get_strategy("one_device"),
                                on_step_end=lambda step, values, losses=losses: losses.append(values["total_loss"]))
        results[name] = (result, losses, model_dir)
    return data, results


def test_bfloat16_training_starts_at_the_same_loss_and_learns_as_well(runs):
    _, results = runs
    (_, f32, _), (_, bf16, _) = results["float32"], results["bfloat16"]
    np.testing.assert_allclose(bf16[0], f32[0], rtol=FIRST_LOSS_RTOL)
    assert f32[-1] < f32[0] / 10 and bf16[-1] < bf16[0] / 10, (f32, bf16)


def test_both_precisions_predict_the_same_cells(runs):
    data, results = runs
    features = next(iter(input_pipeline.make_dataset(data, SEQ, NUM_EXAMPLES, training=False)))
    selected = {name: result.model(features, training=False)["probabilities"].numpy() > 0.5
                for name, (result, _, _) in results.items()}
    np.testing.assert_array_equal(selected["bfloat16"], selected["float32"])
    np.testing.assert_array_equal(selected["float32"], features["label_ids"].numpy() == 1)


def test_the_choice_is_recorded_and_checkpoints_stay_float32(runs):
    _, results = runs
    _, _, model_dir = results["bfloat16"]
    with open(os.path.join(model_dir, training.TRAIN_DIR, training.PRECISION_FILE)) as f:
        assert json.load(f) == {"precision": "bfloat16", "reason": "--precision=bfloat16"}
    # A bfloat16 run's checkpoint loads into a float32 model (variables are float32 throughout).
    restored = model_dir_lib.load_model(model_dir)
    assert {variable.dtype.name for variable in restored.weights} == {"float32"}
