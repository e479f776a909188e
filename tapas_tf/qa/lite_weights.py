"""A LiteRT copy that keeps no weights of its own: they are read from the compact float16 weights.

    stripped, segments = strip_shared_weights(flatbuffer, weights)       # at export (`lite_export`)
    flatbuffer = restore_shared_weights(stripped, weights, segments, digest)   # at load (`LiteRunner`)

A compact model directory (`checkpoints.compact`) holds its weights twice when it also has a LiteRT
copy: in weights_float16.npz, and as float32 constants inside model.tflite (the copy is converted
from those float16 weights, so its constants are their exact float32 values). For the bundled tiny
models the copy is 18.7 MB, 18.3 MB of it those constants; together the two files are over three
times the weights' float16 size, and the package's bundle has a size limit.

`strip_shared_weights` finds each weight's float32 bytes in the flatbuffer, as the converter laid
them out (as is, or transposed: a dense kernel <float32>[in, out] is stored [out, in]), and cuts
them out. What is left, the copy's "stripped" file, is the graph, the small constants and the
offsets of the cuts. `restore_shared_weights` puts the same bytes back at the same offsets, so
the flatbuffer's internal offsets hold, and checks the result against the SHA-256 of the original:
the interpreter runs exactly the copy that was converted and checked, or nothing.

A segment is `[offset, name, layout]`: at `offset` in the original, the float32 bytes of weight
`name` in `layout` (see LAYOUTS). Segments never overlap and are sorted by offset.
"""

import hashlib
from typing import Callable, Dict, List, Mapping, Sequence, Tuple

import numpy as np

# Weights smaller than this stay in the stripped file: cutting them saves little.
MIN_SHARED_BYTES = 4096

Segment = Tuple[int, str, str]


def _as_is(value: np.ndarray) -> np.ndarray:
    return value


def _first_axis_last(value: np.ndarray) -> np.ndarray:
    """<[a, *rest]> -> <[prod(rest), a]>: a kernel [in, out...] stored as [out, in]."""
    return value.reshape(value.shape[0], -1).T


def _last_axis_first(value: np.ndarray) -> np.ndarray:
    """<[*rest, b]> -> <[b, prod(rest)]>: an attention output kernel [heads, size, out] as [out, in]."""
    return value.reshape(-1, value.shape[-1]).T


LAYOUTS: Dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "as_is": _as_is, "first_axis_last": _first_axis_last, "last_axis_first": _last_axis_first}


class SharedWeightsError(ValueError):
    """The stripped copy cannot be restored: a weight is missing or has another shape, or the
    result is not the flatbuffer that was converted (the weights changed since the export)."""


def layout_bytes(value: np.ndarray, layout: str) -> bytes:
    """The float32 bytes of `value` in `layout`, as the converter stores a constant."""
    value = np.asarray(value, dtype=np.float32)
    if layout != "as_is" and value.ndim < 2:
        raise SharedWeightsError(f"layout {layout} needs a matrix, got shape {list(value.shape)}")
    return np.ascontiguousarray(LAYOUTS[layout](value)).tobytes()


def _occurrences(blob: bytes, pattern: bytes) -> List[int]:
    found, start = [], 0
    while True:
        at = blob.find(pattern, start)
        if at < 0:
            return found
        found.append(at)
        start = at + len(pattern)


def strip_shared_weights(flatbuffer: bytes, weights: Mapping[str, np.ndarray],
                         min_bytes: int = MIN_SHARED_BYTES) -> Tuple[bytes, List[Segment]]:
    """Cuts every weight of `weights` (at least `min_bytes` as float32) out of `flatbuffer`.

    Args:
      flatbuffer: the LiteRT copy, as the converter wrote it.
      weights: name -> the values the copy was converted from (float16 or float32; compared as float32).
      min_bytes: smaller weights stay in place.

    Returns:
      (the stripped bytes, the segments cut, by offset). A weight the converter folded into another
      constant is not found and simply stays; so does every byte no segment covers.
    """
    candidates = []  # (size, offset, name, layout): the largest first, so that they win overlaps.
    for name in sorted(weights):
        value = np.asarray(weights[name])
        if value.dtype.kind != "f" or value.size * 4 < min_bytes:
            continue
        for layout in LAYOUTS if value.ndim >= 2 else ("as_is",):
            pattern = layout_bytes(value, layout)
            offsets = _occurrences(flatbuffer, pattern)
            candidates.extend((len(pattern), offset, name, layout) for offset in offsets)
            if offsets:
                break
    taken: List[Tuple[int, int, str, str]] = []
    for size, offset, name, layout in sorted(candidates, key=lambda c: (-c[0], c[1], c[2])):
        if all(offset + size <= start or end <= offset for start, end, _, _ in taken):
            taken.append((offset, offset + size, name, layout))
    taken.sort()
    parts, position = [], 0
    for start, end, _, _ in taken:
        parts.append(flatbuffer[position:start])
        position = end
    parts.append(flatbuffer[position:])
    return b"".join(parts), [(start, name, layout) for start, _, name, layout in taken]


def restore_shared_weights(stripped: bytes, weights: Mapping[str, np.ndarray], segments: Sequence[Segment],
                           sha256: str, source: str = "the LiteRT copy") -> bytes:
    """The flatbuffer `strip_shared_weights` was given, rebuilt from `stripped` and `weights`.

    Raises:
      SharedWeightsError: a segment names a weight that is missing or cannot take its layout, or
        the rebuilt bytes do not hash to `sha256` (named after `source` in the message).
    """
    parts, position, previous_end = [], 0, 0
    for offset, name, layout in segments:
        if name not in weights:
            raise SharedWeightsError(f"{source} needs weight {name}, which the compact weights do not have; "
                                     "export the copy again")
        if layout not in LAYOUTS:
            raise SharedWeightsError(f"{source}: unknown layout {layout!r} for weight {name}")
        gap = int(offset) - previous_end
        if gap < 0:
            raise SharedWeightsError(f"{source}: segment of {name} at {offset} overlaps the one before it")
        parts.append(stripped[position:position + gap])
        position += gap
        data = layout_bytes(weights[name], layout)
        parts.append(data)
        previous_end = int(offset) + len(data)
    parts.append(stripped[position:])
    flatbuffer = b"".join(parts)
    if hashlib.sha256(flatbuffer).hexdigest() != sha256:
        raise SharedWeightsError(f"{source} rebuilt from the compact weights is not the copy that was "
                                 "exported (the weights or the stripped file changed); export the copy again")
    return flatbuffer
