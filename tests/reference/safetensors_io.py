"""Minimal safetensors reader/writer written against the file format, using only the standard
library for the container (struct + json) and numpy/torch for the tensor bytes.

Format: an 8-byte little-endian u64 N, then an N-byte UTF-8 JSON header
  {"name": {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]}, ...,
   "__metadata__": {"key": "string value", ...}}
padded with spaces so that 8 + N is a multiple of 8, then the raw little-endian tensor data.
Offsets are relative to the start of the data buffer (the byte right after the header).

The writer only emits F32 (all acrobat parameters are float32); the reader also accepts a few
other dtypes so that it can be used to inspect files written by other tools.

Self-check: `python3 safetensors_io.py` writes a file, reads it back and compares.
"""

import json
import os
import struct
import sys

import numpy as np

_DTYPES = {  # safetensors dtype -> (numpy little-endian dtype, item size)
    "F32": ("<f4", 4),
    "F64": ("<f8", 8),
    "F16": ("<f2", 2),
    "I64": ("<i8", 8),
    "I32": ("<i4", 4),
    "I16": ("<i2", 2),
    "I8": ("i1", 1),
    "U8": ("u1", 1),
}


class SafetensorsError(ValueError):
    pass


def _to_numpy_f32(value):
    """Accepts a torch tensor or anything numpy can convert; returns a C-contiguous <f4 array."""
    if hasattr(value, "detach"):  # torch.Tensor, without importing torch here
        value = value.detach().cpu().contiguous().numpy()
    arr = np.asarray(value)
    if arr.dtype != np.float32:
        raise SafetensorsError("only float32 tensors can be written, got %s" % arr.dtype)
    # (np.ascontiguousarray would turn a 0-d array into a 1-d one)
    return np.array(arr, dtype="<f4", order="C", copy=True)


def save_file(tensors, path, metadata=None):
    """Writes {name: float32 tensor} to `path` as F32 safetensors. Tensors are laid out in
    sorted name order, contiguously, with no gaps. `metadata` values must be strings."""
    header = {}
    chunks = []
    offset = 0
    for name in sorted(tensors):
        if not isinstance(name, str) or not name or name == "__metadata__":
            raise SafetensorsError("invalid tensor name %r" % (name,))
        arr = _to_numpy_f32(tensors[name])
        data = arr.tobytes(order="C")
        header[name] = {
            "dtype": "F32",
            "shape": [int(d) for d in arr.shape],
            "data_offsets": [offset, offset + len(data)],
        }
        chunks.append(data)
        offset += len(data)
    if metadata:
        for k, v in metadata.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise SafetensorsError("metadata must map str to str, got %r: %r" % (k, v))
        header["__metadata__"] = dict(metadata)
    hbytes = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hbytes += b" " * ((-(8 + len(hbytes))) % 8)  # pad so the data starts 8-byte aligned
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(hbytes)))
        f.write(hbytes)
        for c in chunks:
            f.write(c)
    os.replace(tmp, path)


def load_file(path, as_torch=True):
    """Reads a safetensors file. Returns (tensors, metadata): tensors maps name -> torch tensor
    (or numpy array when as_torch=False); metadata is the __metadata__ dict (or {})."""
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise SafetensorsError("%s: file too short (%d bytes)" % (path, len(blob)))
    (n,) = struct.unpack("<Q", blob[:8])
    if n > len(blob) - 8:
        raise SafetensorsError("%s: header length %d exceeds file size %d" % (path, n, len(blob)))
    try:
        header = json.loads(blob[8 : 8 + n].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise SafetensorsError("%s: bad JSON header: %s" % (path, e))
    if not isinstance(header, dict):
        raise SafetensorsError("%s: header is not a JSON object" % path)
    data = memoryview(blob)[8 + n :]
    metadata = header.pop("__metadata__", None) or {}
    out = {}
    spans = []
    for name, info in header.items():
        try:
            dtype, shape, (begin, end) = info["dtype"], info["shape"], info["data_offsets"]
        except (KeyError, TypeError, ValueError):
            raise SafetensorsError("%s: malformed entry for %r: %r" % (path, name, info))
        if dtype not in _DTYPES:
            raise SafetensorsError("%s: unsupported dtype %r for %r" % (path, dtype, name))
        np_dtype, itemsize = _DTYPES[dtype]
        count = 1
        for d in shape:
            if not isinstance(d, int) or d < 0:
                raise SafetensorsError("%s: bad shape %r for %r" % (path, shape, name))
            count *= d
        if not (0 <= begin <= end <= len(data)) or end - begin != count * itemsize:
            raise SafetensorsError(
                "%s: data_offsets %r of %r do not match shape %r (%s) / buffer of %d bytes"
                % (path, [begin, end], name, shape, dtype, len(data))
            )
        spans.append((begin, end, name))
        arr = np.frombuffer(data[begin:end], dtype=np_dtype).reshape(shape).copy()
        out[name] = arr
    spans.sort()
    pos = 0
    for begin, end, name in spans:
        if begin != pos:
            raise SafetensorsError("%s: tensor %r does not start at %d (gap/overlap)" % (path, name, pos))
        pos = end
    if pos != len(data):
        raise SafetensorsError("%s: %d trailing bytes after the last tensor" % (path, len(data) - pos))
    if as_torch:
        import torch

        out = {k: torch.from_numpy(v) for k, v in out.items()}
    return out, metadata


def _selfcheck():
    import tempfile

    import torch

    g = torch.Generator().manual_seed(1)
    tensors = {
        "a": torch.randn(3, 4, generator=g),
        "bias": torch.rand(7, generator=g),
        "emb": torch.randn(5, 2, 3, generator=g),
        "scalar": torch.tensor(1.5),
        "empty": torch.zeros(0, 3),
    }
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "t.safetensors")
        save_file(tensors, p, {"model": "test", "dims": '{"H": 4}'})
        with open(p, "rb") as f:
            raw = f.read()
        (n,) = struct.unpack("<Q", raw[:8])
        assert (8 + n) % 8 == 0, "header not padded"
        back, meta = load_file(p)
    assert meta == {"model": "test", "dims": '{"H": 4}'}, meta
    assert set(back) == set(tensors)
    for k, v in tensors.items():
        assert back[k].dtype == torch.float32 and tuple(back[k].shape) == tuple(v.shape), k
        assert torch.equal(back[k], v), k
    print("safetensors_io self-check OK (%d tensors round-tripped bit-exactly)" % len(tensors))


if __name__ == "__main__":
    _selfcheck()
    sys.exit(0)
