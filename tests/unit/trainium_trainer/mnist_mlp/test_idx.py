import gzip
import struct

import numpy as np
import pytest

from trainium_trainer.mnist_mlp.idx import IdxFormatError, decode_idx, encode_idx, load_split, read_idx, write_idx


def images(n=5):
    return np.arange(n * 4 * 3, dtype=np.uint8).reshape(n, 4, 3)


@pytest.mark.parametrize("compress", [True, False])
def test_round_trip_through_a_file_uri(tmp_path, compress):
    uri = (tmp_path / "x-idx3-ubyte.gz").as_uri()
    write_idx(uri, images(), compress=compress)
    assert np.array_equal(read_idx(uri, expected_ndim=3), images())


def test_header_is_the_mnist_one():
    raw = encode_idx(images(2), compress=False)
    assert raw[:4] == b"\x00\x00\x08\x03"
    assert struct.unpack(">3I", raw[4:16]) == (2, 4, 3)


def test_truncated_file_names_the_file_and_the_sizes():
    raw = encode_idx(images(), compress=False)[:-7]
    with pytest.raises(
        IdxFormatError, match=r"train.gz: truncated: header shape \(5, 4, 3\) needs 60 data bytes, found 53"
    ):
        decode_idx(gzip.compress(raw), name="train.gz")


def test_truncated_gzip_stream_is_a_clear_error():
    data = encode_idx(images())
    with pytest.raises(IdxFormatError, match="corrupt gzip stream"):
        decode_idx(data[: len(data) // 2], name="f")


def test_mislabeled_header_magic():
    raw = bytearray(encode_idx(images(), compress=False))
    raw[2] = 0x42
    with pytest.raises(IdxFormatError, match="not an IDX file"):
        decode_idx(bytes(raw), name="f")


def test_header_with_the_wrong_number_of_dimensions():
    labels = encode_idx(np.zeros(5, dtype=np.uint8))
    with pytest.raises(IdxFormatError, match="header says 1 dimensions, expected 3"):
        decode_idx(labels, name="labels", expected_ndim=3)


def test_trailing_bytes_are_rejected():
    with pytest.raises(IdxFormatError, match="trailing bytes"):
        decode_idx(encode_idx(images(), compress=False) + b"\x00", name="f")


def write_split(root, n_images, labels):
    write_idx(f"{root}/train-images-idx3-ubyte.gz", images(n_images))
    write_idx(f"{root}/train-labels-idx1-ubyte.gz", np.asarray(labels, dtype=np.uint8))


def test_split_with_mismatched_counts(tmp_path):
    write_split(tmp_path.as_uri(), 5, [1, 2, 3])
    with pytest.raises(IdxFormatError, match="5 images but 3 labels"):
        load_split(tmp_path.as_uri(), "train")


def test_split_with_labels_that_are_not_digits(tmp_path):
    write_split(tmp_path.as_uri(), 3, [1, 2, 12])
    with pytest.raises(IdxFormatError, match="labels must be digits 0-9"):
        load_split(tmp_path.as_uri(), "train")


def test_missing_file(tmp_path):
    with pytest.raises(IdxFormatError, match="no such file"):
        load_split(tmp_path.as_uri(), "train")
