"""What the provider and the trainer share, named once: the container's environment, its exit codes, the
artifact files the provider reads back and the live metrics stream's record format with its one reader.

Why it lives in ``trainium_trainer/``: the training image copies only ``trainium_trainer/``, and the trainer never
imports the provider, so the one owner of these facts has to be on the trainer's side. The provider imports exactly this
module of the trainer and nothing else (``tests/unit/test_layering.py``); so it imports the standard library
only, and importing it (with ``trainium_trainer/__init__.py``, a docstring) loads no torch, fsspec or Airflow.
``tests/unit/trainium_trainer/test_boundary.py`` fails when either side uses a ``TRAINIUM_*`` variable, a shared file
name or a stream record field that is not defined here.

The stream's reader rule (``parse_chunk``), the same for the trainer's reader and the UI's: a chunk is JSON
lines, each record one object terminated by ``\\n``. Its last line may be torn (a write or a copy of the chunk
cut short; the trainer's own writer replaces a chunk whole, but the reader does not rely on every writer doing
so): a last line that is unterminated or does not parse as an object is skipped. A malformed line anywhere
else cannot come from a cut-short write (chunks are written once, and a restarted writer starts the next
chunk), so the chunk is not what a writer wrote: it raises ``StreamFormatError`` naming the chunk and line,
rather than silently dropping records. Blank lines are ignored; records of another version are skipped;
unknown kinds and keys are kept, for the caller to ignore.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import operator
import os
import posixpath
import re
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Any, Protocol

# --- The container's environment: set by the provider (or a platform adapter), read by the trainer --------

#: Every variable the provider and the trainer share starts with this.
ENV_PREFIX = "TRAINIUM_"

#: Where the job writes its output (the trainers' ``--output-uri`` default; the node monitor writes under it).
ENV_OUTPUT_URI = "TRAINIUM_OUTPUT_URI"
#: Where the job keeps its checkpoints (``--checkpoint-uri`` default).
ENV_CHECKPOINT_URI = "TRAINIUM_CHECKPOINT_URI"
#: The persistent compilation cache (``--compile-cache-uri`` default).
ENV_COMPILE_CACHE_URI = "TRAINIUM_COMPILE_CACHE_URI"
#: JSON list of the URI prefixes the trainer may read inputs from (the trainer checks its inputs again).
ENV_ALLOWED_INPUT_PREFIXES = "TRAINIUM_ALLOWED_INPUT_PREFIXES"
#: Local folder where a base model's ``s3://`` weights are copied once per node.
ENV_WEIGHTS_CACHE = "TRAINIUM_WEIGHTS_CACHE"


def normalize_input_uri(uri: str) -> str:
    """The bounded-inputs rule's form of ``uri``, which the provider and the trainer both compare prefixes in (the
    provider's bounded writes too, ``neuron/inputs.py``): ``scheme://path`` with a plain path as ``file://``; a
    relative path or a ``..`` segment is refused (``ValueError`` saying why), never resolved. A local path is
    resolved through its symbolic links (``os.path.realpath``, on the URI and on every prefix alike): a link under
    an allowed prefix is judged by where it leads."""
    uri = uri.strip()
    if "://" not in uri:
        if not uri.startswith("/"):
            raise ValueError(f"{uri!r} refused: a relative path")
        uri = "file://" + uri
    scheme, _, rest = uri.partition("://")
    if any(part == ".." for part in rest.split("/")):
        raise ValueError(f"{uri!r} refused: '..' segments are not allowed")
    rest = posixpath.normpath(rest) if rest else rest
    if scheme.lower() == "file":
        rest = os.path.realpath("/" + rest.lstrip("/"))
    return f"{scheme.lower()}://{rest.rstrip('/')}"


def input_uri_allowed(uri: str, prefixes: Iterable[str]) -> bool:
    """Whether ``uri`` lies under one of ``prefixes`` at a path boundary (``s3://bucket-evil`` is not under
    ``s3://bucket``); both sides in :func:`normalize_input_uri`'s form."""
    target = normalize_input_uri(uri)
    return any(target == p or target.startswith(p + "/") for p in (normalize_input_uri(x) for x in prefixes))


#: The job's code bundle (``code_dir`` or a ``@task.trainium`` function, uploaded under the artifact root): the
#: launcher copies it into the node's code folder, which it puts first on ``PYTHONPATH``.
ENV_CODE_URI = "TRAINIUM_CODE_URI"
#: The node's local job folder (default ``/tmp/trainium-job``): the launcher makes the output, checkpoint and
#: code folders below it. Point it at a large volume for big checkpoints.
ENV_JOB_DIR = "TRAINIUM_JOB_DIR"
#: Set by the launcher for every process of a user's job: the local folders it uploads to ``TRAINIUM_OUTPUT_URI``
#: and ``TRAINIUM_CHECKPOINT_URI`` (outputs when the job ends; checkpoints also on an interval, restored first).
ENV_OUTPUT_DIR = "TRAINIUM_OUTPUT_DIR"
ENV_CHECKPOINT_DIR = "TRAINIUM_CHECKPOINT_DIR"
ENV_CODE_DIR = "TRAINIUM_CODE_DIR"
#: Seconds between the launcher's checkpoint uploads while a user's job runs (default 300; 0: only at the end).
ENV_CHECKPOINT_SYNC_S = "TRAINIUM_CHECKPOINT_SYNC_S"
DEFAULT_JOB_DIR = "/tmp/trainium-job"
DEFAULT_CHECKPOINT_SYNC_S = 300
#: Written last into a complete code bundle (``airflow_provider_trainium.code_bundle``).
CODE_BUNDLE_MARKER = ".bundle-complete"
#: The code bundle's folder holding a ``@task.trainium`` function (``FUNCTION_SOURCE_FILE``) and its call
#: (``FUNCTION_CALL_FILE``: the function's name and JSON arguments).
FUNCTION_BUNDLE_DIR = "_trainium_function"
FUNCTION_SOURCE_FILE = "function.py"
FUNCTION_CALL_FILE = "call.json"
#: A ``@task.trainium`` function's return value, written by rank 0 into its output folder as JSON
#: (``{"result": ...}``).
FUNCTION_RESULT_FILE = "function_result.json"

#: The job's name and its spec's content hash (a rerun of the same hash with a complete output does nothing).
ENV_JOB_NAME = "TRAINIUM_JOB_NAME"
ENV_JOB_HASH = "TRAINIUM_JOB_HASH"
#: The instance type the job runs on (or stands in for, on local compute).
ENV_INSTANCE_TYPE = "TRAINIUM_INSTANCE_TYPE"
#: Tensor parallel degree (``--tensor-parallel-size`` default).
ENV_TENSOR_PARALLEL_SIZE = "TRAINIUM_TENSOR_PARALLEL_SIZE"
#: One NeuronCore's dense BF16 peak FLOP/s (so: per rank), the denominator of MFU. Set only on Trainium
#: hardware; without it MFU is null.
ENV_PEAK_FLOPS = "TRAINIUM_PEAK_FLOPS"
#: The training stack the job's image carries: ``xla`` (torch-neuronx on PyTorch/XLA with neuronx-distributed,
#: Trn1) or ``native`` (TorchNeuron, the native PyTorch backend: device ``neuron``, FSDP2/DTensor, Trn2/Trn3).
#: Absent means ``xla``, what every job ran before the native stack existed.
ENV_STACK = "TRAINIUM_STACK"
STACK_XLA = "xla"
STACK_NATIVE = "native"
STACKS: tuple[str, ...] = (STACK_XLA, STACK_NATIVE)
#: Forces a runtime (``neuron``, ``xla``, ``eager``) or the device feed (``background``, ``sync``).
ENV_RUNTIME = "TRAINIUM_RUNTIME"
ENV_DEVICE_FEED = "TRAINIUM_DEVICE_FEED"

#: The rendezvous contract every backend maps onto: nodes, this node's rank, the main node's address and port.
ENV_NUM_NODES = "TRAINIUM_NUM_NODES"
ENV_NODE_RANK = "TRAINIUM_NODE_RANK"
ENV_MAIN_ADDR = "TRAINIUM_MAIN_ADDR"
ENV_MAIN_PORT = "TRAINIUM_MAIN_PORT"
RENDEZVOUS_ENV: tuple[str, ...] = (ENV_NUM_NODES, ENV_NODE_RANK, ENV_MAIN_ADDR, ENV_MAIN_PORT)
#: Earlier names of the main address and port, still read when the neutral ones are absent.
ENV_LEGACY_MAIN_ADDR = "TRAINIUM_MASTER_ADDR"
ENV_LEGACY_MAIN_PORT = "TRAINIUM_MASTER_PORT"
#: Set by the launcher: which platform adapter filled in the rendezvous (named in its error messages).
ENV_RENDEZVOUS_FROM = "TRAINIUM_RENDEZVOUS_FROM"
#: The launcher's port when ``TRAINIUM_MAIN_PORT`` is not set.
DEFAULT_MAIN_PORT = 41000

#: Local compute: the folder torchrun tees every rank's log file into.
ENV_RANK_LOG_DIR = "TRAINIUM_RANK_LOG_DIR"
#: ``1``: the launcher prints its command as JSON instead of running it.
ENV_LAUNCH_DRY_RUN = "TRAINIUM_LAUNCH_DRY_RUN"
#: ``0`` turns the node monitor off; its sampling period in seconds.
ENV_MONITOR = "TRAINIUM_MONITOR"
ENV_MONITOR_EVERY_S = "TRAINIUM_MONITOR_EVERY_S"
#: Seconds between stream chunks and between progress lines.
ENV_STREAM_EVERY_S = "TRAINIUM_STREAM_EVERY_S"
ENV_PROGRESS_EVERY_S = "TRAINIUM_PROGRESS_EVERY_S"
#: The whole job's hourly rate (USD), for the progress line's cost; ``1``: that rate is an estimate (local).
ENV_COST_PER_HOUR_USD = "TRAINIUM_COST_PER_HOUR_USD"
ENV_COST_IS_ESTIMATE = "TRAINIUM_COST_IS_ESTIMATE"

#: The job's own evidence key (hex), which the provider derives from its secret for each job name
#: (``registry.seal``) and hands to that job alone: the evaluation seals its verdict with it, so no other job
#: (nor an edit of the file) can make a verdict that checks.
ENV_EVIDENCE_KEY = "TRAINIUM_EVIDENCE_KEY"

#: A user's job's metric patterns as JSON (stream field -> regex with one group), which node 0's launcher applies to
#: the job's output lines (``trainium_trainer.metric_lines``): curves from a script that does not call ``track``.
ENV_METRIC_PATTERNS = "TRAINIUM_METRIC_PATTERNS"

#: ``<first>:<last>``: the training steps (1-based, both included) each rank profiles with ``torch.profiler``
#: (``common.profile``), its trace written to ``<output_uri>/profile/``; unset, nothing is profiled.
ENV_PROFILE_STEPS = "TRAINIUM_PROFILE_STEPS"

#: Every variable above.
ENVIRONMENT: frozenset[str] = frozenset(
    value for name, value in dict(globals()).items() if name.startswith("ENV_") and name != "ENV_PREFIX"
)

# --- Exit codes: what the container's exit status tells the scheduler ------------------------------------

#: Bad input (data, arguments, environment): a retry gives the same failure, so the task is not retried.
#: Mirrors sysexits' EX_DATAERR.
EXIT_BAD_INPUT = 65
#: The all-reduce smoke test summed wrong: the cluster is unhealthy. Like any other code, a plain failure.
EXIT_ALLREDUCE_MISMATCH = 2
#: The evaluation's accuracy is below ``--min-accuracy``; a plain failure too.
EXIT_BELOW_THRESHOLD = 3
EXIT_CODES: Mapping[str, int] = MappingProxyType(
    {name: value for name, value in dict(globals()).items() if name.startswith("EXIT_") and isinstance(value, int)}
)

# --- Files the trainer writes and the provider reads back -------------------------------------------------

#: The training summary under the output URI, written once at the end (with ``history``: the train records).
METRICS_FILE = "metrics.json"
#: Written last into a complete output: ``{"job_hash": ...}``.
SUCCESS_MARKER = "_SUCCESS"
#: An evaluation job's verdict under its output URI.
EVALUATION_FILE = "evaluation.json"
#: An evaluation job's verdict record under its own output URI (``trainium_trainer.common.verdict``): the metric, the
#: threshold, whether the model passed, and the fingerprint of the files it judged. Promotion reads this, never
#: a task's state.
VERDICT_FILE = "verdict.json"
VERDICT_FORMAT = "trainium-verdict/1"
#: The field of a sealed record that holds its seal.
SEAL_FIELD = "seal"
#: The comparisons a verdict may name, as ``value <comparison> threshold``.
COMPARISONS: Mapping[str, Any] = MappingProxyType(
    {">=": operator.ge, ">": operator.gt, "<=": operator.le, "<": operator.lt}
)
#: What a run writes next to its model (the live stream, log cursors): not part of the model's fingerprint.
RUN_BOOKKEEPING_PREFIXES = ("stream/", ".trainium/")
#: A prepared data set's index, written last (``"skipped": true`` when there was nothing to train on).
DATA_INDEX_FILE = "index.json"
#: An evaluation hold-out set's manifest, written by its data job beside the index (``common.holdout``): the size
#: and sha256 of every file it wrote, the same for every run that prepares the same set. The evaluation checks the
#: files against it and names its fingerprint (``record_fingerprint``) in its verdict.
HOLDOUT_MANIFEST_FILE = "holdout-manifest.json"
HOLDOUT_MANIFEST_FORMAT = "trainium-holdout/1"
#: The folder beside it holding each data job's sealed copy of the manifest, ``<key_id(job's key)>.json``: one per
#: job, so runs sharing the set never overwrite each other's seal.
HOLDOUT_SEALS_DIR = "holdout-seals"
#: The all-reduce smoke test's result.
ALLREDUCE_FILE = "allreduce.json"
FILES: frozenset[str] = frozenset(
    {METRICS_FILE, SUCCESS_MARKER, EVALUATION_FILE, VERDICT_FILE, DATA_INDEX_FILE, ALLREDUCE_FILE, FUNCTION_RESULT_FILE,
     HOLDOUT_MANIFEST_FILE}
)  # fmt: skip

# --- Profiles: <output_uri>/profile/trace-rank<R>.json (Chrome trace format, what torch.profiler exports) -------

PROFILE_DIR = "profile"


def profile_trace_name(rank: int) -> str:
    return f"trace-rank{rank}.json"


def parse_profile_steps(value: str) -> tuple[int, int]:
    """``"first:last"`` -> (first, last); ValueError naming the rule when it is not two steps, 1 <= first <= last."""
    first, sep, last = value.partition(":")
    if sep and first.strip().isdigit() and last.strip().isdigit() and 1 <= int(first) <= int(last):
        return int(first), int(last)
    raise ValueError(f"profile steps {value!r}: expected 'first:last', two training steps with 1 <= first <= last")


# --- The live metrics stream: <output_uri>/stream/<source>/<seq:06d>.jsonl ---------------------------------

STREAM_DIR = "stream"
#: Rank 0's train and eval records.
TRAIN_SOURCE = "train"
#: ``monitor-node<N>``: node N's device and host records.
MONITOR_SOURCE_PREFIX = "monitor-node"
CHUNK_SUFFIX = ".jsonl"
_CHUNK = re.compile(r"^(\d{6})\.jsonl$")

STREAM_VERSION = 1
#: Keys of every record: the format version, unix seconds, the record's kind.
KEY_VERSION = "v"
KEY_TIME = "time"
KEY_KIND = "kind"
KIND_TRAIN = "train"
KIND_EVAL = "eval"
KIND_DEVICE = "device"
KIND_HOST = "host"
_TRAIN = ("step", "total_steps", "epoch", "loss", "samples_per_s", "tokens_per_s", "mfu", "lr", "xla_graphs")
#: kind -> its fields (docs/monitoring.md describes each).
RECORD_FIELDS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        KIND_TRAIN: _TRAIN,
        KIND_EVAL: ("step", "loss", "accuracy"),
        KIND_DEVICE: ("node", "neuroncores", "device_mem_used_bytes"),
        KIND_HOST: ("node", "cpu_percent", "mem_used_bytes", "mem_total_bytes"),
    }
)
#: Every key a record may carry.
RECORD_KEYS: frozenset[str] = frozenset({KEY_VERSION, KEY_TIME, KEY_KIND}.union(*RECORD_FIELDS.values()))


class StreamFormatError(ValueError):
    """A chunk line that is neither a record nor a torn last line: the chunk is not what a writer wrote."""


def monitor_source(node: int) -> str:
    return f"{MONITOR_SOURCE_PREFIX}{node}"


def chunk_name(seq: int) -> str:
    return f"{seq:06d}{CHUNK_SUFFIX}"


def chunk_seq(name: str) -> int | None:
    """The sequence number of a chunk's file name; None for anything that is not a chunk."""
    match = _CHUNK.match(name)
    return int(match.group(1)) if match else None


def chunk_order(names: list[str]) -> list[str]:
    """The chunk names among ``names``, oldest (lowest sequence number) first."""
    return sorted((n for n in names if chunk_seq(n) is not None), key=lambda n: chunk_seq(n) or 0)


def record(kind: str, **fields: Any) -> dict[str, Any]:
    """A record of ``kind`` with every field of its kind (missing ones null), ``time`` if given.

    A field the format does not name raises: writers cannot drift from what readers expect.
    """
    known = RECORD_FIELDS[kind]
    unknown = sorted(set(fields) - set(known) - {KEY_TIME})
    if unknown:
        raise ValueError(f"{kind} records have no field {', '.join(unknown)}; fields: {', '.join(known)}")
    stamped = {KEY_TIME: fields[KEY_TIME]} if KEY_TIME in fields else {}
    return {KEY_KIND: kind, **stamped, **{name: fields.get(name) for name in known}}


def stamp(record: Mapping[str, Any], now: float) -> dict[str, Any]:
    """``record`` as written: the version first, ``now`` unless the record carries its own time."""
    return {KEY_VERSION: STREAM_VERSION, KEY_TIME: now, **record}


def parse_chunk(data: str | bytes, where: str = "chunk") -> list[dict[str, Any]]:
    """The current-version records of one chunk, in line order, by the reader rule (module docstring)."""
    text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data
    *terminated, tail = text.split("\n")
    lines = [(number, line) for number, line in enumerate(terminated, 1) if line.strip()]
    records = []
    for index, (number, line) in enumerate(lines):
        try:
            parsed = json.loads(line)
        except ValueError:
            parsed = None
        if not isinstance(parsed, dict):
            if index == len(lines) - 1 and not tail.strip():
                break  # the torn last line
            raise StreamFormatError(f"{where} line {number}: not a JSON object: {line[:80]!r}")
        if parsed.get(KEY_VERSION) == STREAM_VERSION:
            records.append(parsed)
    return records  # an unterminated ``tail`` is the torn last line: skipped


# --- A model's fingerprint: the same formula on both sides (``registry.hashing.fingerprint``) ---------------


#: How much of a file the hashing below reads at once: a model's shards are GBs.
HASH_CHUNK = 8 * 2**20


class Readable(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...


def sha256_read(fh: Readable, sink: Callable[[bytes], object] | None = None) -> tuple[int, str]:
    """Size and sha256 of what ``fh`` holds, read once in ``HASH_CHUNK``s; each chunk also goes to ``sink`` if
    given (a copy hashed as it is written). Both sides hash a model's files so: the evaluation that fingerprints
    what it judged, and the registry that checks the files it registers against that fingerprint."""
    digest, size = hashlib.sha256(), 0
    while chunk := fh.read(HASH_CHUNK):
        digest.update(chunk)
        size += len(chunk)
        if sink is not None:
            sink(chunk)
    return size, digest.hexdigest()


def model_fingerprint(entries: Iterable[tuple[str, int, str]]) -> str:
    """sha256 over the sorted ``(relative path, size, sha256)`` of a model's files: what a verdict names and a
    registry version records, so a verdict holds only for the very files it judged."""
    import hashlib

    digest = hashlib.sha256()
    for path, size, sha in sorted(entries):
        digest.update(f"{path}\0{size}\0{sha}\n".encode())
    return digest.hexdigest()


def canonical(record: Mapping[str, Any]) -> bytes:
    """The record's canonical JSON, every field but the seal itself: what a seal and a fingerprint cover."""
    body = {k: v for k, v in record.items() if k != SEAL_FIELD}
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()


def seal(record: Mapping[str, Any], key_hex: str) -> str:
    """HMAC-SHA256, under ``key_hex``, of the record's canonical JSON (every field but the seal itself): what the
    evaluation job writes and the provider recomputes."""
    return hmac.new(bytes.fromhex(key_hex), canonical(record), hashlib.sha256).hexdigest()


def record_fingerprint(record: Mapping[str, Any]) -> str:
    """sha256 of the record's canonical JSON, seal left out: two jobs that seal the same record with their own keys
    give it the same fingerprint (a hold-out manifest's, which a verdict names)."""
    return hashlib.sha256(canonical(record)).hexdigest()


def key_id(key_hex: str) -> str:
    """A public name for an evidence key (a one-way hash of it, which reveals nothing of the key): the file name of
    the record a job sealed with it, so whoever can derive the key can find that job's record."""
    return hashlib.sha256(b"trainium-evidence-key-id\0" + bytes.fromhex(key_hex)).hexdigest()[:32]


def passes(value: float, comparison: str, threshold: float) -> bool:
    """Whether ``value <comparison> threshold`` holds; an unknown comparison passes nothing."""
    compare = COMPARISONS.get(comparison)
    return bool(compare is not None and compare(value, threshold))


# --- Metric patterns: curves from a job's output lines ----------------------------------------------------

#: What a metric pattern may fill: a train record's step, loss, lr and epoch; an eval record's loss and accuracy.
METRIC_PATTERN_FIELDS = ("step", "loss", "lr", "epoch", "eval_loss", "eval_accuracy")
_LOGGED_NUMBER = r"'?([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|nan)'?"
#: The Hugging Face Trainer's log lines: its ProgressCallback prints each ``logs`` dict, ``{'loss': 2.31,
#: 'grad_norm': 1.2, 'learning_rate': 4.5e-05, 'epoch': 0.25}`` and ``{'eval_loss': 2.1, ..., 'epoch': 1.0}``
#: (transformers' ``trainer_callback.py``). ``'loss'`` does not match inside ``'eval_loss'``: the quote comes first.
HUGGING_FACE_PATTERNS: Mapping[str, str] = MappingProxyType(
    {
        "loss": r"'loss': " + _LOGGED_NUMBER,
        "lr": r"'learning_rate': " + _LOGGED_NUMBER,
        "epoch": r"'epoch': " + _LOGGED_NUMBER,
        "eval_loss": r"'eval_loss': " + _LOGGED_NUMBER,
        "eval_accuracy": r"'eval_accuracy': " + _LOGGED_NUMBER,
    }
)
#: The built-in pattern sets a job may name instead of its own.
METRIC_PATTERN_SETS: Mapping[str, Mapping[str, str]] = MappingProxyType({"huggingface": HUGGING_FACE_PATTERNS})


def metric_pattern_problems(patterns: Mapping[str, str]) -> list[str]:
    """Why ``patterns`` cannot make stream records (empty when they can): the fields the stream knows, each a
    regex with exactly one group, and a loss or an eval value among them."""
    problems = [f"metric pattern {name!r}: the stream has no such field (one of {', '.join(METRIC_PATTERN_FIELDS)})"
                for name in patterns if name not in METRIC_PATTERN_FIELDS]  # fmt: skip
    for name, pattern in patterns.items():
        try:
            groups = re.compile(str(pattern)).groups
        except re.error as err:
            problems.append(f"metric pattern {name!r}: not a regular expression ({err})")
            continue
        if groups != 1:
            problems.append(f"metric pattern {name!r}: needs exactly one group (the number), has {groups}")
    if not {"loss", "eval_loss", "eval_accuracy"} & set(patterns):
        problems.append("metric patterns: none for loss, eval_loss or eval_accuracy, so no record would be made")
    return problems
