"""Prints, case by case, how far tapas-tf is from Hugging Face TAPAS on the parity fixtures.

    PYTHONPATH=. python benchmarks/parity_report.py [--fixtures tests/fixtures/parity]

For every case under the fixtures directory it imports the HF checkpoint with the `hf`
importer, runs `model(inputs, training=False)`, and reports the largest absolute difference
from HF's outputs in the logits (token, column, selection and aggregation logits) and in the
losses (the per-example selection, aggregation and answer losses, aggregate mask and expected
result; and the total loss), plus the largest relative difference of the losses (several
examples have losses of about 10,000: an example with no answer cell whose "no column" logit
carries -10,000). It then writes the same weights as an original TF1 checkpoint, imports that
with the `tf1` importer, and reports the largest difference between the two imports' outputs.
The output is a Markdown table (pasted into docs/PARITY.md).
"""

import argparse
import json
import os
import tempfile

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

# pylint: disable=wrong-import-position
import numpy as np
import tensorflow as tf

import tapas_tf
from tapas_tf.checkpoints import importer as ic, tf1

LOGITS = ("token_logits", "column_logits", "logits", "aggregation_logits")
LOSSES = ("selection_loss", "aggregation_loss", "answer_loss", "aggregate_mask", "expected_result")


def _outputs(model_dir: str, inputs) -> dict:
    model = tapas_tf.load_model(model_dir)
    return {key: value.numpy() for key, value in model(inputs, training=False).items()}


def _max_abs(ours: dict, reference: dict, keys) -> float:
    diffs = [np.max(np.abs(ours[key] - reference[key])) for key in keys if key in reference]
    return float(max(diffs)) if diffs else 0.0


def _max_rel(ours: dict, reference: dict, keys) -> float:
    diffs = [
        np.max(np.abs(ours[key] - reference[key]) / np.maximum(np.abs(reference[key]), 1e-6))
        for key in keys
        if key in reference
    ]
    return float(max(diffs)) if diffs else 0.0


def _tf1_round_trip(hf_dir: str, scratch: str, inputs) -> dict:
    """Outputs of the tf1 import of the hf import's weights."""
    model = tapas_tf.load_model(hf_dir)
    config = model.tapas_config
    release = os.path.join(scratch, "tf1_release")
    tf1.write_tf1_checkpoint(ic.export_tf1_arrays(model), os.path.join(release, "model.ckpt"))
    bert_config = tf1.bert_config_from_tapas(config)
    with open(os.path.join(release, "bert_config.json"), "w", encoding="utf-8") as f:
        json.dump(bert_config, f)
    options = {key: value for key, value in config.to_dict().items() if key not in bert_config}
    options["hidden_act"] = config.hidden_act
    tf1_dir = os.path.join(scratch, "tf1_import")
    ic.import_checkpoint("tf1", release, tf1_dir, model_options=options)
    return _outputs(tf1_dir, inputs)


def report_case(case_dir: str) -> dict:
    """The differences of one fixture case (see the module docstring)."""
    with np.load(os.path.join(case_dir, "inputs.npz")) as data:
        inputs = {key: tf.constant(data[key]) for key in data.files}
    with np.load(os.path.join(case_dir, "outputs.npz")) as data:
        reference = {key: data[key] for key in data.files}
    with tempfile.TemporaryDirectory() as scratch:
        hf_dir = os.path.join(scratch, "hf_import")
        ic.import_checkpoint("hf", case_dir, hf_dir)
        ours = _outputs(hf_dir, inputs)
        via_tf1 = _tf1_round_trip(hf_dir, scratch, inputs)
    input_mask = inputs["input_mask"].numpy() > 0
    cells_equal = np.array_equal((ours["logits"] > 0) & input_mask, (reference["predicted_cells"] > 0) & input_mask)
    operator_equal = "predicted_aggregation" not in reference or np.array_equal(
        np.argmax(ours["aggregation_logits"], -1), reference["predicted_aggregation"]
    )
    return {
        "logits": _max_abs(ours, reference, LOGITS),
        "losses": _max_abs(ours, reference, LOSSES),
        "total_loss": _max_abs(ours, reference, ("total_loss",)),
        "loss_rel": _max_rel(ours, reference, LOSSES + ("total_loss",)),
        "predictions": "equal" if cells_equal and operator_equal else "DIFFERENT",
        "tf1_vs_hf": _max_abs(via_tf1, ours, sorted(ours)),
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fixtures", default=os.path.join("tests", "fixtures", "parity"))
    args = parser.parse_args(argv)
    cases = sorted(
        name for name in os.listdir(args.fixtures)
        if os.path.exists(os.path.join(args.fixtures, name, "model.safetensors"))
    )
    if not cases:
        raise SystemExit(f"No parity fixtures under {args.fixtures}.")
    print("| case | max abs diff, logits | max abs diff, per-example losses | abs diff, total loss "
          "| max rel diff, losses | predicted cells and operator | tf1 import vs hf import |")
    print("|---|---|---|---|---|---|---|")
    for case in cases:
        row = report_case(os.path.join(args.fixtures, case))
        print(f"| `{case}` | {row['logits']:.1e} | {row['losses']:.1e} | {row['total_loss']:.1e} "
              f"| {row['loss_rel']:.1e} | {row['predictions']} | {row['tf1_vs_hf']:.1e} |")


if __name__ == "__main__":
    main()
