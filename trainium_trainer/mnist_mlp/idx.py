"""The MNIST IDX file format (optionally gzip-compressed), read and written with numpy.

Header: two zero bytes, a type code (0x08 = unsigned byte), the number of dimensions, then one
big-endian uint32 per dimension. Errors name the file and what is wrong: a bad file fails the job once.
"""

from __future__ import annotations

import gzip
import struct
from typing import Any

import numpy as np
import numpy.typing as npt

from trainium_trainer.common import uri as uris
from trainium_trainer.common.errors import BadInputError

_DTYPES: dict[int, np.dtype[Any]] = {0x08: np.dtype(">u1"), 0x09: np.dtype(">i1"), 0x0B: np.dtype(">i2"),
                                     0x0C: np.dtype(">i4"), 0x0D: np.dtype(">f4"), 0x0E: np.dtype(">f8")}  # fmt: skip
_CODES = {v.newbyteorder("="): k for k, v in _DTYPES.items()}


class IdxFormatError(BadInputError):
    pass


def decode_idx(data: bytes, name: str = "<bytes>", expected_ndim: int | None = None) -> npt.NDArray[Any]:
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as err:
            raise IdxFormatError(f"{name}: corrupt gzip stream ({err})") from err
    if len(data) < 4:
        raise IdxFormatError(f"{name}: {len(data)} bytes is too short for an IDX header")
    zero, code, ndim = struct.unpack(">HBB", data[:4])
    if zero != 0 or code not in _DTYPES:
        raise IdxFormatError(
            f"{name}: not an IDX file (magic {data[:4].hex()}; expected 0000 then a type code "
            f"in {sorted(hex(c) for c in _DTYPES)})"
        )
    if expected_ndim is not None and ndim != expected_ndim:
        raise IdxFormatError(f"{name}: header says {ndim} dimensions, expected {expected_ndim}")
    header_len = 4 + 4 * ndim
    if len(data) < header_len:
        raise IdxFormatError(f"{name}: truncated header ({len(data)} of {header_len} bytes)")
    shape = struct.unpack(f">{ndim}I", data[4:header_len])
    dtype = _DTYPES[code]
    expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    body = len(data) - header_len
    if body != expected:
        kind = "truncated" if body < expected else "has trailing bytes"
        raise IdxFormatError(f"{name}: {kind}: header shape {shape} needs {expected} data bytes, found {body}")
    return np.frombuffer(data, dtype=dtype, offset=header_len).reshape(shape).astype(dtype.newbyteorder("="))


def encode_idx(array: npt.NDArray[Any], compress: bool = True) -> bytes:
    native = array.dtype.newbyteorder("=")
    if native not in _CODES:
        raise ValueError(f"dtype {array.dtype} has no IDX type code")
    header = struct.pack(">HBB", 0, _CODES[native], array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    raw = header + array.astype(_DTYPES[_CODES[native]]).tobytes()
    return gzip.compress(raw, mtime=0) if compress else raw


def read_idx(uri: str, expected_ndim: int | None = None) -> npt.NDArray[Any]:
    try:
        data = uris.read_bytes(uri)
    except FileNotFoundError as err:
        raise IdxFormatError(f"{uri}: no such file") from err
    return decode_idx(data, name=uri, expected_ndim=expected_ndim)


def write_idx(uri: str, array: npt.NDArray[Any], compress: bool = True) -> None:
    uris.write_bytes(uri, encode_idx(array, compress=compress))


def load_split(data_uri: str, split: str) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
    """Images (N, H, W) uint8 and labels (N,) of ``split`` (``train`` or ``t10k``), MNIST file names."""
    images = read_idx(uris.join(data_uri, f"{split}-images-idx3-ubyte.gz"), expected_ndim=3)
    labels = read_idx(uris.join(data_uri, f"{split}-labels-idx1-ubyte.gz"), expected_ndim=1)
    if len(images) != len(labels):
        raise IdxFormatError(f"{data_uri} {split}: {len(images)} images but {len(labels)} labels")
    if len(labels) and (labels.min() < 0 or labels.max() > 9):
        raise IdxFormatError(f"{data_uri} {split}: labels must be digits 0-9, found {labels.min()}..{labels.max()}")
    return images, labels
