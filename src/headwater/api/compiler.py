"""Compiling a `@dsl.pipeline` to KFP IR (PipelineSpec YAML or JSON) with KFP's own compiler."""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from pathlib import Path
from typing import Any

from headwater.errors import InvalidArgumentError, PipelineLoadError

__all__ = ["compile"]

_SUFFIXES = (".yaml", ".yml", ".json")


# Named after `kfp.compiler.Compiler().compile`; it shadows the builtin only in this module.
def compile(pipeline: Any, output: str | Path, *, pipeline_name: str | None = None) -> Path:
    """Compile a pipeline to the IR file `output`, as `kfp.compiler.Compiler` writes it.

    The file is written whole or not at all (a temporary file beside it, then renamed);
    missing parent directories are created.

    Args:
        pipeline: A `.py` file defining `@dsl.pipeline` functions, or a pipeline object.
        output: The `.yaml`, `.yml` or `.json` file to write.
        pipeline_name: Which pipeline of a file that defines several.

    Returns:
        The path written.

    Raises:
        PipelineLoadError: The file is missing, is not a .py file, defines no pipeline or
            several, or fails while loading.
        InvalidArgumentError: `output` has another suffix, is a directory, or cannot be
            written.
    """
    out = Path(output)
    if out.suffix not in _SUFFIXES:
        raise InvalidArgumentError(f"output must end in .yaml, .yml or .json, got {str(output)!r}")
    if out.is_dir():
        raise InvalidArgumentError(
            f"output {str(output)!r} is a directory: give a file name, such as "
            f"{str(out / 'pipeline.yaml')!r}"
        )
    component = _component(pipeline, pipeline_name)
    from kfp import compiler

    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        # Replacing the file would succeed where writing it would not: refuse as `cp` does.
        if out.exists() and not os.access(out, os.W_OK):
            raise PermissionError(errno.EACCES, "Permission denied")
        mode = out.stat().st_mode & 0o777 if out.exists() else 0o644
        fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=out.suffix, dir=out.parent)
        os.close(fd)
        os.chmod(tmp, mode)  # mkstemp makes it 0600
    except (FileExistsError, NotADirectoryError) as exc:  # a parent is a file
        raise InvalidArgumentError(
            f"cannot write {str(output)!r}: {str(exc.filename)!r} is not a directory: "
            "choose another path"
        ) from exc
    except OSError as exc:
        raise InvalidArgumentError(
            f"cannot write {str(output)!r}: {exc.strerror or exc}: choose a writable path"
        ) from exc
    try:
        compiler.Compiler().compile(component, tmp)
        os.replace(tmp, out)
    except OSError as exc:
        raise InvalidArgumentError(
            f"cannot write {str(output)!r}: {exc.strerror or exc}: choose a writable path"
        ) from exc
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    return out


def _component(pipeline: Any, pipeline_name: str | None) -> Any:
    """The KFP pipeline object to compile, loaded by the pipeline loader."""
    if hasattr(pipeline, "pipeline_spec"):
        return pipeline
    from headwater.spec.loader import _pick_pipeline

    path = Path(pipeline)
    if not path.is_file() or path.suffix != ".py":
        raise PipelineLoadError(
            f"compile needs a .py file with a @dsl.pipeline, got {str(pipeline)!r}"
        )
    return _pick_pipeline(path, pipeline_name)
