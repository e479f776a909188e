"""The start-up choice of the fused training kernels, and the loss parity of the runs it chooses."""

import json
import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from tapas_tf.models import fused  # noqa: E402
from tapas_tf.training import distribution, trainer as training  # noqa: E402
from tapas_tf.training.fused_choice import MIN_VALUES, FusedChoice, choose_fused_kernels  # noqa: E402
from tests.training.test_trainer import tiny_configs  # noqa: E402


def test_a_layer_of_at_least_min_values_chooses_the_fused_kernels():
    # SQA's tiny run: 32 x 512 x 128 = 2,097,152 values a layer.
    assert choose_fused_kernels(None, 32, 512, 128, use_xla=False, uses_tpu=False) == FusedChoice(
        True, f"2,097,152 values a layer (32 x 512 x 128) >= {MIN_VALUES:,}")
    assert choose_fused_kernels(None, 8, 128, 128, use_xla=False, uses_tpu=False).enabled  # 131,072 exactly.
    small = choose_fused_kernels(None, 8, 128, 127, use_xla=False, uses_tpu=False)
    assert not small.enabled and small.reason.startswith("130,048 values a layer (8 x 128 x 127) < 131,072")


def test_a_request_wins_and_a_step_xla_compiles_keeps_kerass_ops():
    assert choose_fused_kernels(True, 1, 8, 8, use_xla=False, uses_tpu=False) == FusedChoice(True, "--fused_kernels=true")
    assert choose_fused_kernels(False, 32, 512, 768, use_xla=False, uses_tpu=False) == FusedChoice(
        False, "--fused_kernels=false")
    assert not choose_fused_kernels(None, 32, 512, 768, use_xla=True, uses_tpu=False).enabled
    assert choose_fused_kernels(None, 32, 512, 768, use_xla=False, uses_tpu=True).reason.startswith("TPU")


@pytest.mark.parametrize("precision, rtol", [("float32", 1e-4), ("bfloat16", 0.02)])
def test_fused_and_unfused_runs_train_to_the_same_losses(data, tmp_path, monkeypatch, precision, rtol):
    """The same seed, batches and dropout masks (the fused kernels draw the same bits): the same
    losses step by step, to the precision's rounding."""
    traced = []
    kernel = fused.residual_layer_norm
    monkeypatch.setattr(fused, "residual_layer_norm", lambda *a, **k: traced.append(1) or kernel(*a, **k))
    runs, before = {}, fused.enabled()
    for choice in (True, False):
        traced.clear()
        model_dir = str(tmp_path / str(choice))
        losses = []
        model_config, train_config = tiny_configs(data, train_steps=8, precision=precision, fused_kernels=choice)
        training.train(model_config, train_config, model_dir, distribution.get_strategy("one_device"),
                       on_step_end=lambda step, values, losses=losses: losses.append(values["total_loss"]))
        with open(os.path.join(model_dir, "train", training.FUSED_KERNELS_FILE)) as f:
            record = json.load(f)
        assert record == {"enabled": choice, "reason": f"--fused_kernels={str(choice).lower()}"}
        runs[choice] = losses
        assert bool(traced) == choice  # Two blocks, two sublayer ends each, when on.
    assert len(runs[True]) == 8
    np.testing.assert_allclose(runs[True], runs[False], rtol=rtol)
    assert fused.enabled() == before  # The run's choice held for its own steps only.


def test_a_test_sized_run_chooses_kerass_ops_and_says_why(data, tmp_path):
    model_dir = str(tmp_path / "run")
    training.train(*tiny_configs(data, train_steps=1), model_dir, distribution.get_strategy("one_device"))
    with open(os.path.join(model_dir, "train", training.FUSED_KERNELS_FILE)) as f:
        record = json.load(f)
    assert record["enabled"] is False and "< 131,072" in record["reason"]
