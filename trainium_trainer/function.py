"""Runs a ``@task.trainium`` function on this process: ``python -m trainium_trainer.function`` (every torchrun rank).

The job's code bundle holds ``_trainium_function/function.py`` (the function's source without its decorator)
and ``_trainium_function/call.json`` (its name and JSON arguments); the launcher put the bundle in
``TRAINIUM_CODE_DIR``. Rank 0 writes ``{"result": <return value>}`` as JSON into ``TRAINIUM_OUTPUT_DIR``, which
the launcher uploads to the output URI, where the provider reads it as the task's XCom. A rank whose function
raises prints its traceback (the task fails with it); an import the image lacks, an argument the function
does not take or a return value JSON cannot carry is bad input (exit 65: a retry cannot help).
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any

from trainium_trainer import boundary
from trainium_trainer.common import lean_exit


class FunctionInputError(Exception):
    """The call cannot run in this image or with these arguments; the message says what to change."""


def missing_import_message(err: ModuleNotFoundError) -> str:
    return (
        f"the function imports {err.name!r}, which this image does not have: build your image FROM the training "
        "image with it installed (TrainiumImageBuildOperator(context_dir=...), docs/byo.md)"
    )


def bundle_folder(env: dict[str, str] | os._Environ[str] = os.environ) -> Path:
    code = env.get(boundary.ENV_CODE_DIR, "").strip()
    if not code:
        raise FunctionInputError(
            f"{boundary.ENV_CODE_DIR} is not set: run this through trainium_trainer.launch --user-code"
        )
    return Path(code) / boundary.FUNCTION_BUNDLE_DIR


def load(folder: Path) -> tuple[Any, dict[str, Any]]:
    """The function and its call document."""
    call = json.loads((folder / boundary.FUNCTION_CALL_FILE).read_text())
    spec = importlib.util.spec_from_file_location("trainium_function", folder / boundary.FUNCTION_SOURCE_FILE)
    if spec is None or spec.loader is None:
        raise FunctionInputError(f"cannot load {folder / boundary.FUNCTION_SOURCE_FILE}")
    module: ModuleType = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    except ModuleNotFoundError as err:
        raise FunctionInputError(missing_import_message(err)) from err
    function = getattr(module, call["function"], None)
    if not callable(function):
        raise FunctionInputError(f"{boundary.FUNCTION_SOURCE_FILE} defines no function {call['function']!r}")
    return function, call


def write_result(value: Any, env: dict[str, str] | os._Environ[str] = os.environ) -> Path:
    try:
        text = json.dumps({"result": value}, allow_nan=False)
    except (TypeError, ValueError) as err:
        raise FunctionInputError(
            f"rank 0's return value cannot cross back as JSON ({err}): return None, bool, int, float, str, list or "
            f"dict with string keys, and write anything bigger to {boundary.ENV_OUTPUT_DIR}"
        ) from None
    output = Path(env.get(boundary.ENV_OUTPUT_DIR, "").strip() or ".")
    output.mkdir(parents=True, exist_ok=True)
    path = output / boundary.FUNCTION_RESULT_FILE
    path.write_text(text)
    return path


def close_process_group() -> None:
    """Leave the process group the function opened, together with the other ranks.

    A rank that exits while a peer still holds its gloo pair makes that peer abort (SIGABRT) and torchrun then
    fails the whole job, so on success every rank meets at a barrier and destroys the group before it exits.
    """
    dist = sys.modules.get("torch.distributed")
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return
    dist.barrier()
    dist.destroy_process_group()


def main() -> int:
    rank = os.environ.get("RANK", "0")
    try:
        function, call = load(bundle_folder())
        try:
            result = function(*call.get("args", []), **call.get("kwargs", {}))
        except ModuleNotFoundError as err:
            raise FunctionInputError(missing_import_message(err)) from err
        if rank == "0":
            write_result(result)
        close_process_group()
    except FunctionInputError as err:
        print(f"trainium_trainer.function (rank {rank}): {err}", file=sys.stderr, flush=True)
        return boundary.EXIT_BAD_INPUT
    except Exception:  # noqa: BLE001 - the rank's own traceback is what the task must show
        print(f"trainium_trainer.function: the function raised on rank {rank}:", file=sys.stderr)
        traceback.print_exc()
        sys.stderr.flush()
        return 1
    return 0


if __name__ == "__main__":
    lean_exit.run(main)
