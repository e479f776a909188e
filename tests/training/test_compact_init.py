"""--init_checkpoint takes a compact model directory (a bundled model: float16 weights, no
checkpoint): its encoder and heads start the new model, widened from float16."""

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import numpy as np  # noqa: E402

from tapas_tf.checkpoints import model_dir as model_dir_lib  # noqa: E402
from tapas_tf.checkpoints.compact import write_compact_model_dir  # noqa: E402
from tapas_tf.models.qa_model import TapasForQuestionAnswering, dummy_features  # noqa: E402
from tapas_tf.training.initialization import initialize_from  # noqa: E402
from tests.inference.test_sequential import tiny_config, write_random_model_dir  # noqa: E402


def test_a_compact_directory_initialises_the_encoder_and_heads(tmp_path):
    source = write_random_model_dir(tmp_path / "source", num_aggregation_labels=4, use_answer_as_supervision=True,
                                    cell_selection_preference=0.2, answer_loss_cutoff=0.6, huber_loss_delta=0.12)
    compact = str(tmp_path / "compact")
    write_compact_model_dir(source, compact)
    assert model_dir_lib.latest_checkpoint(compact) is None and model_dir_lib.has_compact_weights(compact)

    model = TapasForQuestionAnswering(model_dir_lib.load_config(compact))
    model(dummy_features(1, 8))
    restored = initialize_from(model, compact, ("cell_selection_head", "aggregation_head"))
    assert all(restored.values()), restored
    expected = model_dir_lib.load_model(compact).weight_map()  # The float16 weights, widened.
    for name, variable in model.weight_map().items():
        np.testing.assert_array_equal(variable.numpy(), expected[name].numpy(), err_msg=name)
    original = model_dir_lib.load_model(source).weight_map()
    name = sorted(original)[0]
    assert np.max(np.abs(original[name].numpy() - model.weight_map()[name].numpy())) < 1e-2

    fresh = TapasForQuestionAnswering(tiny_config(num_aggregation_labels=4, use_answer_as_supervision=True,
                                                  cell_selection_preference=0.2, answer_loss_cutoff=0.6,
                                                  huber_loss_delta=0.12))
    assert initialize_from(fresh, compact)["embeddings"]  # Without heads: the encoder only.
