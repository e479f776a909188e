"""A deeper model started from a trained shallow one: its transformer layers stacked again.

    stack_layers("tapas_tf/checkpoints/bundled/wtq_tiny", "runs/wtq_l4_init", "0,1,0,1")   # -> [0, 1, 0, 1]

Progressive stacking (Gong et al., ICML 2019, "Efficient training of BERT by progressively
stacking"): a trained L-layer encoder is copied on top of itself into a 2L-layer one, whose
training then starts far from random. Depth adds no embedding parameters, so a stacked L4/H128
model of a tiny one (L2/H128) is still small enough to bundle (`experiments/stack_layers.py`).

The new model directory has the source's config with `num_hidden_layers = len(layer_order)`; its
layer j is a copy of the source's layer `layer_order[j]`; the embeddings, pooler and every head
are copied unchanged. It is a normal model directory (checkpoint ckpt-0): train from it with
`--init_checkpoint=OUTPUT --init_heads`. The source may be a trained or a compact (bundled) model
directory.
"""

import os
import re
from typing import List, Sequence

from tapas_tf.checkpoints import importer, model_dir as model_dir_lib

_LAYER = re.compile(r"^(bert/encoder/layer_)(\d+)(/.*)$")


def source_name(target_name: str, layer_order: Sequence[int]) -> str:
    """The source variable (TAPAS checkpoint name) that target variable `target_name` copies.

    >>> source_name("bert/encoder/layer_3/output/dense/kernel", [0, 1, 0, 1])
    'bert/encoder/layer_1/output/dense/kernel'
    """
    match = _LAYER.match(target_name)
    if not match:
        return target_name
    return f"{match.group(1)}{layer_order[int(match.group(2))]}{match.group(3)}"


def parse_layer_order(text: str, source_layers: int) -> List[int]:
    """"0,1,0,1" -> [0, 1, 0, 1]; ValueError for an empty order or a layer the source lacks."""
    try:
        order = [int(part) for part in text.split(",") if part.strip()]
    except ValueError as e:
        raise ValueError(f"layer order must be comma-separated layer numbers, got {text!r}") from e
    if not order:
        raise ValueError("layer order is empty")
    bad = [layer for layer in order if not 0 <= layer < source_layers]
    if bad:
        raise ValueError(f"layer order names layers {bad}; the source has layers 0..{source_layers - 1}")
    return order


def stack_layers(source_dir: str, output_dir: str, layer_order: str) -> List[int]:
    """Writes the stacked model directory `output_dir`; returns the layer order used.

    Raises:
      ValueError: a bad layer order, or `output_dir` already holds a model.
    """
    source_config = model_dir_lib.load_config(source_dir)
    order = parse_layer_order(layer_order, source_config.num_hidden_layers)
    source = model_dir_lib.load_model(source_dir, config=source_config)
    weights = {name: variable.numpy() for name, variable in source.weight_map().items()}
    config = source_config.replace(num_hidden_layers=len(order))
    target = importer.build_model(config, "qa")
    for name, variable in target.weight_map().items():
        variable.assign(weights[source_name(name, order)])
    importer.write_model_dir(target, config, output_dir, {
        "format": "stacked", "source": os.path.abspath(source_dir), "layer_order": order,
        "model_class": type(target).__name__})
    return order
