"""Cutting the compact weights out of a LiteRT copy and putting them back (`qa.lite_weights`).

The "flatbuffers" here are byte strings built by hand: filler around each weight's float32 bytes in
the layout a converter uses, so that every offset and every kept byte is known.
"""

import hashlib

import numpy as np
import pytest

from tapas_tf.qa import lite_weights


def _weights():
    rng = np.random.default_rng(0)
    return {"embeddings": rng.normal(size=(40, 16)).astype(np.float16),  # 2,560 bytes as float32
            "attention/kernel": rng.normal(size=(16, 2, 32)).astype(np.float16),   # 4,096 bytes
            "output/kernel": rng.normal(size=(2, 32, 16)).astype(np.float16),      # 4,096 bytes
            "bias": rng.normal(size=(16,)).astype(np.float16)}                     # 64 bytes


def _blob(weights):
    """header | attention kernel as [out, in] | gap | output kernel as [out, in] | embeddings | bias
    | tail."""
    f32 = {name: value.astype(np.float32) for name, value in weights.items()}
    parts = [b"HEAD" * 10, f32["attention/kernel"].reshape(16, 64).T.copy().tobytes(), b"\x00" * 12,
             f32["output/kernel"].reshape(64, 16).T.copy().tobytes(), f32["embeddings"].tobytes(),
             f32["bias"].tobytes(), b"TAIL" * 3]
    return b"".join(parts), [len(p) for p in parts]


def test_weights_are_cut_at_their_offsets_in_the_converters_layouts_and_put_back_byte_for_byte():
    weights = _weights()
    blob, sizes = _blob(weights)
    stripped, segments = lite_weights.strip_shared_weights(blob, weights, min_bytes=2048)
    offsets = np.cumsum([0] + sizes)
    assert segments == [(offsets[1], "attention/kernel", "first_axis_last"),
                        (offsets[3], "output/kernel", "last_axis_first"),
                        (offsets[4], "embeddings", "as_is")]
    # What stays: the header, the gap, the bias (under min_bytes) and the tail.
    bias = weights["bias"].astype(np.float32).tobytes()
    assert stripped == b"HEAD" * 10 + b"\x00" * 12 + bias + b"TAIL" * 3
    digest = hashlib.sha256(blob).hexdigest()
    assert lite_weights.restore_shared_weights(stripped, weights, segments, digest) == blob


def test_a_larger_weight_wins_an_overlap_and_weights_not_in_the_copy_stay_out():
    rng = np.random.default_rng(1)
    big = rng.normal(size=(64, 32)).astype(np.float16)
    weights = {"big": big, "inside": big[:40].copy(), "absent": rng.normal(size=(64, 32)).astype(np.float16)}
    blob = b"x" * 7 + big.astype(np.float32).tobytes() + b"y" * 5
    stripped, segments = lite_weights.strip_shared_weights(blob, weights, min_bytes=1024)
    assert segments == [(7, "big", "as_is")] and stripped == b"x" * 7 + b"y" * 5
    digest = hashlib.sha256(blob).hexdigest()
    assert lite_weights.restore_shared_weights(stripped, weights, segments, digest) == blob


def test_a_changed_or_missing_weight_is_refused_not_run():
    weights = _weights()
    blob, _ = _blob(weights)
    stripped, segments = lite_weights.strip_shared_weights(blob, weights, min_bytes=2048)
    digest = hashlib.sha256(blob).hexdigest()
    changed = dict(weights, embeddings=weights["embeddings"] + np.float16(0.5))
    with pytest.raises(lite_weights.SharedWeightsError,
                       match="copy.tflite rebuilt from the compact weights is not the copy that was "
                             "exported"):
        lite_weights.restore_shared_weights(stripped, changed, segments, digest, source="copy.tflite")
    missing = {k: v for k, v in weights.items() if k != "output/kernel"}
    with pytest.raises(lite_weights.SharedWeightsError, match="needs weight output/kernel, which the"):
        lite_weights.restore_shared_weights(stripped, missing, segments, digest)
    with pytest.raises(lite_weights.SharedWeightsError, match="unknown layout 'sideways'"):
        lite_weights.restore_shared_weights(stripped, weights, [(40, "embeddings", "sideways")], digest)
    with pytest.raises(lite_weights.SharedWeightsError, match="overlaps the one before it"):
        lite_weights.restore_shared_weights(stripped, weights, [segments[1], segments[0]], digest)
