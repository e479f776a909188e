"""Writes the Hugging Face TAPAS parity fixtures under tests/fixtures/parity/.

Runs in the peer environment (PyTorch + transformers, see benchmarks/README.md):

    $PEER_ENV/bin/python benchmarks/make_parity_fixtures.py --output_dir tests/fixtures/parity

For every case it builds a tiny random `TapasForQuestionAnswering`, adds Gaussian noise to every
parameter (so a dropped, transposed or swapped tensor changes the outputs), builds a small batch
of hand-designed tables with the project's feature names, and stores the model, the inputs and
the reference outputs of HF in eval mode:

    <case>/config.json       every TapasConfig option (use_diff=False)
    <case>/model.safetensors HF parameter names
    <case>/inputs.npz        our tf.Example feature names
    <case>/outputs.npz       reference logits, per-example loss terms and predictions

The per-example loss terms come from HF's own module-level functions applied to the model's
encoder outputs; the script checks that the total it rebuilds from them equals the loss that
the model's forward returns, and that its logits equal the logits the forward returns.

Everything is deterministic: fixed seeds, CPU, float32. A case whose outputs sit too close to a
decision boundary (argmax ties, a sigmoid at 0.5, the cell-selection preference, the answer
loss cut-off) tries the next weight seed, so that a 1e-4 numerical difference cannot flip a
discrete output in a parity test.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import platform
import shutil
import sys
import warnings
from typing import Callable, Optional

import numpy as np
import torch
import transformers
from transformers import TapasConfig, TapasForQuestionAnswering
from transformers.models.tapas import modeling_tapas as hf

SEQ_LEN = 32
BATCH = 4
PAD_ID, EMPTY_ID, CLS_ID, SEP_ID = 0, 1, 2, 3
FIRST_WORD_ID = 4
VOCAB_SIZE = 64
# Column and row vocabularies are larger than max_num_columns (32) and max_num_rows (64), as in
# the real (256, 256), so that one case can feed ids past the heads' clamp.
TYPE_VOCAB_SIZES = [3, 40, 72, 2, 16, 16, 10]
NUMERIC_RELATIONS_VOCAB = TYPE_VOCAB_SIZES[6]

LAYER_NORM_NOISE_STD = 0.5
OTHER_NOISE_STD = 0.1
# Larger on the head weight vectors so that logits spread on both sides of 0 and argmaxes are
# well separated (with 0.1 every token logit of a case can share one sign).
HEAD_NOISE_STD = 0.5
HEAD_WEIGHTS = ("output_weights", "column_output_weights")
MAX_SEED_TRIES = 200

# Smallest distance to a decision boundary that a fixture must keep (see module docstring).
LOGIT_MARGIN = 1e-3
ARGMAX_MARGIN = 1e-2
PREFERENCE_MARGIN = 1e-2

BASE_CONFIG = dict(
    vocab_size=VOCAB_SIZE,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=64,
    hidden_act="gelu",
    hidden_dropout_prob=0.1,
    attention_probs_dropout_prob=0.1,
    max_position_embeddings=64,
    type_vocab_sizes=TYPE_VOCAB_SIZES,
    initializer_range=0.02,
    layer_norm_eps=1e-12,
    max_num_rows=64,
    max_num_columns=32,
)

WEAK_SUPERVISION = dict(
    num_aggregation_labels=4,
    use_answer_as_supervision=True,
    cell_selection_preference=0.5,
    huber_loss_delta=5.0,
)

NAN = float("nan")


# ---------------------------------------------------------------------------------------------
# Input construction
# ---------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ExampleSpec:
    """One question over a small table.

    Rows and columns are 1-based body positions. `row_ids` / `column_ids`, when given, replace
    the natural ids 1..n (the clamp case uses ids past max_num_rows / max_num_columns).
    """

    num_rows: int
    num_columns: int
    numeric_columns: tuple[int, ...] = ()
    labelled_cells: tuple[tuple[int, int], ...] = ()
    empty_cells: tuple[tuple[int, int], ...] = ()
    answer: float = NAN
    aggregation_function_id: int = 0
    answer_from_cell: Optional[tuple[int, int]] = None
    row_ids: Optional[tuple[int, ...]] = None
    column_ids: Optional[tuple[int, ...]] = None
    seed: int = 0


@dataclasses.dataclass
class _Cell:
    token_ids: list[int]
    value: float


def _draw_table(spec: ExampleSpec, rng: np.random.Generator) -> dict[tuple[int, int], _Cell]:
    """Draws token ids and numeric values for the header (row 0) and body cells."""
    cells = {}
    for column in range(1, spec.num_columns + 1):
        cells[(0, column)] = _Cell(list(rng.integers(FIRST_WORD_ID, VOCAB_SIZE, size=1)), NAN)
        for row in range(1, spec.num_rows + 1):
            if (row, column) in spec.empty_cells:
                cells[(row, column)] = _Cell([EMPTY_ID], NAN)
                continue
            # Up to 3 word pieces per cell: multi-token numbers give numeric_values_scale > 1.
            length = int(rng.choice([1, 1, 2, 3]))
            token_ids = list(rng.integers(FIRST_WORD_ID, VOCAB_SIZE, size=length))
            value = NAN
            if column in spec.numeric_columns:
                value = float(np.round(rng.uniform(-20.0, 100.0), 1))
            cells[(row, column)] = _Cell(token_ids, value)
    return cells


def _dense_ranks(values: dict[int, float], descending: bool) -> dict[int, int]:
    """Rank 1 for the smallest (largest when descending) value; equal values share a rank."""
    distinct = sorted(set(values.values()), reverse=descending)
    return {row: distinct.index(value) + 1 for row, value in values.items()}


def _cell_ranks(spec: ExampleSpec, cells: dict[tuple[int, int], _Cell]) -> dict[tuple[int, int], tuple[int, int]]:
    ranks = {}
    for column in spec.numeric_columns:
        values = {
            row: cells[(row, column)].value
            for row in range(1, spec.num_rows + 1)
            if not math.isnan(cells[(row, column)].value)
        }
        up, down = _dense_ranks(values, False), _dense_ranks(values, True)
        for row in values:
            ranks[(row, column)] = (up[row], down[row])
    return ranks


def build_example(spec: ExampleSpec) -> dict[str, np.ndarray]:
    """Lays out `[CLS] question [SEP] header body... [PAD]...` with every feature of one example.

    Redraws the cell lengths until the table leaves at least two padding tokens.
    """
    rng = np.random.default_rng(1000 + spec.seed)
    for _ in range(100):
        question = list(rng.integers(FIRST_WORD_ID, VOCAB_SIZE, size=int(rng.integers(3, 6))))
        cells = _draw_table(spec, rng)
        length = len(question) + 2 + sum(len(c.token_ids) for c in cells.values())
        if length <= SEQ_LEN - 2:
            break
    else:
        raise ValueError(f"table of {spec} does not fit in {SEQ_LEN} tokens")

    row_id_of = {r: r for r in range(spec.num_rows + 1)}
    if spec.row_ids is not None:
        row_id_of.update({r + 1: rid for r, rid in enumerate(spec.row_ids)})
    column_id_of = {c: c for c in range(spec.num_columns + 1)}
    if spec.column_ids is not None:
        column_id_of.update({c + 1: cid for c, cid in enumerate(spec.column_ids)})
    ranks = _cell_ranks(spec, cells)

    feature = {name: np.zeros([SEQ_LEN], np.int32) for name in INT_FEATURES}
    feature["numeric_values"] = np.full([SEQ_LEN], np.nan, np.float32)
    feature["numeric_values_scale"] = np.ones([SEQ_LEN], np.float32)
    tokens = [CLS_ID] + question + [SEP_ID]
    feature["input_ids"][: len(tokens)] = tokens
    position = len(tokens)
    for row in range(spec.num_rows + 1):
        previous_answer = rng.random() < 0.2
        for column in range(1, spec.num_columns + 1):
            cell = cells[(row, column)]
            span = slice(position, position + len(cell.token_ids))
            position += len(cell.token_ids)
            feature["input_ids"][span] = cell.token_ids
            feature["segment_ids"][span] = 1
            feature["column_ids"][span] = column_id_of[column]
            feature["row_ids"][span] = row_id_of[row]
            feature["numeric_values"][span] = cell.value
            feature["numeric_values_scale"][span] = len(cell.token_ids)
            if row > 0 and previous_answer and column == 1 + row % spec.num_columns:
                feature["prev_label_ids"][span] = 1
            if (row, column) in ranks:
                feature["column_ranks"][span], feature["inv_column_ranks"][span] = ranks[(row, column)]
                feature["numeric_relations"][span] = int(rng.integers(0, NUMERIC_RELATIONS_VOCAB))
            if (row, column) in spec.labelled_cells:
                feature["label_ids"][span] = 1
    feature["input_mask"][:position] = 1

    answer = spec.answer
    if spec.answer_from_cell is not None:
        answer = cells[spec.answer_from_cell].value
    feature["answer"] = np.float32(answer)
    feature["aggregation_function_id"] = np.int32(spec.aggregation_function_id)
    return feature


INT_FEATURES = (
    "input_ids",
    "input_mask",
    "segment_ids",
    "column_ids",
    "row_ids",
    "prev_label_ids",
    "column_ranks",
    "inv_column_ranks",
    "numeric_relations",
    "label_ids",
)
TOKEN_TYPE_FEATURES = (
    "segment_ids",
    "column_ids",
    "row_ids",
    "prev_label_ids",
    "column_ranks",
    "inv_column_ranks",
    "numeric_relations",
)


def build_batch(specs: list[ExampleSpec]) -> dict[str, np.ndarray]:
    """Stacks examples: `<int32>[batch, seq_len]`, `<float32>[batch, seq_len]`, `answer <float32>[batch]`."""
    examples = [build_example(spec) for spec in specs]
    return {name: np.stack([ex[name] for ex in examples]) for name in examples[0]}


# Batches. Examples vary on purpose: multi-token cells, [EMPTY] cells, NaN numbers, labels in two
# columns (the gold column is the one with more labelled cells), examples without any label.

SELECTION_BATCH = [
    # Labels in column 1 (two cells) and column 3 (one cell): gold column 1.
    ExampleSpec(4, 3, numeric_columns=(2,), labelled_cells=((1, 1), (3, 1), (2, 3)), empty_cells=((2, 2),), seed=1),
    # No answer cell at all.
    ExampleSpec(3, 3, numeric_columns=(3,), empty_cells=((1, 1),), seed=2),
    ExampleSpec(3, 4, numeric_columns=(3, 4), labelled_cells=((2, 3),), empty_cells=((3, 4),), seed=3),
    ExampleSpec(5, 2, numeric_columns=(2,), labelled_cells=((1, 2), (4, 2)), seed=4),
]

WEAK_BATCH = [
    # Text answer: labelled cells, no scalar answer -> cell selection.
    ExampleSpec(4, 3, numeric_columns=(2,), labelled_cells=((1, 1), (3, 1)), empty_cells=((2, 2),), seed=11),
    # Scalar answer that is not in the table -> aggregation.
    ExampleSpec(4, 3, numeric_columns=(2, 3), answer=57.5, aggregation_function_id=1, empty_cells=((1, 3),), seed=12),
    # Ambiguous: scalar answer AND labelled cells; cell_selection_preference decides.
    ExampleSpec(3, 3, numeric_columns=(2,), labelled_cells=((2, 2),), answer_from_cell=(2, 2), seed=13),
    # No answer cell and no scalar answer.
    ExampleSpec(3, 3, numeric_columns=(3,), empty_cells=((3, 3),), seed=14),
]

# Every example needs aggregation; the answers are placed around the model's expected result.
HUBER_BATCH = [
    ExampleSpec(4, 3, numeric_columns=(1, 2, 3), answer=0.0, aggregation_function_id=1, seed=21),
    ExampleSpec(3, 3, numeric_columns=(2, 3), answer=0.0, aggregation_function_id=2, empty_cells=((1, 2),), seed=22),
    ExampleSpec(4, 2, numeric_columns=(1, 2), answer=0.0, aggregation_function_id=3, seed=23),
    ExampleSpec(3, 3, numeric_columns=(1, 2, 3), answer=0.0, aggregation_function_id=1, seed=24),
]

STRONG_BATCH = [
    ExampleSpec(4, 3, numeric_columns=(2,), labelled_cells=((1, 1),), aggregation_function_id=0, seed=31),
    ExampleSpec(4, 3, numeric_columns=(2,), labelled_cells=((1, 2), (3, 2)), answer=10.0, aggregation_function_id=1, seed=32),
    ExampleSpec(3, 3, numeric_columns=(3,), labelled_cells=((1, 3), (2, 3)), answer=5.0, aggregation_function_id=2, seed=33),
    # COUNT over no labelled cell: the gold column is 0 ("no column").
    ExampleSpec(3, 3, numeric_columns=(3,), answer=0.0, aggregation_function_id=3, seed=34),
]

# Row ids 64 and 65 and column ids 32 and 33 pass max_num_rows (64) and max_num_columns (32): HF
# clamps them to 63 and 31 in the heads (so cells merge) but not in the position reset.
CLAMP_BATCH = [
    ExampleSpec(4, 3, numeric_columns=(2, 3), labelled_cells=((3, 2), (4, 2)), row_ids=(1, 2, 64, 65), seed=41),
    ExampleSpec(3, 4, numeric_columns=(3, 4), answer=31.0, aggregation_function_id=1, column_ids=(1, 2, 32, 33), seed=42),
    ExampleSpec(3, 4, numeric_columns=(3, 4), labelled_cells=((1, 3), (1, 4), (2, 4)), column_ids=(1, 2, 32, 33), seed=43),
    ExampleSpec(3, 3, numeric_columns=(2,), labelled_cells=((2, 1),), row_ids=(1, 63, 64), seed=44),
]


# ---------------------------------------------------------------------------------------------
# Cases
# ---------------------------------------------------------------------------------------------


# A requirement on a candidate fixture: returns what is wrong with it (empty when it is fine).
Requirement = Callable[[TapasForQuestionAnswering, dict, dict], list]


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    description: str
    config: dict
    batch: list[ExampleSpec]
    seed: int
    requirements: tuple[Requirement, ...] = ()
    # Extra noise std on the parameters whose name contains the key (on top of the usual noise).
    extra_noise: tuple[tuple[str, float], ...] = ()
    # Offsets of the answers from the model's expected result (huber case only).
    answer_offsets: Optional[tuple[float, ...]] = None


def _routed(example: int, value: float) -> Requirement:
    def requirement(model, batch, out) -> list:
        got = out["aggregate_mask"][example]
        return [] if got == value else [f"example {example} routed to {got}, wanted {value}"]

    return requirement


def _large_loss_mask(expected: tuple[float, ...]) -> Requirement:
    def requirement(model, batch, out) -> list:
        got = tuple(out["large_answer_loss_mask"].tolist())
        return [] if got == expected else [f"large_answer_loss_mask {got}, wanted {expected}"]

    return requirement


def _activation_shows(other_activation: str, min_ratio: float = 3.0) -> Requirement:
    """The same weights with `other_activation` must move token_logits past a 1e-4 tolerance."""

    def requirement(model, batch, out) -> list:
        config = TapasConfig(**dict(model.config.to_dict(), hidden_act=other_activation))
        other = TapasForQuestionAnswering(config).eval()
        other.load_state_dict(model.state_dict())
        other_out = reference_outputs(other, _torch_inputs(batch, config))
        ratios = []
        for key in ("sequence_output", "token_logits"):
            tolerance = 1e-4 + 1e-4 * np.abs(out[key])
            ratios.append(float(np.max(np.abs(out[key] - other_out[key]) / tolerance)))
        if min(ratios) < min_ratio:
            return [f"{other_activation} differs by only {ratios} x the 1e-4 tolerance"]
        return []

    return requirement


CASES = [
    Case("absolute_positions", "reset_position_index_per_cell=False; cell selection only, select_one_column.",
         dict(reset_position_index_per_cell=False), SELECTION_BATCH, 100),
    Case("per_cell_positions", "reset_position_index_per_cell=True; cell selection only, select_one_column.",
         dict(reset_position_index_per_cell=True), SELECTION_BATCH, 200),
    Case("gelu_new_activation",
         "per_cell_positions with hidden_act='gelu_new' (tanh approximation); the FFN input weights get extra "
         "noise (std 0.5) so that exact gelu moves sequence_output and token_logits by > 3x a 1e-4 tolerance.",
         dict(reset_position_index_per_cell=True, hidden_act="gelu_new"), SELECTION_BATCH, 200,
         requirements=(_activation_shows("gelu"),), extra_noise=(("intermediate.dense.weight", 0.5),)),
    Case("select_one_column_off", "select_one_column=False: per-token Bernoulli loss, positive_label_weight=7.",
         dict(select_one_column=False, positive_label_weight=7.0), SELECTION_BATCH, 300),
    Case("allow_empty_column_selection", "allow_empty_column_selection=True (column 0 selectable), temperature=0.7.",
         dict(allow_empty_column_selection=True, temperature=0.7), SELECTION_BATCH, 400),
    Case("average_logits_per_cell", "select_one_column=False, average_logits_per_cell=True, weak supervision (ratio).",
         dict(select_one_column=False, average_logits_per_cell=True, **WEAK_SUPERVISION), WEAK_BATCH, 500),
    Case("weak_supervision_ratio", "num_aggregation_labels=4, use_answer_as_supervision, average ratio.",
         dict(average_approximation_function="ratio", **WEAK_SUPERVISION), WEAK_BATCH, 600),
    Case("weak_supervision_first_order",
         "weak supervision, first_order average; temperature=0.6, aggregation_temperature=0.8, "
         "answer_loss_importance=0.5, aggregation_loss_weight=1.3.",
         dict(average_approximation_function="first_order", temperature=0.6, aggregation_temperature=0.8,
              answer_loss_importance=0.5, aggregation_loss_weight=1.3, **WEAK_SUPERVISION), WEAK_BATCH, 700),
    Case("weak_supervision_second_order", "weak supervision, second_order average.",
         dict(average_approximation_function="second_order", **WEAK_SUPERVISION), WEAK_BATCH, 800),
    Case("ambiguous_to_selection",
         "weak supervision, cell_selection_preference=0.95: example 2 (scalar answer + labels) goes to selection.",
         dict(WEAK_SUPERVISION, cell_selection_preference=0.95), WEAK_BATCH, 600, requirements=(_routed(2, 0.0),)),
    Case("ambiguous_to_aggregation",
         "weak supervision, cell_selection_preference=0.05: example 2 (scalar answer + labels) goes to aggregation.",
         dict(WEAK_SUPERVISION, cell_selection_preference=0.05), WEAK_BATCH, 600, requirements=(_routed(2, 1.0),)),
    Case("huber_cutoff",
         "huber_loss_delta=1, answer_loss_cutoff=1.5; answers = expected result + (0.3, -1.7, 2.6, -6.0): "
         "Huber quadratic and linear sides, large_answer_loss_mask (1, 1, 0, 0).",
         dict(WEAK_SUPERVISION, huber_loss_delta=1.0, answer_loss_cutoff=1.5), HUBER_BATCH, 900,
         requirements=(_large_loss_mask((1.0, 1.0, 0.0, 0.0)),), answer_offsets=(0.3, -1.7, 2.6, -6.0)),
    Case("normalized_answer_loss",
         "use_normalized_answer_loss=True, huber_loss_delta=0.25 (HF ignores the delta here and uses 1.0), "
         "answer_loss_cutoff=0.4.",
         dict(WEAK_SUPERVISION, use_normalized_answer_loss=True, huber_loss_delta=0.25, answer_loss_cutoff=0.4),
         WEAK_BATCH, 1000),
    Case("strong_supervision",
         "num_aggregation_labels=4, use_answer_as_supervision=False: cross-entropy on aggregation_function_id.",
         dict(num_aggregation_labels=4, use_answer_as_supervision=False), STRONG_BATCH, 1100),
    Case("row_column_clamp",
         "row ids 64, 65 and column ids 32, 33 past max_num_rows=64 / max_num_columns=32; weak supervision (ratio).",
         dict(WEAK_SUPERVISION), CLAMP_BATCH, 1200),
]


# ---------------------------------------------------------------------------------------------
# Model and reference outputs
# ---------------------------------------------------------------------------------------------


def build_model(
    config: TapasConfig, seed: int, extra_noise: tuple[tuple[str, float], ...] = ()
) -> TapasForQuestionAnswering:
    """Random model with noise on every parameter (LayerNorm gammas stay around 1)."""
    torch.manual_seed(seed)
    model = TapasForQuestionAnswering(config)
    generator = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, param in model.named_parameters():
            std = OTHER_NOISE_STD
            if "LayerNorm" in name:
                std = LAYER_NORM_NOISE_STD
            elif name in HEAD_WEIGHTS:
                std = HEAD_NOISE_STD
            std = math.hypot(std, *[extra for key, extra in extra_noise if key in name])
            param.add_(torch.randn(param.shape, generator=generator) * std)
    return model.eval()


def _torch_inputs(batch: dict[str, np.ndarray], config: TapasConfig) -> dict[str, torch.Tensor]:
    # With select_one_column=False HF feeds the labels to Bernoulli.log_prob, which rejects an
    # integer tensor ("result type Float can't be cast to ... Long"): give it float labels there.
    label_dtype = torch.long if config.select_one_column else torch.float32
    token_type_ids = np.stack([batch[name] for name in TOKEN_TYPE_FEATURES], axis=-1)
    return dict(
        input_ids=torch.as_tensor(batch["input_ids"], dtype=torch.long),
        attention_mask=torch.as_tensor(batch["input_mask"], dtype=torch.long),
        token_type_ids=torch.as_tensor(token_type_ids, dtype=torch.long),
        labels=torch.as_tensor(batch["label_ids"], dtype=label_dtype),
        aggregation_labels=torch.as_tensor(batch["aggregation_function_id"], dtype=torch.long),
        float_answer=torch.as_tensor(batch["answer"]),
        numeric_values=torch.as_tensor(batch["numeric_values"]),
        numeric_values_scale=torch.as_tensor(batch["numeric_values_scale"]),
    )


def _table_indices(config: TapasConfig, token_type_ids: torch.Tensor):
    """Row, column and cell IndexMaps exactly as HF's forward builds them (with the clamp)."""
    row_ids, column_ids = token_type_ids[:, :, 2], token_type_ids[:, :, 1]
    row_index = hf.IndexMap(torch.clamp(row_ids, max=config.max_num_rows - 1), config.max_num_rows, batch_dims=1)
    col_index = hf.IndexMap(
        torch.clamp(column_ids, max=config.max_num_columns - 1), config.max_num_columns, batch_dims=1
    )
    return row_index, col_index, hf.ProductIndexMap(row_index, col_index)


def _selection_loss(config, token_logits, column_logits, labels, col_index, cell_index, cell_mask, input_mask):
    """Per-example selection loss and the logits HF returns with labels (its forward's branches)."""
    logits = token_logits
    if config.average_logits_per_cell:
        logits_per_cell, _ = hf.reduce_mean(logits, cell_index)
        logits = hf.gather(logits_per_cell, cell_index)
    if config.select_one_column:
        return hf._single_column_cell_selection_loss(logits, column_logits, labels, cell_index, col_index, cell_mask)
    # HF computes the per-token loss inline; same formula, written out.
    weight = torch.where(labels == 0, 1.0, config.positive_label_weight)
    nll = -torch.distributions.Bernoulli(logits=logits).log_prob(labels.float()) * weight
    loss = torch.sum(nll * input_mask, dim=1) / (torch.sum(input_mask, dim=1) + hf.EPSILON_ZERO_DIVISION)
    return loss, logits


def reference_outputs(model: TapasForQuestionAnswering, inputs: dict[str, torch.Tensor]) -> dict[str, np.ndarray]:
    """Every reference value, rebuilt from HF's module-level functions; checked against forward."""
    config = model.config
    with torch.no_grad():
        encoded = model.tapas(
            inputs["input_ids"], attention_mask=inputs["attention_mask"], token_type_ids=inputs["token_type_ids"]
        )
        forward = model(**inputs)
        sequence_output, pooled_output = encoded.last_hidden_state, encoded.pooler_output
        _, col_index, cell_index = _table_indices(config, inputs["token_type_ids"])
        input_mask = inputs["attention_mask"].float()
        table_mask = (inputs["token_type_ids"][:, :, 2] > 0).float()
        cell_mask, _ = hf.reduce_mean(input_mask, cell_index)
        labels, answer = inputs["labels"], inputs["float_answer"]
        batch = labels.shape[0]

        out = {"sequence_output": sequence_output, "pooled_output": pooled_output}
        out["token_logits"] = hf.compute_token_logits(
            sequence_output, config.temperature, model.output_weights, model.output_bias
        )
        column_logits = None
        if config.select_one_column:
            column_logits = hf.compute_column_logits(
                sequence_output, model.column_output_weights, model.column_output_bias, cell_index, cell_mask,
                config.allow_empty_column_selection,
            )
            out["column_logits"] = column_logits
        selection_loss, logits = _selection_loss(
            config, out["token_logits"], column_logits, labels, col_index, cell_index, cell_mask, input_mask
        )
        out["logits"], out["selection_loss"] = logits, selection_loss

        zeros = torch.zeros(batch)
        aggregate_mask, aggregation_loss, answer_loss = zeros, zeros, zeros
        large_answer_loss_mask, expected_result = torch.ones(batch), zeros
        weak = config.num_aggregation_labels > 0 and config.use_answer_as_supervision
        if config.num_aggregation_labels > 0:
            aggregation_logits = model.aggregation_classifier(pooled_output)
            out["aggregation_logits"] = aggregation_logits
            if weak:
                aggregate_mask = hf._calculate_aggregate_mask(
                    answer, pooled_output, config.cell_selection_preference, labels, model.aggregation_classifier
                )
            aggregation_loss = hf._calculate_aggregation_loss(
                aggregation_logits,
                aggregate_mask if weak else None,
                torch.zeros_like(inputs["aggregation_labels"]) if weak else inputs["aggregation_labels"],
                config.use_answer_as_supervision,
                config.num_aggregation_labels,
                config.aggregation_loss_weight,
            )
            if weak:
                dist = torch.distributions.Bernoulli(logits=logits)
                answer_loss, large_answer_loss_mask = hf._calculate_regression_loss(
                    answer, aggregate_mask, dist, inputs["numeric_values"], inputs["numeric_values_scale"],
                    table_mask, aggregation_logits, config,
                )
                expected_result = hf._calculate_expected_result(
                    dist, inputs["numeric_values"], inputs["numeric_values_scale"], table_mask,
                    aggregation_logits, config,
                )

        total = torch.mean(selection_loss * (1.0 - aggregate_mask))
        if config.num_aggregation_labels > 0:
            total = total + torch.mean((aggregation_loss + answer_loss) * large_answer_loss_mask)
        out.update(
            aggregate_mask=aggregate_mask,
            aggregation_loss=aggregation_loss,
            answer_loss=answer_loss,
            large_answer_loss_mask=large_answer_loss_mask,
            expected_result=expected_result,
            total_loss=total,
        )
        out["probabilities"] = torch.sigmoid(logits)
        out["predicted_cells"] = (out["probabilities"] > 0.5).to(torch.int32)
        if config.num_aggregation_labels > 0:
            out["predicted_aggregation"] = torch.argmax(out["aggregation_logits"], dim=-1).to(torch.int32)

        _check_against_forward(config, forward, out, inputs, model)
    return {name: value.numpy() for name, value in out.items()}


def _check_against_forward(config, forward, out, inputs, model) -> None:
    """Our rebuild must equal HF's own forward, with and without labels."""
    torch.testing.assert_close(out["total_loss"], forward.loss, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(out["logits"], forward.logits, rtol=0, atol=0)
    if config.num_aggregation_labels > 0:
        torch.testing.assert_close(out["aggregation_logits"], forward.logits_aggregation, rtol=0, atol=0)
    if config.select_one_column:
        # Without labels HF still runs the single-column selection (labels = zeros).
        unlabelled = {k: inputs[k] for k in ("input_ids", "attention_mask", "token_type_ids")}
        torch.testing.assert_close(model(**unlabelled).logits, forward.logits, rtol=0, atol=0)


def _margin_problems(config: TapasConfig, out: dict[str, np.ndarray], batch: dict[str, np.ndarray]) -> list[str]:
    """Discrete outputs that a 1e-4 difference could flip."""
    problems = []

    def top_gap(x: np.ndarray) -> float:
        part = np.sort(x, axis=-1)
        return float(np.min(part[..., -1] - part[..., -2]))

    if np.min(np.abs(out["logits"])) < LOGIT_MARGIN:
        problems.append("a selection logit is close to 0")
    table_predictions = out["predicted_cells"] * (batch["row_ids"] > 0)
    if np.sum(table_predictions.sum(-1) > 0) < 2:
        problems.append("fewer than two examples predict a table cell")
    if "column_logits" in out and top_gap(out["column_logits"]) < ARGMAX_MARGIN:
        problems.append("two column logits nearly tie")
    if "aggregation_logits" in out:
        if top_gap(out["aggregation_logits"]) < ARGMAX_MARGIN:
            problems.append("two aggregation logits nearly tie")
        if config.use_answer_as_supervision:
            probs = torch.softmax(torch.as_tensor(out["aggregation_logits"]), -1).numpy()
            mass = probs[:, 1:].sum(-1)
            ambiguous = ~np.isnan(batch["answer"]) & (batch["label_ids"].sum(-1) > 0)
            if np.any(np.abs(mass - config.cell_selection_preference)[ambiguous] < PREFERENCE_MARGIN):
                problems.append("aggregation mass is close to cell_selection_preference")
    if config.answer_loss_cutoff is not None:
        # answer_loss = importance * huber * mask; the cut-off applies to the unscaled huber.
        scaled_cutoff = config.answer_loss_cutoff * config.answer_loss_importance
        routed = out["aggregate_mask"] > 0
        if np.any(np.abs(out["answer_loss"] - scaled_cutoff)[routed] < LOGIT_MARGIN):
            problems.append("an answer loss is close to answer_loss_cutoff")
    return problems


def _place_answers(batch: dict[str, np.ndarray], expected: np.ndarray, offsets: tuple[float, ...]) -> None:
    batch["answer"] = (expected + np.asarray(offsets)).astype(np.float32)


def make_case(case: Case) -> tuple[TapasConfig, TapasForQuestionAnswering, dict, dict, int]:
    """Finds the first seed from case.seed whose outputs keep every margin and requirement."""
    config = TapasConfig(**dict(BASE_CONFIG, **case.config))
    batch = build_batch(case.batch)
    for seed in range(case.seed, case.seed + MAX_SEED_TRIES):
        model = build_model(config, seed, case.extra_noise)
        if case.answer_offsets is not None:
            first = reference_outputs(model, _torch_inputs(batch, config))
            _place_answers(batch, first["expected_result"], case.answer_offsets)
        out = reference_outputs(model, _torch_inputs(batch, config))
        problems = _margin_problems(config, out, batch)
        for requirement in case.requirements:
            problems = problems or requirement(model, batch, out)
        if not problems:
            return config, model, batch, out, seed
    raise RuntimeError(f"{case.name}: no seed in {MAX_SEED_TRIES} tries keeps the margins and requirements")


def write_case(case: Case, output_dir: str) -> dict:
    config, model, batch, out, seed = make_case(case)
    case_dir = os.path.join(output_dir, case.name)
    if os.path.isdir(case_dir):
        shutil.rmtree(case_dir)
    model.save_pretrained(case_dir, safe_serialization=True)
    # save_pretrained writes only the options that differ from HF's defaults; write them all.
    config.to_json_file(os.path.join(case_dir, "config.json"), use_diff=False)
    np.savez_compressed(os.path.join(case_dir, "inputs.npz"), **batch)
    np.savez_compressed(os.path.join(case_dir, "outputs.npz"), **out)
    size = sum(os.path.getsize(os.path.join(case_dir, f)) for f in os.listdir(case_dir))
    return dict(name=case.name, description=case.description, seed=seed, bytes=size,
                total_loss=float(out["total_loss"]))


# ---------------------------------------------------------------------------------------------
# README
# ---------------------------------------------------------------------------------------------

README_HEAD = """# Hugging Face TAPAS parity fixtures

Generated by `benchmarks/make_parity_fixtures.py`; do not edit by hand. To regenerate (see
`benchmarks/README.md` for the peer environment):

    bash benchmarks/setup_peer_env.sh
    .peer-env/bin/python benchmarks/make_parity_fixtures.py --output_dir tests/fixtures/parity

Made with {versions}.

## What each case directory holds

- `config.json`: every `TapasConfig` option (`to_json_file(use_diff=False)`), plus HF's generic
  `PretrainedConfig` keys (ignore those).
- `model.safetensors`: HF parameter names (`tapas.embeddings.token_type_embeddings_0.weight`, ...,
  `output_weights`, `column_output_weights`, `aggregation_classifier.weight`). A random tiny
  model: hidden 32, 2 layers, 4 heads, intermediate 64, vocab {vocab}, max_position_embeddings 64,
  type_vocab_sizes {type_vocab}, max_num_rows 64, max_num_columns 32. Gaussian noise was
  added to every parameter (std {ln_std} on LayerNorm gammas and betas, {head_std} on the
  cell-selection weight vectors `output_weights` and `column_output_weights`, {std} on all others,
  biases and `output_bias` included), so a missing, transposed or swapped tensor shows.
- `inputs.npz`: batch {batch}, seq_len {seq}, our feature names: `input_ids, input_mask,
  segment_ids, column_ids, row_ids, prev_label_ids, column_ranks, inv_column_ranks,
  numeric_relations, label_ids` `<int32>[batch, seq_len]`; `numeric_values` (NaN where no
  number), `numeric_values_scale` (tokens in the cell) `<float32>[batch, seq_len]`; `answer`
  `<float32>[batch]` (NaN when none); `aggregation_function_id` `<int32>[batch]`. Ids: 0 [PAD],
  1 [EMPTY], 2 [CLS], 3 [SEP]. HF's `token_type_ids` is the stack, in that order, of
  segment, column, row, prev_label, column_ranks, inv_column_ranks, numeric_relations.
- `outputs.npz`, HF in eval mode (no dropout), float32:
  - `sequence_output <float32>[batch, seq_len, hidden]`, `pooled_output <float32>[batch, hidden]`;
  - `token_logits <float32>[batch, seq_len]`: `compute_token_logits` (divided by `temperature`);
  - `column_logits <float32>[batch, max_num_columns]`: only when `select_one_column`;
  - `logits <float32>[batch, seq_len]`: what `TapasForQuestionAnswering` returns given labels;
    `probabilities` = sigmoid(logits); `predicted_cells <int32>[batch, seq_len]` = probabilities > 0.5;
  - `aggregation_logits <float32>[batch, 4]`, `predicted_aggregation <int32>[batch]` (argmax):
    only when `num_aggregation_labels > 0`;
  - `<float32>[batch]`: `selection_loss`, `aggregate_mask`, `aggregation_loss` (known + unknown
    parts, times `aggregation_loss_weight`, before the answer loss), `answer_loss` (times
    `answer_loss_importance` and `aggregate_mask`), `large_answer_loss_mask`, `expected_result`;
  - `total_loss <float32>[]` = mean(selection_loss * (1 - aggregate_mask))
    + mean((aggregation_loss + answer_loss) * large_answer_loss_mask) (second term only when
    `num_aggregation_labels > 0`); checked equal to the `loss` of HF's forward.
  Where HF has no such term the fixture stores the value that keeps that formula true:
  `aggregate_mask` 0 when supervised (HF passes None), `aggregation_loss` 0 without aggregation,
  `answer_loss` 0, `expected_result` 0 and `large_answer_loss_mask` 1 without answer supervision.

Every fixture keeps its discrete outputs away from decision boundaries: |logits| >= {logit_margin},
top-2 gaps of column and aggregation logits >= {argmax_margin}, |aggregation mass -
cell_selection_preference| >= {pref_margin} for ambiguous examples, and answer losses away from
the cut-off; at least two examples of each batch predict a table cell. The script tried weight
seeds from the case's base seed until these held (and the case's own requirements, e.g. the
routing of the ambiguous example).

## Cases

| case | what it exercises | weight seed | bytes |
|---|---|---|---|
"""

README_TAIL = """
Batches: the selection batch has labels in two columns (the gold column has more labelled
cells), an example with no answer cell, [EMPTY] cells and multi-token cells; the weak-supervision
batch has a text answer, a scalar answer not in the table, an ambiguous example (scalar answer
AND labelled cells, example 2) and an example with neither; the huber batch has scalar answers
only; the strong batch has aggregation_function_id 0, 1, 2, 3; the clamp batch uses row ids 63,
64, 65 and column ids 32, 33 (HF clamps them to 63 and 31 in the heads, so those cells merge, but
the per-cell position reset uses the unclamped ids). `weak_supervision_ratio` and the two
`ambiguous_*` cases share one model; only cell_selection_preference differs.

## HF behaviours these fixtures pin down

- An example with no labelled cell has gold column 0. Unless allow_empty_column_selection,
  column 0's logit carries -10000, so its selection loss is about 10,000 and dominates
  `total_loss` whenever that example is not routed to aggregation. Compare the per-example terms
  too, not only the total.
- `logits` (what HF returns) is the single-column selection logits when select_one_column:
  per-cell mean of token_logits, -10000 outside the argmax column of column_logits, in column 0
  and on padding cells. Without labels HF returns the same thing (it runs the same function with
  zero labels; the script checks this). With select_one_column=False it is token_logits
  (averaged per cell when average_logits_per_cell), and HF cannot run without labels at all
  (it calls the single-column function with column_logits=None and raises).
- With select_one_column=False HF needs float labels (an int64 tensor makes Bernoulli.log_prob
  raise); the script passes float labels in those cases. inputs.npz stays int32.
- The expected result uses per-token probabilities of `logits` divided by numeric_values_scale
  (so a 3-token cell counts once), masked by row_ids > 0.
- Huber: HF uses `|x| < delta` for the quadratic side (Keras `<=`; equal only at the boundary).
  With use_normalized_answer_loss HF ignores huber_loss_delta and uses delta 1.0 (the original
  TAPAS TF1 code passes huber_loss_delta there); `normalized_answer_loss` sets delta 0.25 to show it.
- answer_loss_cutoff compares the unscaled Huber loss (before answer_loss_importance).
- Row and column ids are clamped to max_num_rows - 1 and max_num_columns - 1 for the heads only.
"""


def write_readme(output_dir: str, rows: list[dict]) -> None:
    versions = (
        f"torch {torch.__version__}, transformers {transformers.__version__}, numpy {np.__version__}, "
        f"Python {platform.python_version()}"
    )
    text = README_HEAD.format(
        versions=versions, vocab=VOCAB_SIZE, type_vocab=TYPE_VOCAB_SIZES, ln_std=LAYER_NORM_NOISE_STD, head_std=HEAD_NOISE_STD,
        std=OTHER_NOISE_STD, batch=BATCH, seq=SEQ_LEN, logit_margin=LOGIT_MARGIN, argmax_margin=ARGMAX_MARGIN,
        pref_margin=PREFERENCE_MARGIN,
    )
    for row in rows:
        text += f"| `{row['name']}` | {row['description']} | {row['seed']} | {row['bytes']:,} |\n"
    text += README_TAIL
    with open(os.path.join(output_dir, "README.md"), "w") as f:
        f.write(text)


def main(argv: Optional[list[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output_dir", default="tests/fixtures/parity")
    parser.add_argument("--cases", default="", help="comma-separated case names (default: all)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    # `temperature` is a TAPAS option that HF's config also treats as a generation parameter.
    warnings.filterwarnings("ignore", message="Some non-default generation parameters")
    torch.use_deterministic_algorithms(True)
    wanted = set(filter(None, args.cases.split(",")))
    unknown = wanted - {case.name for case in CASES}
    if unknown:
        raise ValueError(f"unknown cases: {sorted(unknown)}")
    os.makedirs(args.output_dir, exist_ok=True)
    rows = []
    for case in CASES:
        if wanted and case.name not in wanted:
            continue
        row = write_case(case, args.output_dir)
        rows.append(row)
        print(json.dumps(row), file=sys.stderr)
    if not wanted:
        write_readme(args.output_dir, rows)


if __name__ == "__main__":
    main()
