"""A full disk while a run saves: recognised whatever library raised it, and said in one line (where, what was kept)."""

from __future__ import annotations

import contextlib
import errno
import shutil
from collections.abc import Iterator
from pathlib import Path

from ..errors import BertkitError
from .checkpoints import last_complete_checkpoint

_DISK_FULL_TEXT = ("no space left", "os error 28", "storagefull", "basic_ios::clear", "iostream error",
                   "file write failed", "disk quota")


def is_disk_full(error: BaseException) -> bool:
    """ENOSPC, or what torch.save (`basic_ios::clear: iostream error`, `file write failed`) and safetensors
    (`IoError(Os { code: 28 ... })`) say instead when the disk fills under them."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if isinstance(error, (RuntimeError, OSError)) or type(error).__name__ == "SafetensorError":
            if any(text in str(error).lower() for text in _DISK_FULL_TEXT):
                return True
        error = error.__cause__ or error.__context__
    return False


@contextlib.contextmanager
def disk_full_guard(run_dir: str | Path, saving: str) -> Iterator[None]:
    """A full disk while `saving` becomes one line: where, and what was kept."""
    try:
        yield
    except Exception as error:
        if not is_disk_full(error):
            raise
        run_dir = Path(run_dir)
        kept = last_complete_checkpoint(run_dir)
        free = ""
        with contextlib.suppress(OSError):
            free = f", {shutil.disk_usage(run_dir).free / 2**20:,.0f} MB free"
        kept_text = (f"kept {kept} (the last complete checkpoint)" if kept else "no complete checkpoint was kept")
        raise BertkitError(f"disk full while saving {saving} to {run_dir}{free}: the run is not finished; "
                           f"{kept_text} — free space (or choose an output_dir on another disk), then rerun with "
                           f"{'resume=true' if kept else 'overwrite=true'}") from None


__all__ = ["is_disk_full", "disk_full_guard"]
