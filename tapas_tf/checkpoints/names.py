"""Variable names and layouts: original TAPAS (TF1), Hugging Face, and ours.

The canonical names are the TF1 ones (`models`' `weight_map()` keys). Hugging Face names the
same tensors with dots, `layer.N`, `weight`/`bias` and its own head names; its `nn.Linear`
weights are stored [out, in], the transpose of a TF1 kernel [in, out]:

    TF1 (canonical)                                   Hugging Face (after the encoder prefix)
    bert/embeddings/word_embeddings                   embeddings.word_embeddings.weight
    bert/embeddings/token_type_embeddings_3           embeddings.token_type_embeddings_3.weight
    bert/embeddings/LayerNorm/gamma, beta             embeddings.LayerNorm.weight, bias
    bert/encoder/layer_0/attention/self/query/kernel  encoder.layer.0.attention.self.query.weight (T)
    bert/encoder/layer_0/output/LayerNorm/gamma       encoder.layer.0.output.LayerNorm.weight
    bert/pooler/dense/kernel                          pooler.dense.weight (T)
    output_weights, output_bias                       output_weights, output_bias
    column_output_weights, column_output_bias         column_output_weights, column_output_bias
    output_weights_agg, output_bias_agg               aggregation_classifier.weight, bias
    output_weights_cls, output_bias_cls               classifier.weight, bias
    cls/predictions/transform/dense/kernel            cls.predictions.transform.dense.weight (T)
    cls/predictions/transform/LayerNorm/gamma, beta   cls.predictions.transform.LayerNorm.weight, bias
    cls/predictions/output_bias                       cls.predictions.bias
    cls/seq_relationship/output_weights, output_bias  cls.seq_relationship.weight, bias

The encoder prefix is `tapas.` for TapasForQuestionAnswering / TapasForMaskedLM, `bert.` for
BERT task models and empty for a bare TapasModel / BertModel. Old PyTorch files may say
`LayerNorm.gamma`/`beta` for `weight`/`bias`; both are read.

Our attention variables are 3-D ([hidden, heads, head_size] kernels, [heads, head_size]
biases, [heads, head_size, hidden] output kernel); `tf1_shape` gives the 2-D TF1 shape that a
plain row-major reshape maps onto them.
"""

import os
import re
from typing import Any, Dict, Iterable, Optional, Sequence, Tuple

from tapas_tf.models.config import read_json_object as read_json_file

# Hugging Face buffers that are not parameters (position ids are recomputed by every model).
HF_BUFFERS = ("embeddings.position_ids", "embeddings.token_type_ids")
# HF's MLM decoder is tied to the word embeddings and the prediction bias; safetensors files
# often omit these copies, and when present they must equal what they are tied to.
HF_TIED = {
    "cls.predictions.decoder.weight": "bert/embeddings/word_embeddings",
    "cls.predictions.decoder.bias": "cls/predictions/output_bias",
}

_ENCODER_BLOCK_PARTS = (
    "attention/self/query",
    "attention/self/key",
    "attention/self/value",
    "attention/output/dense",
    "attention/output/LayerNorm",
    "intermediate/dense",
    "output/dense",
    "output/LayerNorm",
)
# Heads (and the MLM/NSP layers) whose HF name is not derived from the TF1 path.
_HEADS_TF1_TO_HF = {
    "output_weights": "output_weights",
    "output_bias": "output_bias",
    "column_output_weights": "column_output_weights",
    "column_output_bias": "column_output_bias",
    "output_weights_agg": "aggregation_classifier.weight",
    "output_bias_agg": "aggregation_classifier.bias",
    "output_weights_cls": "classifier.weight",
    "output_bias_cls": "classifier.bias",
    "cls/predictions/output_bias": "cls.predictions.bias",
    "cls/seq_relationship/output_weights": "cls.seq_relationship.weight",
    "cls/seq_relationship/output_bias": "cls.seq_relationship.bias",
}
_HEADS_HF_TO_TF1 = {hf: tf1 for tf1, hf in _HEADS_TF1_TO_HF.items()}
_EMBEDDING_TABLES = r"(word_embeddings|position_embeddings|token_type_embeddings(?:_\d+)?)"
_PARAMETER_SUFFIX = {"weight": "weight", "bias": "bias", "gamma": "weight", "beta": "bias"}

ENCODER_PREFIXES = ("tapas.", "bert.")


def is_encoder_name(tf1_name: str) -> bool:
    """True for embeddings and transformer layers (never left out, even with skip_heads)."""
    return tf1_name.startswith(("bert/embeddings/", "bert/encoder/"))


def is_head_name(tf1_name: str) -> bool:
    """True for everything `--skip_heads` may leave at its fresh value: heads and the pooler."""
    return not is_encoder_name(tf1_name)


def encoder_prefix(hf_names: Iterable[str]) -> str:
    """The prefix of the encoder parameters of a HF state dict: "tapas.", "bert." or ""."""
    names = list(hf_names)
    for prefix in ENCODER_PREFIXES:
        if any(name.startswith(prefix + "embeddings.") for name in names):
            return prefix
    return ""


def hf_to_tf1(hf_name: str, prefix: str = "tapas.") -> Optional[Tuple[str, bool]]:
    """The TF1 name of a HF parameter and whether its value must be transposed.

    Args:
      hf_name: a HF state-dict key, e.g. "tapas.encoder.layer.0.output.dense.weight".
      prefix: the encoder prefix of this state dict (see `encoder_prefix`).

    Returns:
      (tf1_name, transpose), or None when the name is not a TAPAS/BERT parameter.
    """
    if hf_name in _HEADS_HF_TO_TF1:
        return _HEADS_HF_TO_TF1[hf_name], False
    if hf_name.startswith("cls.predictions.transform."):
        rest = hf_name[len("cls.predictions.transform.") :]
        return _dense_or_norm("cls/predictions/transform", rest, ("dense", "LayerNorm"))
    if not hf_name.startswith(prefix):
        return None
    name = hf_name[len(prefix) :]
    match = re.fullmatch(rf"embeddings\.{_EMBEDDING_TABLES}\.weight", name)
    if match:
        return f"bert/embeddings/{match.group(1)}", False
    if name.startswith("embeddings.LayerNorm."):
        return _dense_or_norm("bert/embeddings", name[len("embeddings.") :], ("LayerNorm",))
    match = re.fullmatch(r"encoder\.layer\.(\d+)\.(.+)", name)
    if match:
        return _dense_or_norm(f"bert/encoder/layer_{match.group(1)}", match.group(2), _ENCODER_BLOCK_PARTS)
    if name.startswith("pooler."):
        return _dense_or_norm("bert/pooler", name[len("pooler.") :], ("dense",))
    return None


def _dense_or_norm(scope: str, rest: str, allowed: Sequence[str]) -> Optional[Tuple[str, bool]]:
    """Maps "<path>.<weight|bias|gamma|beta>" under `scope`; Linear weights are transposed."""
    path, _, parameter = rest.rpartition(".")
    path = path.replace(".", "/")
    if parameter not in _PARAMETER_SUFFIX or path not in allowed:
        return None
    is_norm = path.endswith("LayerNorm")
    kind = _PARAMETER_SUFFIX[parameter]
    if is_norm:
        return f"{scope}/{path}/{'gamma' if kind == 'weight' else 'beta'}", False
    return f"{scope}/{path}/{'kernel' if kind == 'weight' else 'bias'}", kind == "weight"


def tf1_to_hf(tf1_name: str, prefix: str = "tapas.") -> Tuple[str, bool]:
    """The HF name of a TF1 variable and whether its value must be transposed (`hf_to_tf1`'s inverse).

    Raises:
      ValueError: `tf1_name` has no HF counterpart.
    """
    if tf1_name in _HEADS_TF1_TO_HF:
        return _HEADS_TF1_TO_HF[tf1_name], False
    if tf1_name.startswith("cls/predictions/transform/"):
        scope, rest = "cls.predictions.transform.", tf1_name[len("cls/predictions/transform/") :]
    elif tf1_name.startswith("bert/"):
        scope, rest = prefix, tf1_name[len("bert/") :]
        match = re.fullmatch(rf"embeddings/{_EMBEDDING_TABLES}", rest)
        if match:
            return f"{prefix}embeddings.{match.group(1)}.weight", False
        rest = re.sub(r"^encoder/layer_(\d+)/", r"encoder/layer/\1/", rest)
    else:
        raise ValueError(f"No Hugging Face name for the TF1 variable {tf1_name!r}.")
    path, _, parameter = rest.rpartition("/")
    hf_parameter = {"kernel": "weight", "gamma": "weight", "bias": "bias", "beta": "bias"}.get(parameter)
    if hf_parameter is None:
        raise ValueError(f"No Hugging Face name for the TF1 variable {tf1_name!r}.")
    return f"{scope}{path.replace('/', '.')}.{hf_parameter}", parameter == "kernel"


def tf1_shape(tf1_name: str, shape: Sequence[int]) -> Tuple[int, ...]:
    """The TF1 shape of one of our variables, given its name and (our) shape.

    Attention kernels [H, N, D] are [H, N*D] in TF1, the attention output kernel [N, D, H]
    is [N*D, H], attention biases [N, D] are [N*D]; everything else is unchanged.
    """
    shape = tuple(int(d) for d in shape)
    if len(shape) == 3 and tf1_name.endswith("attention/output/dense/kernel"):
        return (shape[0] * shape[1], shape[2])
    if len(shape) == 3:
        return (shape[0], shape[1] * shape[2])
    if len(shape) == 2 and tf1_name.endswith("/bias"):
        return (shape[0] * shape[1],)
    return shape


def read_json_object(source_dir: str, file_name: str, kind: str) -> Dict[str, Any]:
    """The parsed JSON object `source_dir/file_name` of a `kind` model directory.

    Raises ValueError when the file is missing, is not JSON or is not an object.
    """
    path = os.path.join(source_dir, file_name)
    if not os.path.exists(path):
        raise ValueError(f"{source_dir} is not {kind} model directory: {file_name} is missing.")
    return read_json_file(path)
