"""`bertkit app` in a real browser: the installed command on a free port, driven by Playwright through the system's
headless Chromium (Playwright's own browser download is not reachable here).

One newcomer's session, every step on the page: check a config and see the data as bertkit reads it, get a bad data
file refused, start a tiny run, watch its curve grow, reload and still see it, stop it, resume it, open its report,
try it on a sentence, compare two runs, push one to a (fake, local) Hub after reading its card, delete one; each screen
in English and in Chinese. Then what the page must never do to a run: closing the browser does not slow it, stopping
the app does not stop it, and a restarted app finds it. Set BERTKIT_APP_SCREENSHOTS=docs/app to write the screenshots
docs/app.md shows."""

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

playwright_api = pytest.importorskip("playwright.sync_api")
from bertkit import rundir, webapp_runs  # noqa: E402
from hub_server import FakeHub  # noqa: E402

BERTKIT = Path(sys.executable).with_name("bertkit")
SAMPLES = Path(__file__).resolve().parents[1] / "data" / "en_sentiment"
CHROMIUM = next((shutil.which(name) for name in ("chromium", "chromium-browser", "google-chrome")
                 if shutil.which(name)), None)
TOKEN = "hf_test_write_token"
PASSWORD = "a long enough password"
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no headless Chromium here (apt-get install chromium)")
# a tiny run that logs every other step and keeps checkpoints to resume from: long enough to stop half-way
WATCHED = ("train:\n  max_steps: 150\n  logging_steps: 2\n  save_strategy: steps\n  save_steps: 30\n"
           "  eval_strategy: steps\n  eval_steps: 30\n")
SHORT = "train:\n  max_steps: 10\n  logging_steps: 1\n"
ENDLESS = "train:\n  max_steps: 100000\n  logging_steps: 5\n  save_strategy: 'no'\n"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def stop_every_run(runs: Path) -> None:
    """The runs a test started are processes of their own, which outlive the test by design: a failed test must not
    leave one training (the endless one would hold a core for the rest of the suite)."""
    for lock in runs.glob(f"**/{rundir.LOCK_FILE}"):
        with contextlib.suppress(Exception):
            webapp_runs.stop(lock.parent)


@contextlib.contextmanager
def bertkit_app(folder: Path, *args, env: dict | None = None):
    """`bertkit app` as installed, in `folder`, on a free port; yields (url, process); stopped at the end, and with
    it every run still going under its runs directory (the test's own)."""
    port = free_port()
    process = subprocess.Popen([str(BERTKIT), "app", "--port", str(port), "--runs-dir", "runs", *args], cwd=folder,
                               env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=open(folder / f"app-{port}.log", "w"))  # noqa: SIM115
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
            break
        assert process.poll() is None, (folder / f"app-{port}.log").read_text()
        assert time.monotonic() < deadline, "bertkit app did not start"
        time.sleep(0.2)
    try:
        yield url, process
    except BaseException:
        stop_every_run(folder / "runs")
        raise
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            process.wait(30)


@contextlib.contextmanager
def chromium(**context):
    with playwright_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield browser.new_context(viewport={"width": 1100, "height": 900}, **context).new_page()
        finally:
            browser.close()


class Shots:
    """Screenshots of each screen, into $BERTKIT_APP_SCREENSHOTS (docs/app) or the test's folder."""

    def __init__(self, fallback: Path):
        self.folder = Path(os.environ.get("BERTKIT_APP_SCREENSHOTS") or fallback)
        self.folder.mkdir(parents=True, exist_ok=True)

    def __call__(self, page, name: str) -> None:
        page.screenshot(path=str(self.folder / f"{name}.png"), full_page=True)


def fill_train_form(page, url: str, name: str, model: str, train: str, yaml: str, dev: str | None = None) -> None:
    page.goto(f"{url}/train")
    with page.expect_navigation():
        page.select_option("#recipe", "classify")  # the page reloads with the recipe's configs and keys
    page.fill("#name", name)
    page.fill("#field-model", model)
    page.fill("#field-data-train", train)
    page.fill("#field-data-eval", dev or "")
    page.fill("#extra", yaml)


def click_and_wait(page, selector: str) -> None:
    """Click, and wait for the page it loads: a button that runs a bertkit command (Check runs validate and inspect,
    each importing transformers) may take its server more than the click's default 30 s on a busy machine."""
    with page.expect_navigation(timeout=120_000):
        page.click(selector, timeout=120_000)


def last_step(run_dir: Path) -> int:
    history = webapp_runs.history(run_dir)
    return history[-1]["step"] if history else 0


def wait_until(condition, seconds: float, what: str, every: float = 0.5) -> None:
    """Poll `condition` until it holds; fail with `what` after `seconds`."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(every)


def steps_per_second(run_dir: Path, seconds: float) -> float:
    start, began = last_step(run_dir), time.monotonic()
    time.sleep(seconds)
    return (last_step(run_dir) - start) / (time.monotonic() - began)


class Throttle(threading.Thread):
    """Holds a tiny run to about `rate` steps a second by pausing its process group (SIGSTOP, then SIGCONT) whenever
    it runs ahead. On an idle machine the tiny model trains a hundred steps a second, faster than the page's 2-second
    refresh can show it growing or a click can stop it half-way; on a busy one (CI) it is slower than `rate` and left
    alone. Follows the run through a resume (a new process holds the lock)."""

    def __init__(self, run_dir: Path, rate: float = 8.0):
        super().__init__(daemon=True)
        self.run_dir, self.rate, self.done = run_dir, rate, threading.Event()

    def run(self):
        pid = start = None
        while not self.done.is_set():
            holder = rundir.lock_holder(self.run_dir)
            if holder and holder > 0:
                if holder != pid:
                    pid, start = holder, (time.monotonic(), last_step(self.run_dir))
                ahead = last_step(self.run_dir) - start[1] - self.rate * (time.monotonic() - start[0])
                if ahead > 0:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(pid, signal.SIGSTOP)
                        self.done.wait(ahead / self.rate)
                        os.killpg(pid, signal.SIGCONT)
            self.done.wait(0.05)

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.done.set()
        self.join(10)


@pytest.fixture
def hub():
    server = FakeHub(token=TOKEN).start()
    yield server
    server.stop()


def test_a_newcomers_session_on_the_page(tmp_path, tiny_model_dir, hub):
    from playwright.sync_api import expect

    shots = Shots(tmp_path / "shots")
    (tmp_path / "bad.csv").write_text('text,label\n"a good film",positive\n"a bad film"\n', encoding="utf-8")
    hub_env = {"HF_ENDPOINT": hub.endpoint, "HF_HUB_OFFLINE": "0", "HF_HUB_DISABLE_XET": "1",
               "HF_HUB_DISABLE_TELEMETRY": "1", "HF_HOME": str(tmp_path / "hf_home")}
    train, dev = str(SAMPLES / "train.csv"), str(SAMPLES / "dev.csv")
    with bertkit_app(tmp_path, env=hub_env) as (url, _), chromium() as page:
        # Train: check first: the command, the config as validated and the data as bertkit reads it
        fill_train_form(page, url, "first", tiny_model_dir, train, WATCHED, dev)
        click_and_wait(page, "#check")
        command = page.inner_text("#command")
        assert command.startswith("bertkit run classify ") and "train.max_steps=150" in command
        assert "ok: classify config is valid" in page.text_content("#validate")
        assert "400 rows" in page.inner_text("#preview") and "label kind" in page.inner_text("#preview")
        shots(page, "train")

        # a bad data file: refused on the page, in the CLI's own words, and nothing starts
        page.fill("#field-data-train", str(tmp_path / "bad.csv"))
        click_and_wait(page, "#check")
        refusal = page.inner_text("#preview")
        assert refusal.startswith("error: ") and "bad.csv line 3 has 1 fields" in refusal
        assert "refused" in page.get_attribute("#preview", "class")
        shots(page, "train-refused")
        click_and_wait(page, "#start")  # the run itself refuses it before training, and the page says so
        assert page.url.endswith("/train") and "bad.csv line 3 has 1 fields" in page.text_content("#validate")
        assert not rundir.is_bertkit_run(tmp_path / "runs" / "first")

        # Start: the run's page, its curve growing
        run_dir = tmp_path / "runs" / "first"
        with Throttle(run_dir):  # (a tiny run on an idle machine outruns the page: held to 8 steps a second)
            page.fill("#field-data-train", train)
            click_and_wait(page, "#start")
            assert page.url.endswith("/watch/first")
            page.wait_for_function("() => Number((document.querySelector('#step') || {textContent: ''}).textContent"
                                   ".replace(/\\D/g, '')) >= 10", timeout=120_000)
            grown = int(page.inner_text("#step").split()[-1])
            page.wait_for_function(f"() => Number(document.querySelector('#step').textContent.replace(/\\D/g, '')) > "
                                   f"{grown}", timeout=60_000)
            assert int(page.get_attribute("#charts", "data-charts")) >= 2  # loss and learning rate at least
            shots(page, "watch")
            page.reload()  # the page is the run directory: a reload shows the curves again
            assert int(page.get_attribute("#charts", "data-charts")) >= 2
            assert int(page.inner_text("#step").split()[-1]) >= grown

            # Stop once a checkpoint exists; the run is unfinished and resumable
            # (a stop mid-save leaves that checkpoint incomplete)
            wait_until(lambda: rundir.last_complete_checkpoint(run_dir) is not None, 120, "no checkpoint", every=0.3)
            click_and_wait(page, "#stop")
            expect(page.locator("#status")).to_have_text("unfinished", timeout=30_000)
            stopped = last_step(run_dir)
            assert stopped < 150 and webapp_runs.history(run_dir)
            time.sleep(2)
            assert last_step(run_dir) == stopped  # it really stopped
            click_and_wait(page, "#resume")
            expect(page.locator("#status")).to_have_text("finished", timeout=240_000)
        assert "resuming from" in (run_dir / "train.log").read_text(encoding="utf-8")
        assert last_step(run_dir) == 150

        # its report
        page.click("#report")
        page.wait_for_load_state()
        assert "The answer" in page.content()
        shots(page, "report")

        # a second, short run, to compare with: its data uploaded (into the runs directory) instead of a path
        fill_train_form(page, url, "second", tiny_model_dir, "", SHORT)
        page.set_input_files("#upload-data-train", train)
        click_and_wait(page, "#start")
        uploaded = list((tmp_path / "runs" / ".app" / "uploads").glob("*-train.csv"))
        assert len(uploaded) == 1 and f"data.train={uploaded[0]}" in page.inner_text("#command")
        expect(page.locator("#status")).to_have_text("finished", timeout=180_000)

        # Try: a sentence in, the label with its probabilities out
        page.goto(f"{url}/watch/first")
        click_and_wait(page, "#try")
        page.fill("#field-text", "a warm and funny film")
        click_and_wait(page, "#predict")
        answer = page.text_content("#answer")  # the JSON, under the probabilities drawn as bars
        assert '"label"' in answer and '"probabilities"' in answer
        assert page.locator("table.probabilities tr").count() == 2
        shots(page, "try")
        page.set_input_files("#upload", str(SAMPLES / "dev.csv"))  # a whole file: bertkit predict, downloaded
        click_and_wait(page, "#predict-file")
        assert "wrote 120 predictions" in page.inner_text("#file-output")
        with page.expect_download() as download:
            page.click("#download")
        assert len(Path(download.value.path()).read_text(encoding="utf-8").splitlines()) == 120

        # a second launch into a finished run's folder is refused as the CLI refuses it
        fill_train_form(page, url, "first", tiny_model_dir, train, SHORT)
        click_and_wait(page, "#start")
        assert page.url.endswith("/train") and "already holds a finished run" in page.text_content("#validate")

        # Runs: both, and their comparison
        page.goto(f"{url}/runs")
        assert page.locator("#runs tr[data-run]").count() == 2
        shots(page, "runs")
        page.check("input[value=first]")
        page.check("input[value=second]")
        click_and_wait(page, "#compare")
        assert "/file/.app/compare/" in page.url and "first" in page.content() and "second" in page.content()
        shots(page, "compare")

        # Share: the card first, then the push (the token goes in the child's environment, not its arguments)
        page.goto(f"{url}/push/first")
        assert page.inner_text("#card").startswith("---")
        page.fill("#repo", "tester/app-first")
        page.fill("#token", TOKEN)
        shots(page, "share")
        click_and_wait(page, "#push")
        assert "ok" in page.get_attribute("#pushed", "class") and "tester/app-first" in page.inner_text("#pushed")
        assert TOKEN not in page.content()
        assert {"model.safetensors", "config.json", "README.md"} <= set(hub.files("tester/app-first"))

        # Delete, after a confirmation
        page.goto(f"{url}/watch/second")
        click_and_wait(page, "#delete")
        click_and_wait(page, "#confirm-delete")
        assert not (tmp_path / "runs" / "second").exists() and page.locator("#runs tr[data-run]").count() == 1

        # every screen in Chinese too: the switch, kept by a cookie
        page.goto(f"{url}/runs?lang=zh")
        assert "运行记录" in page.content() and "已完成" in page.inner_text("#runs")
        shots(page, "runs-zh")
        for screen, words in (("/train", "开始一次训练"), ("/watch/first", "曲线"), ("/try/first", "试用模型"),
                              ("/push/first", "推送到 Hugging Face Hub")):
            page.goto(url + screen)
            assert words in page.content(), screen
            shots(page, screen.strip("/").split("/")[0] + "-zh")
        page.goto(f"{url}/train")
        with page.expect_navigation():
            page.select_option("#recipe", "classify")
        assert "常用设置" in page.content()
        shots(page, "train-zh")


def test_the_page_never_holds_a_run_back(tmp_path, tiny_model_dir):
    """Closing the browser leaves the run's speed as it was; stopping the app leaves the run running; a restarted app
    finds it and stops it. With --auth, a wrong password gets nothing."""
    env = {"BERTKIT_APP_PASSWORD": PASSWORD}
    with bertkit_app(tmp_path, "--auth", "ana", env=env) as (url, app_process):
        with chromium(http_credentials={"username": "ana", "password": "wrong password"}) as page:
            response = page.goto(f"{url}/runs")
            assert response.status == 401 and "Runs" not in page.content()
        with chromium(http_credentials={"username": "ana", "password": PASSWORD}) as page:
            fill_train_form(page, url, "endless", tiny_model_dir, str(SAMPLES / "train.csv"), ENDLESS)
            click_and_wait(page, "#start")
            run_dir = tmp_path / "runs" / "endless"
            wait_until(lambda: last_step(run_dir) >= 20, 120, "the run did not start")
            watched = steps_per_second(run_dir, 10)  # the page polls its fragment every 2 s meanwhile
        alone = steps_per_second(run_dir, 10)  # the browser is gone
        print(f"steps/s with the page open {watched:.1f}, after the browser closed {alone:.1f}")
        # within the noise of a shared 2-core machine; what this guards against is a run that stalls (a child writing
        # into a pipe nobody reads any more stops dead: 0 steps/s)
        assert watched > 0 and alone >= 0.4 * watched, (watched, alone)
        app_process.send_signal(signal.SIGINT)
        app_process.wait(30)
    try:
        after_the_app(tmp_path, run_dir, env)
    finally:
        stop_every_run(tmp_path / "runs")


def after_the_app(tmp_path: Path, run_dir: Path, env: dict) -> None:
    # the app is gone; the run goes on: a step logged after the app stopped (within a minute: a run sharing two busy
    # cores with the suite can log only every few seconds, so a fixed 4-second window once saw none)
    stopped = last_step(run_dir)
    wait_until(lambda: last_step(run_dir) > stopped, 60, "the run stopped with the app")
    import httpx

    with bertkit_app(tmp_path, "--auth", "ana", env=env) as (url, _):
        client = httpx.Client(base_url=url, auth=("ana", PASSWORD), timeout=30)
        row = [line for line in client.get("/runs").text.splitlines() if 'data-run="endless"' in line]
        assert row and "status-running" in client.get("/runs").text
        assert client.post("/stop/endless").status_code in (200, 303)
        wait_until(lambda: "status-unfinished" in client.get("/live/endless").text, 30,
                   "the restarted app did not stop the run")
