"""A run directory you can trust: what a bertkit run leaves in its output_dir, and the checks before anything reads
it or writes into it.

- The completion record (`bertkit_run.json`) is written last, atomically (temp file + os.replace): the recipe, start
  and finish times, the run's fingerprint, and every top-level file with its size and sha256. No record beside a
  `bertkit_config.yaml` (or a fingerprint) = an unfinished run; a file that differs from the record, or a file that
  changes how the directory loads but is not in it = a mixed directory. Both are refused by every reader (predict,
  evaluate, push, model=<dir>). sha256, not size + mtime: a second run of the same architecture writes weights of
  the same size, and copies (cp, rsync, a Hub download) change mtimes; hashing reads the files once, as loading
  them does anyway (about 1 GB/s).
- The fingerprint (`bertkit_fingerprint.json`, written at the start) is the resolved config without the keys that
  only say how far or how often a continued run goes, plus the content hash of every data file the config names:
  resume=true continues only a checkpoint of the same run.
- The lock (`.bertkit.lock`: the pid, and fcntl.flock held for the whole run): a second run into the same directory
  is refused while the first lives. The kernel drops a flock when its process dies, so a stale file never blocks.
  Only rank 0 of a torchrun launch takes it (it is the one that writes).

    files.py        the file names, JSON (atomic where it must be), the resolved config
    record.py       the completion record and the state of a directory
    lock.py         the lock
    fingerprint.py  the fingerprint and the resume check
    lifecycle.py    start (take and check the directory) and begin (clear what overwrite=true replaces)
    checkpoints.py  config.json and weights read with errors that name them; the newest complete checkpoint
    disk.py         a full disk said in one line
    outputs.py      what a command may write where (never an input, the model read, a run directory; a run never
                    into the model or data it reads), and writes through a temporary name renamed when complete
"""

from __future__ import annotations

from .checkpoints import (WEIGHT_FILES, check_weights, checkpoint_problem, checkpoints_newest_first,
                          last_complete_checkpoint, model_task, read_config_json, safetensors_problem)
from .disk import disk_full_guard, is_disk_full
from .files import (CONTINUATION_KEYS, CURVE_FILE, FINGERPRINT_FILE, LOCK_FILE, LOG_FILE, LOG_HISTORY_FILE,
                    METRICS_FILE, RECORD_FILE, RUN_CONFIG_FILE, RUN_OUTPUTS, file_digest, read_run_config,
                    save_run_config, write_json, write_json_atomic)
from .fingerprint import check_resume_fingerprint, fingerprint, fingerprint_difference
from .lifecycle import begin, clear_old_run, start
from .lock import acquire, lock_holder, release
from .record import check_finished, is_bertkit_run, record_problem, remove_record, run_state, write_record

__all__ = [
    "RECORD_FILE", "FINGERPRINT_FILE", "LOCK_FILE", "RUN_CONFIG_FILE", "LOG_FILE", "LOG_HISTORY_FILE", "METRICS_FILE",
    "CURVE_FILE",
    "RUN_OUTPUTS", "CONTINUATION_KEYS", "run_state", "check_finished", "record_problem", "write_record",
    "remove_record", "acquire", "release", "lock_holder", "fingerprint", "fingerprint_difference",
    "check_resume_fingerprint", "start", "begin", "clear_old_run", "checkpoint_problem", "last_complete_checkpoint",
    "checkpoints_newest_first", "WEIGHT_FILES", "safetensors_problem", "check_weights", "read_config_json",
    "model_task", "is_disk_full", "disk_full_guard", "file_digest", "write_json_atomic", "write_json",
    "read_run_config", "save_run_config", "is_bertkit_run",
]
