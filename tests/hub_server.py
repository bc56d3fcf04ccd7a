"""A small fake Hugging Face Hub for tests: stdlib HTTP on 127.0.0.1, talked to by the real `huggingface_hub` client.

In-memory, git-like: repos hold branches that point at commits; a commit holds a full snapshot `path -> Blob`.
Commit ids are the sha1 of the commit's content (parent, message, tree), blobs carry their git oid and sha256.

Routes (those huggingface_hub 2.4 uses to create, upload and download a model repo):
    GET  /api/whoami-v2
    POST /api/repos/create
    POST /api/validate-yaml
    GET  /api/models/{ns}/{name}[/revision/{rev}]          repo_info / model_info (carries `sha`)
    GET  /api/models/{ns}/{name}/tree/{rev}[/{path}]       list_repo_tree (?recursive=, ?expand=)
    GET  /api/models/{ns}/{name}/refs                      list_repo_refs
    POST /api/models/{ns}/{name}/branch/{branch}           create_branch (409 when it exists)
    POST /api/models/{ns}/{name}/preupload/{rev}           uploadMode "regular" | "lfs" (by size), shouldIgnore, oid
    POST /api/models/{ns}/{name}/commit/{rev}              NDJSON: header, file, lfsFile, deletedFile, deletedFolder
    HEAD/GET /{ns}/{name}/resolve/{rev}/{path}             X-Repo-Commit, ETag, Content-Length, X-Error-Code, Range
    POST /{ns}/{name}.git/info/lfs/objects/batch           LFS batch: basic PUT, or multipart with `chunk_size`
    POST /{ns}/{name}.git/info/lfs/objects/verify          LFS verify
    PUT  /__lfs/{upload_id}[/part/{n}]                     the "S3" side: whole object, or one part (returns ETag)
    POST /__lfs/{upload_id}/complete                       multipart completion

Errors are 4xx with the Hub's `X-Error-Code` / `X-Error-Message` headers (the client retries 5xx for ~23 s).
Only `token` is a valid credential; a wrong one gets 401 "Invalid credentials in Authorization header", as on
the Hub. Use with Xet disabled: a file answered "lfs" would otherwise go through Xet, which this fake cannot serve.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import secrets
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

import yaml

GITATTRIBUTES = b"*.safetensors filter=lfs diff=lfs merge=lfs -text\n*.bin filter=lfs diff=lfs merge=lfs -text\n"
BAD_TOKEN_MESSAGE = "Invalid credentials in Authorization header"
PIPELINE_TAGS = {
    "text-classification", "token-classification", "question-answering", "fill-mask", "multiple-choice",
    "feature-extraction", "sentence-similarity", "zero-shot-classification", "text-generation",
}  # fmt: skip
_BRANCH_NAME = re.compile(r"^(?!.*\.\.)(?!/)[A-Za-z0-9._/-]{1,100}(?<![/.])$")


def git_oid(content: bytes) -> str:
    """What `git hash-object` prints: sha1 of "blob {size}\\0" + content."""
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


def lfs_pointer(sha256: str, size: int) -> bytes:
    return f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {size}\n".encode()


@dataclass(frozen=True)
class Blob:
    content: bytes
    lfs: bool

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.content).hexdigest()

    @property
    def oid(self) -> str:
        """Git oid of what git stores: the content, or the LFS pointer for an LFS file."""
        return git_oid(lfs_pointer(self.sha256, len(self.content)) if self.lfs else self.content)

    @property
    def upload_oid(self) -> str:
        """The oid preupload reports, compared by the client with its local one: sha256 for LFS, git oid else."""
        return self.sha256 if self.lfs else git_oid(self.content)


@dataclass
class Commit:
    sha: str
    parent: str | None
    message: str
    files: dict[str, Blob]


@dataclass
class Repo:
    repo_id: str
    private: bool
    branches: dict[str, str] = field(default_factory=dict)
    commits: dict[str, Commit] = field(default_factory=dict)

    def resolve(self, revision: str) -> Commit | None:
        sha = self.branches.get(revision, revision)
        return self.commits.get(sha)

    def history(self, revision: str) -> list[Commit]:
        commit, out = self.resolve(revision), []
        while commit is not None:
            out.append(commit)
            commit = self.commits.get(commit.parent) if commit.parent else None
        return out


class HubError(Exception):
    """An error answer: status, message, and the Hub's X-Error-Code when it has one."""

    def __init__(self, status: int, message: str, code: str | None = None, headers: dict | None = None):
        super().__init__(message)
        self.status, self.message, self.code, self.headers = status, message, code, headers or {}


class FakeHub:
    """The storage and the rules; `FakeHubHandler` only parses HTTP and calls in here."""

    def __init__(self, token: str = "hf_test_write_token", user: str = "tester", lfs_threshold: int | None = None,
                 part_size: int | None = None, orgs: tuple[str, ...] = ()):  # fmt: skip
        self.token, self.user, self.orgs = token, user, set(orgs)
        self.lfs_threshold = lfs_threshold  # files of this size or more are "lfs"; None: all "regular"
        self.part_size = part_size  # LFS objects above this size are uploaded multipart
        self.repos: dict[str, Repo] = {}
        self.lfs_objects: dict[str, bytes] = {}
        self.uploads: dict[str, dict] = {}  # upload_id -> {"oid", "size", "parts": {n: bytes}}
        self.log: list[tuple[str, str]] = []  # (method, path) of every request, for assertions
        self.bugs: list[str] = []  # exceptions inside the fake itself; tests assert it stays empty
        self.fail_next: dict[str, HubError] = {}  # route name -> error to answer once (tests of failed pushes)
        self.lock = threading.RLock()
        self.endpoint = ""  # set when the server starts
        self._server: ThreadingHTTPServer | None = None

    # ------------------------------------------------------------ lifecycle

    def start(self) -> FakeHub:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), FakeHubHandler)
        self._server.hub = self  # type: ignore[attr-defined]
        self._server.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},  # fast shutdown
                         name="fake-hub", daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    # ------------------------------------------------------------ helpers for tests

    def commit_count(self, repo_id: str, revision: str = "main") -> int:
        return len(self.repos[repo_id].history(revision))

    def files(self, repo_id: str, revision: str = "main") -> dict[str, bytes]:
        commit = self.repos[repo_id].resolve(revision)
        return {path: blob.content for path, blob in commit.files.items()}

    def calls(self, method: str, prefix: str) -> int:
        return sum(1 for m, p in self.log if m == method and p.startswith(prefix))

    # ------------------------------------------------------------ auth and lookup

    def check_auth(self, authorization: str | None, required: bool) -> bool:
        """True when the caller holds the valid token. A wrong token is always a 401, as on the Hub."""
        if authorization:
            if authorization.removeprefix("Bearer ").strip() != self.token:
                raise HubError(401, BAD_TOKEN_MESSAGE, headers={"X-Error-Message": BAD_TOKEN_MESSAGE})
            return True
        if required:
            raise HubError(401, "Invalid username or password.")
        return False

    def can_write(self, namespace: str) -> bool:
        return namespace == self.user or namespace in self.orgs

    def get_repo(self, repo_id: str, authed: bool) -> Repo:
        repo = self.repos.get(repo_id)
        if repo is None or (repo.private and not authed):
            raise HubError(404, f"Repository not found: {repo_id}", code="RepoNotFound")
        return repo

    def writable_repo(self, repo_id: str) -> Repo:
        repo = self.get_repo(repo_id, authed=True)
        if not self.can_write(repo_id.split("/")[0]):
            raise HubError(403, f"You don't have the rights to write to {repo_id}")
        return repo

    def get_commit(self, repo: Repo, revision: str) -> Commit:
        commit = repo.resolve(revision)
        if commit is None:
            raise HubError(404, f"Revision not found: {revision}", code="RevisionNotFound")
        return commit

    def take_failure(self, route: str) -> None:
        error = self.fail_next.pop(route, None)
        if error is not None:
            raise error

    # ------------------------------------------------------------ git-like storage

    def new_commit(self, repo: Repo, branch: str, message: str, files: dict[str, Blob]) -> Commit:
        parent = repo.branches.get(branch)
        tree = "\n".join(f"{path} {blob.oid}" for path, blob in sorted(files.items()))
        sha = hashlib.sha1(f"parent {parent}\n{message}\n{tree}".encode()).hexdigest()
        commit = Commit(sha=sha, parent=parent, message=message, files=dict(files))
        repo.commits[sha] = commit
        repo.branches[branch] = sha
        return commit

    def create_repo(self, body: dict) -> dict:
        namespace = body.get("organization") or self.user
        repo_id = f"{namespace}/{body.get('name')}"
        if body.get("type", "model") not in (None, "model"):
            raise HubError(400, "This fake Hub only hosts model repos")
        if not self.can_write(namespace):
            raise HubError(403, f"You don't have the rights to create a model under the namespace \"{namespace}\"")
        url = f"{self.endpoint}/{repo_id}"
        if repo_id in self.repos:
            raise HubError(409, "You already created this model repo", headers={"X-Json-Body": {"url": url}})
        private = bool(body.get("private")) or body.get("visibility") == "private"
        repo = self.repos[repo_id] = Repo(repo_id=repo_id, private=private)
        # The Hub starts every repo with one commit holding .gitattributes.
        self.new_commit(repo, "main", "initial commit", {".gitattributes": Blob(GITATTRIBUTES, lfs=False)})
        return {"url": url, "name": repo_id, "id": repo_id}

    def model_info(self, repo: Repo, revision: str) -> dict:
        commit = self.get_commit(repo, revision)
        return {
            "id": repo.repo_id, "modelId": repo.repo_id, "author": repo.repo_id.split("/")[0], "sha": commit.sha,
            "private": repo.private, "disabled": False, "gated": False, "downloads": 0, "likes": 0, "tags": [],
            "siblings": [{"rfilename": path} for path in sorted(commit.files)],
        }  # fmt: skip

    def tree(self, repo: Repo, revision: str, prefix: str, recursive: bool) -> list[dict]:
        commit = self.get_commit(repo, revision)
        base = f"{prefix.strip('/')}/" if prefix.strip("/") else ""
        entries: dict[str, dict] = {}
        for path, blob in sorted(commit.files.items()):
            if not path.startswith(base):
                continue
            rest = path[len(base) :].split("/")
            depth = len(rest) if recursive else 1
            for i in range(1, min(depth, len(rest) - 1) + 1):  # folders on the way
                folder = base + "/".join(rest[:i])
                entries.setdefault(folder, {"type": "directory", "oid": git_oid(folder.encode()), "size": 0,
                                            "path": folder})  # fmt: skip
            if recursive or len(rest) == 1:
                entries[path] = self._file_entry(path, blob)
        if base and not entries:
            raise HubError(404, f"Entry not found: {prefix}", code="EntryNotFound")
        return list(entries.values())

    @staticmethod
    def _file_entry(path: str, blob: Blob) -> dict:
        entry = {"type": "file", "oid": blob.oid, "size": len(blob.content), "path": path}
        if blob.lfs:
            pointer = lfs_pointer(blob.sha256, len(blob.content))
            entry["lfs"] = {"oid": blob.sha256, "size": len(blob.content), "pointerSize": len(pointer)}
        return entry

    def create_branch(self, repo: Repo, branch: str, body: dict) -> dict:
        if not _BRANCH_NAME.match(branch) or branch.startswith("refs/") or re.fullmatch(r"[0-9a-f]{40}", branch):
            raise HubError(400, f"Invalid reference name: {branch}")
        if branch in repo.branches:
            raise HubError(409, f"Reference already exists: refs/heads/{branch}")
        start = self.get_commit(repo, body.get("startingPoint") or "main")
        repo.branches[branch] = start.sha
        return {}

    def preupload(self, repo: Repo, revision: str, body: dict) -> dict:
        commit = self.get_commit(repo, revision)
        files = []
        for item in body.get("files", []):
            path, size = item["path"], int(item["size"])
            lfs = self.lfs_threshold is not None and size >= self.lfs_threshold
            existing = commit.files.get(path)
            files.append({"path": path, "uploadMode": "lfs" if lfs else "regular", "shouldIgnore": False,
                          "oid": existing.upload_oid if existing is not None else None})  # fmt: skip
        return {"files": files, "commitOid": commit.sha}

    def commit(self, repo: Repo, revision: str, lines: list[dict]) -> dict:
        if revision not in repo.branches:
            raise HubError(404, f"Revision not found: {revision} (commits go to a branch)", code="RevisionNotFound")
        head = self.get_commit(repo, revision)
        header = lines[0]["value"] if lines and lines[0].get("key") == "header" else None
        if header is None or not header.get("summary"):
            raise HubError(400, "The commit needs a header line with a summary")
        if header.get("parentCommit") not in (None, head.sha):
            raise HubError(412, "A commit has happened since the parent commit you gave")
        files = dict(head.files)
        for op in lines[1:]:
            self._apply(files, op["key"], op["value"])
        new = self.new_commit(repo, revision, header["summary"], files)
        return {"success": True, "commitOid": new.sha, "commitUrl": f"{self.endpoint}/{repo.repo_id}/commit/{new.sha}",
                "pullRequestUrl": None}  # fmt: skip

    def _apply(self, files: dict[str, Blob], key: str, value: dict) -> None:
        path = value["path"]
        if key == "file":
            files[path] = Blob(base64.b64decode(value["content"]), lfs=False)
        elif key == "lfsFile":
            content = self.lfs_objects.get(value["oid"])
            if content is None:
                raise HubError(422, f"LFS object {value['oid']} for {path} was not uploaded")
            files[path] = Blob(content, lfs=True)
        elif key == "deletedFile":
            if files.pop(path, None) is None:
                raise HubError(404, f"A file with this name doesn't exist: {path}", code="EntryNotFound")
        elif key == "deletedFolder":
            for name in [p for p in files if p.startswith(path.rstrip("/") + "/")]:
                del files[name]
        else:
            raise HubError(400, f"Unknown commit operation: {key}")

    def validate_yaml(self, body: dict) -> dict:
        """The checks of the Hub's metadata validator that matter for a model card; 400 with `errors` else."""
        match = re.match(r"^\s*---\r?\n([\s\S]*?)\r?\n---", body.get("content", ""))
        if match is None:
            return {"errors": [], "warnings": [{"message": "Empty or missing yaml metadata in repo card"}]}
        try:
            meta = yaml.safe_load(match.group(1))
        except yaml.YAMLError as err:
            raise HubError(400, "Invalid YAML", headers={"X-Json-Body": {"errors": [{"message": str(err)}]}})
        errors = _metadata_errors(meta)
        if errors:
            raise HubError(400, "Invalid metadata", headers={"X-Json-Body": {"errors": errors}})
        return {"errors": [], "warnings": []}

    # ------------------------------------------------------------ LFS

    def lfs_batch(self, repo: Repo, body: dict) -> dict:
        if body.get("operation") != "upload":
            raise HubError(400, "Only uploads are served")
        objects, multipart = [], False
        for obj in body.get("objects", []):
            oid, size = obj["oid"], int(obj["size"])
            entry = {"oid": oid, "size": size, "authenticated": True}
            if oid not in self.lfs_objects:  # already stored: no actions, the client skips the upload
                entry["actions"], is_multi = self._lfs_actions(repo, oid, size)
                multipart |= is_multi
            objects.append(entry)
        return {"transfer": "multipart" if multipart else "basic", "objects": objects}

    def _lfs_actions(self, repo: Repo, oid: str, size: int) -> tuple[dict, bool]:
        upload_id = secrets.token_hex(8)
        self.uploads[upload_id] = {"oid": oid, "size": size, "parts": {}}
        base = f"{self.endpoint}/__lfs/{upload_id}"
        verify = {"href": f"{self.endpoint}/{repo.repo_id}.git/info/lfs/objects/verify", "header": {}}
        if self.part_size is None or size <= self.part_size:
            return {"upload": {"href": base, "header": {}}, "verify": verify}, False
        n_parts = -(-size // self.part_size)
        header = {"chunk_size": str(self.part_size)}
        header.update({str(n): f"{base}/part/{n}" for n in range(1, n_parts + 1)})
        return {"upload": {"href": f"{base}/complete", "header": header}, "verify": verify}, True

    def lfs_put(self, upload_id: str, part: int | None, content: bytes) -> dict:
        upload = self.uploads.get(upload_id)
        if upload is None:
            raise HubError(404, "Unknown upload")
        if part is None:
            self._store_lfs(upload["oid"], upload["size"], content)
            return {}
        upload["parts"][part] = content
        return {"ETag": f'"{hashlib.md5(content).hexdigest()}"'}

    def lfs_complete(self, upload_id: str, body: dict) -> None:
        upload = self.uploads.get(upload_id)
        if upload is None or body.get("oid") != upload["oid"]:
            raise HubError(404, "Unknown upload")
        parts = upload["parts"]
        for item in body.get("parts", []):
            content = parts.get(item["partNumber"])
            if content is None or item["etag"].strip('"') != hashlib.md5(content).hexdigest():
                raise HubError(400, f"Part {item['partNumber']} is missing or its ETag does not match")
        if len(body.get("parts", [])) != len(parts):
            raise HubError(400, "Completion lists a different number of parts than were uploaded")
        self._store_lfs(upload["oid"], upload["size"], b"".join(parts[n] for n in sorted(parts)))

    def _store_lfs(self, oid: str, size: int, content: bytes) -> None:
        if len(content) != size or hashlib.sha256(content).hexdigest() != oid:
            raise HubError(400, f"Uploaded content does not match oid {oid} / size {size}")
        self.lfs_objects[oid] = content

    def lfs_verify(self, body: dict) -> dict:
        content = self.lfs_objects.get(body.get("oid"))
        if content is None or len(content) != body.get("size"):
            raise HubError(404, f"LFS object {body.get('oid')} not found")
        return {}


def _metadata_errors(meta: object) -> list[dict]:
    if not isinstance(meta, dict):
        return [{"message": "metadata must be a YAML mapping"}]
    errors = []
    if "license" in meta and not isinstance(meta["license"], str):
        errors.append({"message": '"license" must be a string'})
    if "pipeline_tag" in meta and meta["pipeline_tag"] not in PIPELINE_TAGS:
        errors.append({"message": f'"pipeline_tag" must be a known task, got {meta["pipeline_tag"]!r}'})
    if "model-index" in meta:
        errors += _model_index_errors(meta["model-index"])
    return errors


def _model_index_errors(model_index: object) -> list[dict]:
    """model-index: [{name, results: [{task: {type}, dataset: {type, name}, metrics: [{type, value}]}]}]."""
    try:
        assert isinstance(model_index, list) and model_index
        for model in model_index:
            assert isinstance(model["name"], str) and isinstance(model["results"], list)
            for result in model["results"]:
                assert isinstance(result["task"]["type"], str)
                assert isinstance(result["dataset"]["type"], str) and isinstance(result["dataset"]["name"], str)
                for metric in result["metrics"]:
                    assert isinstance(metric["type"], str) and "value" in metric
    except (AssertionError, KeyError, TypeError) as err:
        return [{"message": f'"model-index" is malformed ({type(err).__name__}: {err})'}]
    return []


# ---------------------------------------------------------------- HTTP side

_API_REPO = re.compile(r"^/api/models/([^/]+/[^/]+)(?:/(revision|tree|refs|branch|preupload|commit)(?:/(.*))?)?$")
_RESOLVE = re.compile(r"^/([^/]+/[^/]+)/resolve/([^/]+)/(.+)$")
_LFS_API = re.compile(r"^/([^/]+/[^/]+)\.git/info/lfs/objects/(batch|verify)$")
_LFS_STORE = re.compile(r"^/__lfs/([0-9a-f]+)(?:/(part)/(\d+)|/(complete))?$")


class FakeHubHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, like the real Hub: every answer carries Content-Length
    disable_nagle_algorithm = True  # headers and body go out in two writes: no 40 ms delayed-ACK stall

    def log_message(self, format, *args):  # noqa: A002 - silence the per-request stderr line
        pass

    @property
    def hub(self) -> FakeHub:
        return self.server.hub  # type: ignore[attr-defined]

    # ---- plumbing

    def _body(self) -> bytes:
        """Request body, Content-Length or chunked (httpx streams file uploads chunked)."""
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _json_body(self) -> dict:
        raw = self._body()
        return json.loads(raw) if raw else {}

    def _send(self, status: int, payload: bytes = b"", headers: dict | None = None, head_only: bool = False,
              content_type: str = "application/json") -> None:  # fmt: skip
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if not head_only:
            self.wfile.write(payload)

    def _send_json(self, obj: object, status: int = 200, headers: dict | None = None) -> None:
        self._send(status, json.dumps(obj).encode(), headers)

    def _send_error(self, err: HubError, head_only: bool = False) -> None:
        headers = {k: v for k, v in err.headers.items() if k != "X-Json-Body"}
        headers.setdefault("X-Error-Message", err.message)
        if err.code:
            headers["X-Error-Code"] = err.code
        body = {"error": err.message, **err.headers.get("X-Json-Body", {})}
        self._send(err.status, json.dumps(body).encode(), headers, head_only=head_only)

    def _dispatch(self, method: str) -> None:
        split = urlsplit(self.path)
        path, query = split.path, parse_qs(split.query)
        with self.hub.lock:
            self.hub.log.append((method, unquote(path)))
        try:
            body = self._body() if method in ("POST", "PUT") else b""
            with self.hub.lock:
                self._route(method, path, query, body)
        except HubError as err:
            self._send_error(err, head_only=method == "HEAD")
        except Exception as err:  # a bug in the fake: answer 4xx at once (a dropped connection is retried ~23 s)
            self.hub.bugs.append(repr(err))
            self._send_error(HubError(400, f"fake hub bug: {err!r}"), head_only=method == "HEAD")

    do_GET = lambda self: self._dispatch("GET")  # noqa: E731
    do_HEAD = lambda self: self._dispatch("HEAD")  # noqa: E731
    do_POST = lambda self: self._dispatch("POST")  # noqa: E731
    do_PUT = lambda self: self._dispatch("PUT")  # noqa: E731

    # ---- routes

    def _route(self, method: str, path: str, query: dict, body: bytes) -> None:
        hub, auth = self.hub, self.headers.get("Authorization")
        if path == "/api/whoami-v2" and method == "GET":
            hub.check_auth(auth, required=True)
            return self._send_json({"type": "user", "name": hub.user, "orgs": [{"name": o} for o in hub.orgs],
                                    "auth": {"accessToken": {"displayName": "test", "role": "write"}}})  # fmt: skip
        if path == "/api/repos/create" and method == "POST":
            hub.check_auth(auth, required=True)
            return self._send_json(hub.create_repo(json.loads(body or b"{}")))
        if path == "/api/validate-yaml" and method == "POST":
            hub.check_auth(auth, required=False)
            return self._send_json(hub.validate_yaml(json.loads(body or b"{}")))
        if m := _API_REPO.match(path):
            return self._api_repo(method, unquote(m.group(1)), m.group(2), m.group(3), query, body)
        if m := _RESOLVE.match(path):
            return self._resolve(method, unquote(m.group(1)), unquote(m.group(2)), unquote(m.group(3)))
        if m := _LFS_API.match(path):
            return self._lfs_api(unquote(m.group(1)), m.group(2), json.loads(body or b"{}"))
        if m := _LFS_STORE.match(path):
            return self._lfs_store(method, m, body)
        if path.startswith("/api/models/"):  # e.g. a repo id without namespace: the Hub says "not found"
            raise HubError(404, f"Repository not found: {path[len('/api/models/'):]}", code="RepoNotFound")
        raise HubError(404, f"No route for {method} {path}")

    def _api_repo(self, method: str, repo_id: str, action: str | None, rest: str | None, query: dict,
                  body: bytes) -> None:  # fmt: skip
        hub = self.hub
        authed = hub.check_auth(self.headers.get("Authorization"), required=method == "POST")
        rest = rest or ""
        if method == "GET" and action in (None, "revision"):
            return self._send_json(hub.model_info(hub.get_repo(repo_id, authed), unquote(rest) or "main"))
        if method == "GET" and action == "tree":
            revision, _, prefix = rest.partition("/")
            recursive = query.get("recursive", ["false"])[0].lower() in ("true", "1")
            repo = hub.get_repo(repo_id, authed)
            return self._send_json(hub.tree(repo, unquote(revision), unquote(prefix), recursive))
        if method == "GET" and action == "refs":
            repo = hub.get_repo(repo_id, authed)
            branches = [{"name": b, "ref": f"refs/heads/{b}", "targetCommit": s} for b, s in repo.branches.items()]
            return self._send_json({"branches": branches, "converts": [], "tags": []})
        if method == "POST" and action in ("branch", "preupload", "commit"):
            return self._write(action, hub.writable_repo(repo_id), unquote(rest), query, body)
        raise HubError(404, f"No route for {method} {self.path}")

    def _write(self, action: str, repo: Repo, revision: str, query: dict, body: bytes) -> None:
        hub = self.hub
        hub.take_failure(action)
        if query.get("create_pr"):
            raise HubError(400, "This fake Hub does not do pull requests")
        if action == "branch":
            return self._send_json(hub.create_branch(repo, revision, json.loads(body or b"{}")))
        if action == "preupload":
            return self._send_json(hub.preupload(repo, revision, json.loads(body or b"{}")))
        if self.headers.get("Content-Type", "").split(";")[0] != "application/x-ndjson":
            raise HubError(400, "The commit body must be NDJSON (Content-Type: application/x-ndjson)")
        lines = [json.loads(line) for line in body.decode().splitlines() if line.strip()]
        return self._send_json(hub.commit(repo, revision, lines))

    def _resolve(self, method: str, repo_id: str, revision: str, filename: str) -> None:
        hub = self.hub
        authed = hub.check_auth(self.headers.get("Authorization"), required=False)
        commit = hub.get_commit(hub.get_repo(repo_id, authed), revision)
        blob = commit.files.get(filename)
        if blob is None:
            raise HubError(404, f"Entry not found: {filename}", code="EntryNotFound",
                           headers={"X-Repo-Commit": commit.sha})  # fmt: skip
        etag = blob.sha256 if blob.lfs else blob.oid
        headers = {"X-Repo-Commit": commit.sha, "ETag": f'"{etag}"', "Accept-Ranges": "bytes"}
        if blob.lfs:
            headers.update({"X-Linked-Etag": f'"{etag}"', "X-Linked-Size": str(len(blob.content))})
        content, status = blob.content, 200
        if (rng := re.match(r"bytes=(\d+)-(\d*)$", self.headers.get("Range", ""))) and method == "GET":
            start = int(rng.group(1))
            end = int(rng.group(2)) if rng.group(2) else len(content) - 1
            headers["Content-Range"] = f"bytes {start}-{end}/{len(content)}"
            content, status = content[start : end + 1], 206
        self._send(status, content, headers, head_only=method == "HEAD", content_type="application/octet-stream")

    def _lfs_api(self, repo_id: str, action: str, body: dict) -> None:
        hub = self.hub
        hub.check_auth(self.headers.get("Authorization"), required=True)
        repo = hub.writable_repo(repo_id)
        answer = hub.lfs_batch(repo, body) if action == "batch" else hub.lfs_verify(body)
        self._send(200, json.dumps(answer).encode(), content_type="application/vnd.git-lfs+json")

    def _lfs_store(self, method: str, match: re.Match, body: bytes) -> None:
        # Like presigned S3 URLs: the unguessable upload id is the credential, no Authorization header.
        upload_id, part, complete = match.group(1), match.group(3), match.group(4)
        if method == "PUT" and not complete:
            return self._send(200, b"", self.hub.lfs_put(upload_id, int(part) if part else None, body))
        if method == "POST" and complete:
            self.hub.lfs_complete(upload_id, json.loads(body or b"{}"))
            return self._send_json({})
        raise HubError(405, f"{method} not allowed here")


__all__ = ["FakeHub", "Blob", "Commit", "Repo", "HubError", "git_oid"]
