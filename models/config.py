"""Model configuration: every option of the TAPAS encoder, heads and losses.

`TapasConfig` is saved as JSON beside each checkpoint, so predict, export and import never need
the training flags again. Field names and defaults follow Hugging Face's `TapasConfig` (which
mirrors the original TAPAS `TapasClassifierConfig` plus the BERT config), so a config written by
either can be read after renaming.

Example:

    config = TapasConfig.from_preset("tiny", num_aggregation_labels=4)
    config.to_json_file("/tmp/model/config.json")
    assert TapasConfig.from_json_file("/tmp/model/config.json") == config
"""

import dataclasses
import json
import math
import os
from typing import Any, Dict, Mapping, Optional, Tuple

# Encoder sizes: number of layers and hidden size. Heads = hidden / 64, intermediate = 4 * hidden.
SIZES: Dict[str, Dict[str, int]] = {
    name: {
        "num_hidden_layers": layers,
        "hidden_size": hidden,
        "num_attention_heads": hidden // 64,
        "intermediate_size": 4 * hidden,
    }
    for name, (layers, hidden) in {
        "tiny": (2, 128),
        "mini": (4, 256),
        "small": (4, 512),
        "medium": (8, 512),
        "base": (12, 768),
        "large": (24, 1024),
    }.items()
}

# "gelu" is the exact (erf) GELU of Hugging Face; "gelu_tanh" is the tanh approximation used by
# the original TF1 BERT/TAPAS code. `models.encoder.get_activation` maps the names to functions.
HIDDEN_ACTIVATIONS = ("gelu", "gelu_tanh", "relu")
AVERAGE_APPROXIMATION_FUNCTIONS = ("ratio", "first_order", "second_order")
NUM_TOKEN_TYPES = 7
# Ablation switches of the input embeddings (the paper's Table 7); each removes one table.
EMBEDDING_SWITCHES = (
    "use_position_embeddings",
    "use_rank_embeddings",
    "use_column_embeddings",
    "use_row_embeddings",
)
# NONE plus the three operators SUM, AVERAGE, COUNT whose expected results the answer loss mixes.
NUM_AGGREGATION_LABELS_WITH_ANSWER_LOSS = 4


@dataclasses.dataclass(frozen=True)
class TapasConfig:
    """Every option of a TAPAS model. Defaults are the base size and Hugging Face's defaults.

    Args:
      vocab_size: int, number of WordPiece ids.
      hidden_size: int, width of every transformer layer.
      num_hidden_layers: int, number of transformer layers.
      num_attention_heads: int, attention heads per layer; must divide hidden_size.
      intermediate_size: int, width of the feed-forward inner layer.
      hidden_act: str, feed-forward activation: "gelu" (exact), "gelu_tanh" or "relu".
      hidden_dropout_prob: float in [0, 1), dropout on embeddings, layer outputs and the
        sequence output fed to the cell selection head.
      attention_probs_dropout_prob: float in [0, 1), dropout on attention probabilities.
      max_position_embeddings: int, size of the position table.
      type_vocab_sizes: tuple of 7 ints, vocabulary sizes of segment_ids, column_ids, row_ids,
        prev_label_ids, column_ranks, inv_column_ranks and numeric_relations.
      initializer_range: float, stddev of the truncated normal weight initialiser.
      layer_norm_eps: float, LayerNorm epsilon.
      reset_position_index_per_cell: bool, restart position ids at the first token of each cell.
      use_position_embeddings: bool, add position embeddings (false: the "no position
        embeddings" ablation of the paper's Table 7; the table is not created).
      use_rank_embeddings: bool, add the column_ranks and inv_column_ranks embeddings (false:
        the "no rank embeddings" ablation; token types 4 and 5 get no table).
      use_column_embeddings: bool, add the column_ids embeddings (false: "no column
        embeddings"; column ids still index cells for positions and the heads).
      use_row_embeddings: bool, add the row_ids embeddings (false: "no row embeddings"; row ids
        still index cells). A released checkpoint imported into a model with a switch off has
        the switched-off tables dropped and listed in its import report.
      use_question_match_embeddings: bool, add a table marking the word pieces the question and
        the table share (computed in the model from input_ids; not part of released TAPAS).
      question_match_ignored_ids: tuple of word-piece ids that never match (special tokens,
        punctuation, stop words; `tapas_tf.features.question_match.ignored_ids` lists a
        vocabulary's).
      max_num_rows: int, row segments of the cell index (larger row ids share the last one).
      max_num_columns: int, column segments (larger column ids share the last one).
      select_one_column: bool, hierarchical loss: pick one column, then cells in it.
      allow_empty_column_selection: bool, let the column head pick column 0 ("no column").
      init_cell_selection_weights_to_zero: bool, start the cell and column heads at zero.
      average_logits_per_cell: bool, average token logits per cell before the token loss.
      positive_label_weight: float, weight of positive tokens in the per-token loss.
      temperature: float > 0, divides the token logits.
      num_aggregation_labels: int, aggregation operators including NONE (0 disables the head).
      aggregation_temperature: float > 0, temperature of the operator softmax in the answer loss.
      aggregation_loss_weight: float, weight of the aggregation loss.
      use_answer_as_supervision: bool, weak supervision from the scalar answer (WTQ).
      answer_loss_importance: float, weight of the answer (regression) loss.
      use_normalized_answer_loss: bool, normalise the answer loss by max(|expected|, |answer|).
      huber_loss_delta: optional float, delta of the Huber answer loss.
      answer_loss_cutoff: optional float, examples with a larger answer loss get no extra loss.
      cell_selection_preference: optional float, operator mass at or below which an ambiguous
        example is treated as cell selection.
      average_approximation_function: str, "ratio", "first_order" or "second_order".
      disable_per_token_loss: bool, drop the cell selection loss from the total.
      num_classification_labels: int, classes of the pooled-output classifier (0 disables it).
      attention_mode: str, "full" (BERT's attention) or "row_column" (MATE: half the heads attend
        within the row, half within the column, the question seen by all; memory linear in the
        table, `models/restricted_attention.py`). A training option: no released model uses it.
      attention_block_size: int, with "row_column": tokens per block of the sorted rows/columns.
      global_attention_tokens: int, with "row_column": positions that hold the question.
    """

    vocab_size: int = 30522
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 1024
    type_vocab_sizes: Tuple[int, ...] = (3, 256, 256, 2, 256, 256, 10)
    initializer_range: float = 0.02
    layer_norm_eps: float = 1e-12
    reset_position_index_per_cell: bool = True
    use_position_embeddings: bool = True
    use_rank_embeddings: bool = True
    use_column_embeddings: bool = True
    use_row_embeddings: bool = True
    use_question_match_embeddings: bool = False
    question_match_ignored_ids: Tuple[int, ...] = ()
    max_num_rows: int = 64
    max_num_columns: int = 32
    select_one_column: bool = True
    allow_empty_column_selection: bool = False
    init_cell_selection_weights_to_zero: bool = False
    average_logits_per_cell: bool = False
    positive_label_weight: float = 10.0
    temperature: float = 1.0
    num_aggregation_labels: int = 0
    aggregation_temperature: float = 1.0
    aggregation_loss_weight: float = 1.0
    use_answer_as_supervision: bool = False
    answer_loss_importance: float = 1.0
    use_normalized_answer_loss: bool = False
    huber_loss_delta: Optional[float] = None
    answer_loss_cutoff: Optional[float] = None
    cell_selection_preference: Optional[float] = None
    average_approximation_function: str = "ratio"
    disable_per_token_loss: bool = False
    num_classification_labels: int = 0
    attention_mode: str = "full"
    attention_block_size: int = 64
    global_attention_tokens: int = 64

    def __post_init__(self):
        # JSON has no tuples; accept any sequence and store a tuple so the config stays hashable.
        if not isinstance(self.type_vocab_sizes, tuple):
            if isinstance(self.type_vocab_sizes, (str, bytes)) or not hasattr(self.type_vocab_sizes, "__iter__"):
                raise ValueError(f"type_vocab_sizes must be a sequence of ints, got {self.type_vocab_sizes!r}.")
            object.__setattr__(self, "type_vocab_sizes", tuple(self.type_vocab_sizes))
        if not isinstance(self.question_match_ignored_ids, tuple):
            if isinstance(self.question_match_ignored_ids, (str, bytes)) or not hasattr(
                    self.question_match_ignored_ids, "__iter__"):
                raise ValueError("question_match_ignored_ids must be a sequence of ints, got "
                                 f"{self.question_match_ignored_ids!r}.")
            object.__setattr__(self, "question_match_ignored_ids", tuple(self.question_match_ignored_ids))
        _validate(self)

    @property
    def is_weakly_supervised(self) -> bool:
        """True when aggregation is learnt from the answer only (HF's `not is_supervised`)."""
        return self.num_aggregation_labels > 0 and self.use_answer_as_supervision

    @classmethod
    def from_preset(cls, name: str, **overrides: Any) -> "TapasConfig":
        """A config with the sizes of preset `name` (see `SIZES`) and `overrides` applied."""
        if name not in SIZES:
            raise ValueError(f"Unknown size preset {name!r}; expected one of {sorted(SIZES)}.")
        return cls.from_dict({**SIZES[name], **overrides})

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> "TapasConfig":
        """Builds a config from a dict, rejecting keys that are not fields."""
        unknown = sorted(set(values) - set(_field_names()))
        if unknown:
            raise ValueError(f"Unknown TapasConfig keys: {', '.join(unknown)}.")
        return cls(**values)

    def to_dict(self) -> Dict[str, Any]:
        """All fields as JSON-compatible values (the tuple becomes a list)."""
        values = dataclasses.asdict(self)
        values["type_vocab_sizes"] = list(self.type_vocab_sizes)
        values["question_match_ignored_ids"] = list(self.question_match_ignored_ids)
        return values

    def to_json_string(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    def to_json_file(self, path: str) -> None:
        """Writes every field to `path` as JSON."""
        write_json_object(path, self.to_dict())

    @classmethod
    def from_json_file(cls, path: str) -> "TapasConfig":
        """Reads a config written by `to_json_file`; unknown keys raise a ValueError."""
        return cls.from_dict(read_json_object(path))

    def replace(self, **changes: Any) -> "TapasConfig":
        """A copy with `changes` applied (validated like a new config)."""
        return self.from_dict({**self.to_dict(), **changes})


def write_json_object(path: str, values: Dict[str, Any]) -> None:
    """Writes a config's fields to `path` as sorted, indented JSON."""
    with open(os.fspath(path), "w", encoding="utf-8") as f:
        f.write(json.dumps(values, indent=2, sort_keys=True) + "\n")


def read_json_object(path: str) -> Dict[str, Any]:
    """The JSON object in `path`; a ValueError naming the file if it is not valid JSON or not an object."""
    with open(os.fspath(path), encoding="utf-8") as f:
        try:
            values = json.load(f)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path} is not valid JSON: {e}") from e
    if not isinstance(values, dict):
        raise ValueError(f"{path} must hold a JSON object, got {type(values).__name__}.")
    return values


def _field_names() -> Tuple[str, ...]:
    return tuple(field.name for field in dataclasses.fields(TapasConfig))


ATTENTION_MODES = ("full", "row_column")


def _validate(config: TapasConfig) -> None:
    """Raises ValueError naming the first invalid option of `config`."""
    if config.attention_mode not in ATTENTION_MODES:
        raise ValueError(f"attention_mode must be one of {ATTENTION_MODES}, got {config.attention_mode!r}.")
    if config.attention_block_size < 1 or config.global_attention_tokens < 1:
        raise ValueError("attention_block_size and global_attention_tokens must be positive, got "
                         f"{config.attention_block_size} and {config.global_attention_tokens}.")
    for name in (
        "vocab_size",
        "hidden_size",
        "num_hidden_layers",
        "num_attention_heads",
        "intermediate_size",
        "max_position_embeddings",
        "max_num_rows",
        "max_num_columns",
    ):
        _check_int(config, name, minimum=1)
    for name in ("num_aggregation_labels", "num_classification_labels"):
        _check_int(config, name, minimum=0)
    for name in EMBEDDING_SWITCHES + ("use_question_match_embeddings",):
        if not isinstance(getattr(config, name), bool):
            raise ValueError(f"{name} must be a bool, got {getattr(config, name)!r}.")
    if config.hidden_size % config.num_attention_heads:
        raise ValueError(
            f"hidden_size ({config.hidden_size}) is not divisible by "
            f"num_attention_heads ({config.num_attention_heads})."
        )
    if len(config.type_vocab_sizes) != NUM_TOKEN_TYPES or not all(
        isinstance(size, int) and not isinstance(size, bool) and size > 0 for size in config.type_vocab_sizes
    ):
        raise ValueError(
            f"type_vocab_sizes must be {NUM_TOKEN_TYPES} positive ints, got {config.type_vocab_sizes!r}."
        )
    if not all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < config.vocab_size
               for i in config.question_match_ignored_ids):
        raise ValueError(f"question_match_ignored_ids must be word-piece ids in [0, {config.vocab_size}), got "
                         f"{config.question_match_ignored_ids!r}.")
    if config.hidden_act not in HIDDEN_ACTIVATIONS:
        raise ValueError(f"Unknown hidden_act {config.hidden_act!r}; expected one of {HIDDEN_ACTIVATIONS}.")
    if config.average_approximation_function not in AVERAGE_APPROXIMATION_FUNCTIONS:
        raise ValueError(
            f"Unknown average_approximation_function {config.average_approximation_function!r}; "
            f"expected one of {AVERAGE_APPROXIMATION_FUNCTIONS}."
        )
    for name in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
        value = _check_float(config, name)
        if not 0.0 <= value < 1.0:
            raise ValueError(f"{name} must be in [0, 1), got {value}.")
    for name in ("initializer_range", "layer_norm_eps", "temperature", "aggregation_temperature"):
        if _check_float(config, name) <= 0:
            raise ValueError(f"{name} must be positive, got {getattr(config, name)}.")
    for name in ("positive_label_weight", "aggregation_loss_weight", "answer_loss_importance"):
        _check_float(config, name)
    for name in ("huber_loss_delta", "answer_loss_cutoff", "cell_selection_preference"):
        if getattr(config, name) is not None:
            _check_float(config, name)
    if config.huber_loss_delta is not None and config.huber_loss_delta <= 0:
        raise ValueError(f"huber_loss_delta must be positive, got {config.huber_loss_delta}.")
    _validate_weak_supervision(config)


def _validate_weak_supervision(config: TapasConfig) -> None:
    """The answer loss mixes exactly SUM, AVERAGE and COUNT and needs its thresholds set."""
    if not config.is_weakly_supervised:
        return
    if config.num_aggregation_labels != NUM_AGGREGATION_LABELS_WITH_ANSWER_LOSS:
        raise ValueError(
            "use_answer_as_supervision needs num_aggregation_labels="
            f"{NUM_AGGREGATION_LABELS_WITH_ANSWER_LOSS} (NONE, SUM, AVERAGE, COUNT), "
            f"got {config.num_aggregation_labels}."
        )
    if config.cell_selection_preference is None:
        raise ValueError("use_answer_as_supervision needs cell_selection_preference to be set.")
    if config.huber_loss_delta is None and not config.use_normalized_answer_loss:
        raise ValueError(
            "use_answer_as_supervision needs huber_loss_delta to be set (or use_normalized_answer_loss)."
        )


def _check_int(config: TapasConfig, name: str, minimum: int) -> None:
    value = getattr(config, name)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}.")


def _check_float(config: TapasConfig, name: str) -> float:
    value = getattr(config, name)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}.")
    return float(value)
