"""Push a model directory written by a bertkit run to the Hugging Face Hub.

Only what a user of the model needs goes up: weights (safetensors), config, tokenizer files, the resolved
bertkit config, metrics, figures and the model card. Optimizer state, checkpoints, pickles and token files stay
home. The user's directory is never written to: a missing README.md is rendered into a temporary staging folder
that holds links to the chosen files.

Re-pushing unchanged files makes no commit: huggingface_hub 2.4 asks the Hub's preupload endpoint for each file's
remote oid, drops files whose local oid matches (both its upload paths do: legacy LFS and Xet) and, when nothing
is left, returns the branch head instead of committing. We compare that with the head read before the upload.
"""

from __future__ import annotations

import contextlib
import fnmatch
import importlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from huggingface_hub import HfApi, get_token
from huggingface_hub.errors import (
    HfHubHTTPError,
    OfflineModeIsEnabled,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.utils import HFValidationError, filter_repo_objects, validate_repo_id

from .console import is_main_process, say
from .errors import BertkitError
from .model_card import render_model_card
from .rundir import check_finished, check_weights, read_config_json

# What a model repo needs. `*` in these patterns crosses "/" (fnmatch), hence the "*/*" ignore below.
ALLOW_PATTERNS = [
    "*.safetensors",
    "*.safetensors.index.json",  # sharded weights
    "config.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "vocab.txt",
    "special_tokens_map.json",
    "added_tokens.json",
    "bertkit_config.yaml",
    "metrics.json",
    "*.png",
    "report.html",  # the run as one self-contained page (bertkit/report.py)
    "README.md",
    "adapter_config.json",
    "adapter_model.safetensors",
]

# Belt and braces over the allowlist. "*/*": only top-level files, so checkpoint-*/ (optimizer state, rng
# state, a second copy of the weights) and logs never go up, whatever they contain.
IGNORE_PATTERNS = [
    "*/*",
    "checkpoint-*",
    "optimizer.pt",
    "scheduler.pt",
    "rng_state*",
    "training_args.bin",
    "*.bin",
    "*.pt",
    "*.pth",
    "*.pkl",
    "token",
    "*.token",
    "*hf_token*",
    ".env",
]

DEFAULT_COMMIT_MESSAGE = "Upload model with bertkit"
NO_CHANGES = "no changes"

# A connect that hangs (firewalled host) must not hang the push: the client's own requests have no timeout.
_PROBE_TIMEOUT_S = 15.0

# Hub user access tokens: "hf_" + 34 letters/digits. Text files that ship are scanned for them.
_TOKEN_RE = re.compile(r"hf_[A-Za-z0-9]{30,}")
_TOKEN_KEY_RE = re.compile(r"^\s*[\"']?(hub_token|hf_token|token)[\"']?\s*:\s*[\"']?([^\s\"',}]+)", re.MULTILINE)
_SCANNED_SUFFIXES = (".json", ".yaml", ".yml", ".md")
_SETTINGS_SUFFIXES = (".json", ".yaml", ".yml")  # where a `token:` key is a setting, not prose
_NOT_SCANNED = {"tokenizer.json", "vocab.txt"}  # vocabularies: large, and hold no settings


# ---------------------------------------------------------------- the local side (no network)


def select_files(model_dir: Path) -> list[str]:
    """Names of the top-level files of `model_dir` that a push uploads, then those of its sentence-transformers
    module folders (module_files), sorted."""
    names = sorted(p.name for p in model_dir.iterdir() if p.is_file())
    top = filter_repo_objects(names, allow_patterns=ALLOW_PATTERNS + SENTENCE_TRANSFORMERS_FILES,
                              ignore_patterns=IGNORE_PATTERNS)
    top = [*top, *(name for name in task_files(model_dir) if name in names and name not in top)]
    return sorted([*top, *module_files(model_dir)])


def task_files(model_dir: Path) -> tuple[str, ...]:
    """The files by name that the model's task needs besides those above (its module's MODEL_FILES: a few-shot
    model's config_setfit.json and its head, a pickle that IGNORE_PATTERNS otherwise keeps back)."""
    from . import tasks

    return tuple(tasks.task_part(tasks.sentence_transformers_kind(str(model_dir)) or "", "MODEL_FILES") or ())


# A sentence-transformers folder (an embed run): what SentenceTransformer(repo) reads besides the model's own files.
SENTENCE_TRANSFORMERS_FILES = ["modules.json", "config_sentence_transformers.json", "sentence_bert_config.json"]


def module_files(model_dir: Path) -> list[str]:
    """The files of the module folders a sentence-transformers modules.json names ("1_Pooling/config.json",
    "2_Normalize/config.json"; a Dense module's weights), one level deep and filtered as top-level files are: the
    only files below the top level that a push uploads."""
    try:
        modules = json.loads((model_dir / "modules.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    folders = {str(m.get("path") or "") for m in modules if isinstance(m, dict)} if isinstance(modules, list) else ()
    files = []
    for folder in sorted(f for f in folders if re.fullmatch(r"\d+_[\w.-]+", f) and (model_dir / f).is_dir()):
        names = sorted(p.name for p in (model_dir / folder).iterdir() if p.is_file())
        kept = filter_repo_objects(names, allow_patterns=ALLOW_PATTERNS, ignore_patterns=IGNORE_PATTERNS)
        files += [f"{folder}/{name}" for name in kept]
    return files


def check_model_dir(model_dir: Path) -> list[str]:
    """The files to upload; BertkitError when the dir is not a saved model."""
    if not model_dir.is_dir():
        raise BertkitError(
            f"model dir {model_dir} does not exist: pass the output dir of a bertkit run "
            "(the one holding config.json and model.safetensors)"
        )
    files = select_files(model_dir)
    if "config.json" not in files and "adapter_config.json" not in files:
        raise BertkitError(
            f"{model_dir} has no config.json: pass the dir the run saved its final model to "
            "(the one holding config.json and model.safetensors)"
        )
    if not any(name.endswith(".safetensors") for name in files):
        pickles = sorted(p.name for p in model_dir.glob("*.bin") if p.name != "training_args.bin")
        fix = (
            f"only pickle weights ({', '.join(pickles)}) found; re-save with model.save_pretrained(dir), "
            "which writes safetensors"
            if pickles
            else "save the model with model.save_pretrained(dir) (or trainer.save_model()) first"
        )
        raise BertkitError(f"{model_dir} has no *.safetensors weights: {fix}")
    return files


def _check_no_secrets(model_dir: Path, files: list[str], token: str | None) -> None:
    """Refuse to publish a token that ended up in a config (e.g. `train.hub_token` in bertkit_config.yaml)."""
    for name in files:
        if not name.endswith(_SCANNED_SUFFIXES) or name in _NOT_SCANNED:
            continue
        text = (model_dir / name).read_text(encoding="utf-8", errors="replace")
        for number, line in enumerate(text.split("\n"), start=1):
            key = _TOKEN_KEY_RE.match(line) if name.endswith(_SETTINGS_SUFFIXES) else None
            literal = token is not None and len(token) >= 8 and token in line
            if _TOKEN_RE.search(line) or literal or (key and key.group(2).lower() not in ("null", "none", "~")):
                raise BertkitError(
                    f"{model_dir / name} line {number} holds what looks like a Hub token: remove it "
                    "(pass tokens with --token or HF_TOKEN, never in a config), then push again"
                )


@contextlib.contextmanager
def _staged(model_dir: Path, files: list[str], readme: str | None) -> Iterator[Path]:
    """A temporary folder with links to `files` (copies where links fail) plus the generated README.md."""
    with tempfile.TemporaryDirectory(prefix="bertkit-push-") as tmp:
        stage = Path(tmp)
        for name in files:
            source = (model_dir / name).resolve()
            (stage / name).parent.mkdir(exist_ok=True)  # a sentence-transformers module folder (module_files)
            try:
                os.symlink(source, stage / name)
            except OSError:  # e.g. Windows without symlink rights
                shutil.copy2(source, stage / name)
        if readme is not None:
            (stage / "README.md").write_text(readme, encoding="utf-8")
        yield stage


# ---------------------------------------------------------------- errors


def _token_source(token: str | None) -> str | None:
    """Where the token comes from, in the words a user acts on; None when there is no token at all."""
    if token:
        return "the token passed with --token"
    if os.environ.get("HF_TOKEN") or os.environ.get("HUGGING_FACE_HUB_TOKEN"):
        return "the HF_TOKEN environment variable"
    return "the saved login (`hf auth login`)" if get_token() else None


def _one_line(text: object, limit: int = 200) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def _status(err: HfHubHTTPError) -> int | None:
    response = getattr(err, "response", None)
    return getattr(response, "status_code", None)


def network_errors() -> tuple[type[BaseException], ...]:
    """Connection, timeout and network errors of the HTTP library huggingface_hub talks through: httpx2 under
    huggingface_hub 2.x, httpx under 1.x. Looked up, not imported by name: bertkit does not depend on either
    itself, and pyproject.toml allows both Hub clients."""
    found: list[type[BaseException]] = []
    for name in ("httpx2", "httpx"):
        try:
            library = importlib.import_module(name)
        except ImportError:
            continue
        found += [getattr(library, kind) for kind in ("ConnectError", "TimeoutException", "NetworkError")
                  if isinstance(getattr(library, kind, None), type)]
    return tuple(found)


def check_repo_id(repo_id: str) -> None:
    """Refuse what the Hub would refuse as a repo id ('../x', 'user/a b', 'a/b/c'), before anything is read or sent."""
    try:
        validate_repo_id(repo_id)
    except HFValidationError:
        raise BertkitError(f"{repo_id!r} is not a Hub repo id — write namespace/name (or just name): letters, "
                           "digits, '-', '_' and '.', no part starting or ending with '-' or '.', no '--' or '..', "
                           "at most 96 characters, e.g. user/my-model") from None


def explain(
    err: BaseException, *, endpoint: str, repo_id: str, revision: str | None, source: str | None
) -> str | None:
    """One-line message (what is wrong + the fix) for an error from the Hub client; None if it is not one."""
    if isinstance(err, OfflineModeIsEnabled):
        return "HF_HUB_OFFLINE is set, so the Hub cannot be reached: unset HF_HUB_OFFLINE to push"
    if isinstance(err, network_errors()):
        return (
            f"cannot reach the Hub at {endpoint} ({_one_line(err, 80) or type(err).__name__}): "
            "check the endpoint (--endpoint / HF_ENDPOINT) and your network, then push again"
        )
    if isinstance(err, ValueError) and "Invalid metadata in README.md" in str(err):
        return (
            f"README.md has invalid metadata ({_one_line(str(err).split('README.md.', 1)[-1])}): fix its YAML "
            "front matter, or delete README.md to get a generated model card"
        )
    if not isinstance(err, HfHubHTTPError):
        return None
    return _explain_http(err, endpoint=endpoint, repo_id=repo_id, revision=revision, source=source)


def _explain_http(err: HfHubHTTPError, *, endpoint: str, repo_id: str, revision: str | None, source: str | None) -> str:
    status, server = _status(err), _one_line(err.server_message or "")
    namespace = repo_id.split("/")[0] if "/" in repo_id else "your"
    if isinstance(err, RevisionNotFoundError):
        return (f"branch '{revision or 'main'}' not found in {repo_id}: check --revision (a branch name), "
                "then push again")
    if status == 401 and not isinstance(err, RepositoryNotFoundError):
        return (
            f"the Hub rejected {source or 'the token'} (401 Unauthorized): pass a valid write token with --token, "
            "set HF_TOKEN, or run `hf auth login`"
        )
    if status == 403:
        return (
            f"{source or 'the token'} may not write to {repo_id} (403 Forbidden): use a write token for the "
            f"'{namespace}' namespace (--token or HF_TOKEN), or push to a namespace you own"
        )
    if isinstance(err, RepositoryNotFoundError):
        return (
            f"repo {repo_id} not found on {endpoint}: check the repo id (namespace/name) and that "
            f"{source or 'your token'} can see it"
        )
    detail = f": {server}" if server else ""
    return f"the Hub refused the push ({status}{detail}); fix that and push again (unchanged files are skipped)"


@contextlib.contextmanager
def _hub_errors(endpoint: str, repo_id: str, revision: str | None, source: str | None) -> Iterator[None]:
    try:
        yield
    except Exception as err:
        message = explain(err, endpoint=endpoint, repo_id=repo_id, revision=revision, source=source)
        if message is None:
            raise
        raise BertkitError(message) from err


# ---------------------------------------------------------------- the remote side


def _probe(api: HfApi, repo_id: str) -> None:
    """Fail fast on a dead endpoint or a bad token, before any upload work.

    `model_info` is one plain GET with a timeout: a refused connection fails at once (the client's backoff
    loop, ~23 s, is only used by other calls). A missing repo is fine: the push creates it.
    """
    try:
        api.model_info(repo_id, timeout=_PROBE_TIMEOUT_S)
    except RepositoryNotFoundError:
        pass
    except HfHubHTTPError as err:
        if _status(err) == 401:
            raise  # a wrong token: nothing later can succeed
        # 403 etc.: let create_repo / the upload report it with its own context.


def _ensure_repo(api: HfApi, repo_id: str, private: bool, revision: str | None) -> tuple[str, str | None]:
    """Create the repo (and branch) when missing; return the full repo id and the branch head before upload."""
    repo_id = api.create_repo(repo_id, private=private, exist_ok=True).repo_id
    if revision not in (None, "main"):
        api.create_branch(repo_id, branch=revision, exist_ok=True)
    return repo_id, api.model_info(repo_id, revision=revision).sha


def push_finished_run(output_dir: Path | str, repo_id: str) -> str | None:
    """`push=user/repo` at the end of a recipe: every process of a torchrun reaches that line, one pushes. The URL
    on rank 0 (printed), None elsewhere."""
    if not is_main_process():
        return None
    url = push_model(output_dir, repo_id)
    say(f"pushed to {url}")
    return url


def _checked_upload(model_dir: Path, token: str | None) -> tuple[list[str], str]:
    """The files to upload and where the token comes from, after every check a push makes before any request:
    a token, no secrets, a finished run whose record lists each file, a valid config.json and whole weights."""
    files = check_model_dir(model_dir)
    source = _token_source(token)
    if source is None:
        raise BertkitError("no Hub token found: pass --token, set HF_TOKEN, or run `hf auth login`")
    _check_no_secrets(model_dir, files, token or get_token())
    # A bertkit run: finished, and every file that goes up is one its completion record lists, unchanged.
    # (the record lists top-level files: a module folder's small configs are not in it)
    check_finished(model_dir, "push", must_be_recorded=[name for name in files if name != "README.md"
                                                         and "/" not in name])
    # What goes up must load: config.json valid, every weights file whole (0-byte / truncated ones are refused).
    if "config.json" in files:
        read_config_json(model_dir / "config.json")
    check_weights(model_dir)
    return files, source


def push_model(
    model_dir: Path | str,
    repo_id: str,
    *,
    private: bool = False,
    revision: str | None = None,
    commit_message: str | None = None,
    endpoint: str | None = None,
    token: str | None = None,
) -> str:
    """Upload a saved model dir to the Hub; return the commit URL, or "no changes" when the repo already has it.

    Token: `token`, else HF_TOKEN, else the saved login (huggingface_hub's order). `revision` is a branch, created
    from main when missing. Errors are BertkitErrors that say what to do; a failed push changes nothing locally
    and can simply be re-run.
    """
    check_repo_id(repo_id)
    model_dir = Path(model_dir).expanduser()
    files, source = _checked_upload(model_dir, token)
    # Rendered before any request, so a malformed metrics.json fails before a repo is created.
    readme = None if "README.md" in files else render_model_card(model_dir, repo_id=repo_id)
    api = HfApi(endpoint=endpoint.rstrip("/") if endpoint else None, token=token)
    with _hub_errors(api.endpoint, repo_id, revision, source):
        _probe(api, repo_id)
        full_id, head = _ensure_repo(api, repo_id, private, revision)
        if readme is not None and full_id != repo_id:  # "name" became "namespace/name": the snippet needs it
            readme = render_model_card(model_dir, repo_id=full_id)
        repo_id = full_id
        named = [name for name in task_files(model_dir) if name in files]
        with _staged(model_dir, files, readme) as folder:
            info = api.upload_folder(
                repo_id=repo_id,
                folder_path=folder,
                revision=revision,
                commit_message=commit_message or DEFAULT_COMMIT_MESSAGE,
                allow_patterns=ALLOW_PATTERNS + SENTENCE_TRANSFORMERS_FILES + [n for n in files if "/" in n]
                + list(named),
                # A copy: upload_folder appends its defaults to the list it is given. The stage holds only the
                # selected files, so "*/*" is dropped for a sentence-transformers folder's module files, and a
                # pattern that would keep back a file the task names (a few-shot head: "*.pkl") is dropped too.
                ignore_patterns=[p for p in IGNORE_PATTERNS if (p != "*/*" or not any("/" in n for n in files))
                                 and not any(fnmatch.fnmatch(n, p) for n in named)],
            )
    return NO_CHANGES if info.oid == head else info.commit_url


__all__ = [
    "push_model",
    "push_finished_run",
    "check_model_dir",
    "select_files",
    "explain",
    "check_repo_id",
    "network_errors",
    "ALLOW_PATTERNS",
    "IGNORE_PATTERNS",
    "NO_CHANGES",
]
