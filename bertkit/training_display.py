"""The live display of a training run: bertkit's Trainer callback (every logged dict into train.log; on the console
one progress line, one line per evaluation and one per checkpoint) in place of Trainer's own bars and printed dicts.
The rest of what a person sees (modes, warnings, summaries, the bar over predicted examples) is bertkit/console.py,
which imports no transformers: commands that load no model use it too."""

from __future__ import annotations

import json
import time

import transformers
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from . import console as screen  # screen.console is looked up at each use: a test may replace it
from .console import fmt_duration, fmt_metric, mode, run_log, shows

LOSS_SMOOTHING = 0.6  # weight of the newest logged loss (each is already Trainer's mean over logging_steps steps)
PLAIN_LINES = 10  # progress lines of a run whose console is not a terminal (a file, a pipe): one per tenth


class TrainingDisplay(transformers.TrainerCallback):
    """bertkit's Trainer callback: every logged dict into train.log; on rank 0 in normal mode a live progress line
    (plain lines at each tenth of the run when the console is not a terminal), one line per evaluation with the
    selection metric and whether it is the best so far, and one per checkpoint."""

    def __init__(self):
        self.progress: Progress | None = None
        self.task = None
        self.loss = self.lr = None
        self.best = self.best_step = None
        self.started = self.start_step = 0
        self.next_plain = 0
        self.eval_batches = 0

    # ---- Trainer events

    def on_train_begin(self, args, state, control, **kwargs):
        self.started, self.start_step = time.perf_counter(), state.global_step
        self.best, self.best_step = None, None
        if not (shows("info") and mode() == "normal"):
            return
        if screen.console.is_terminal:
            self.progress = _progress_bar()
            self.task = self.progress.add_task("train", total=state.max_steps, completed=state.global_step,
                                               **self._fields(args, state))
            self.progress.start()
        self.next_plain = state.global_step + max(1, state.max_steps // PLAIN_LINES)

    def on_step_end(self, args, state, control, **kwargs):
        if self.progress is not None:
            self.progress.update(self.task, completed=state.global_step, **self._fields(args, state))

    def on_prediction_step(self, args, state, control, eval_dataloader=None, **kwargs):
        if self.progress is not None and eval_dataloader is not None and hasattr(eval_dataloader, "__len__"):
            self.eval_batches += 1
            self.progress.update(self.task, phase=f"[cyan]dev {self.eval_batches}/{len(eval_dataloader)}[/]")

    def on_log(self, args, state, control, logs=None, **kwargs):
        logs = logs or {}
        run_log.write("logged " + json.dumps({"step": state.global_step, **logs}, default=str))
        if "loss" in logs:
            loss = float(logs["loss"])
            self.loss = loss if self.loss is None else LOSS_SMOOTHING * loss + (1 - LOSS_SMOOTHING) * self.loss
        self.lr = logs.get("learning_rate", self.lr)
        if any(key.startswith("eval_") and key.endswith("_runtime") for key in logs):
            self._evaluation_line(args, state, logs)
        elif "loss" in logs:
            self._plain_progress(args, state)

    def on_save(self, args, state, control, **kwargs):
        self.print(f"[dim]saved checkpoint-{state.global_step}[/]")

    def stop_display(self) -> None:
        """Stop the live line (a run that stops with an error: its one line must not be drawn over)."""
        if self.progress is not None:
            self.progress.stop()
            self.progress = None

    def on_train_end(self, args, state, control, **kwargs):
        self.stop_display()
        steps = state.global_step - self.start_step
        seconds = time.perf_counter() - self.started
        self.print(f"trained {steps} steps in {fmt_duration(seconds)} ({self._speed(args, state)})")

    # ---- what is shown

    def print(self, markup: str) -> None:
        if not (shows("info") and mode() == "normal"):
            return
        shown_on = self.progress.console if self.progress is not None else screen.console
        shown_on.print(markup, soft_wrap=True, highlight=False)

    def _evaluation_line(self, args, state, logs: dict) -> None:
        self.eval_batches = 0
        if self.progress is not None:
            self.progress.update(self.task, phase=self._fields(args, state)["epoch"])
        key = args.metric_for_best_model
        key = key if key is None or key.startswith("eval_") else f"eval_{key}"
        parts = [f"dev  epoch {state.epoch or 0:g}  step {state.global_step}"]
        if key in logs:
            value = float(logs[key])
            better = self.best is None or (value > self.best if args.greater_is_better else value < self.best)
            parts.append(f"[bold]{key.removeprefix('eval_')} {fmt_metric(value)}[/]")
            if better:
                self.best, self.best_step = value, state.global_step
                parts.append("[green]best so far[/]")
            else:
                parts.append(f"[dim](best {fmt_metric(self.best)} at step {self.best_step})[/]")
        if "eval_loss" in logs and key != "eval_loss":
            parts.append(f"loss {float(logs['eval_loss']):.4f}")
        self.print("  ".join(parts))

    def _plain_progress(self, args, state) -> None:
        if self.progress is not None or state.global_step < self.next_plain:
            return
        self.next_plain = state.global_step + max(1, state.max_steps // PLAIN_LINES)
        fields = self._fields(args, state)
        elapsed = time.perf_counter() - self.started
        done = state.global_step - self.start_step
        left = elapsed / done * (state.max_steps - state.global_step) if done else 0
        self.print(f"step {state.global_step}/{state.max_steps}  {fields['epoch']}  {fields['loss']}  {fields['lr']}"
                   f"  {fields['speed']}  {fmt_duration(elapsed)} elapsed, {fmt_duration(left)} left")

    def _fields(self, args, state) -> dict:
        epochs = getattr(state, "num_train_epochs", 0)
        epoch = f"epoch {state.epoch or 0:.2f}" + (f"/{epochs:g}" if epochs else "")
        return {"epoch": epoch, "loss": f"loss {self.loss:.4f}" if self.loss is not None else "loss -",
                "lr": f"lr {self.lr:.2e}" if self.lr is not None else "lr -", "speed": self._speed(args, state),
                "phase": epoch}

    def _speed(self, args, state) -> str:
        seconds = max(time.perf_counter() - self.started, 1e-9)
        tokens = getattr(state, "num_input_tokens_seen", 0) or 0
        if tokens:
            return f"{tokens / seconds:,.0f} tok/s"
        examples = (state.global_step - self.start_step) * args.train_batch_size * \
            args.gradient_accumulation_steps * max(args.world_size, 1)
        return f"{examples / seconds:,.1f} ex/s"


def _progress_bar() -> Progress:
    """One line: epoch (or the dev batch during an evaluation), bar, step m/n, smoothed loss, lr, throughput,
    elapsed<remaining. The bar takes what the terminal has left."""
    return Progress(TextColumn("{task.fields[phase]}"), BarColumn(bar_width=None), MofNCompleteColumn(),
                    TextColumn("{task.fields[loss]}"), TextColumn("{task.fields[lr]}"),
                    TextColumn("{task.fields[speed]}"), screen._TimeColumn(), console=screen.console, transient=True,
                    expand=True)


def use_display(trainer: transformers.Trainer) -> TrainingDisplay:
    """Put bertkit's display in place of Trainer's progress bars and printed dicts (verbose mode keeps those).
    Other callbacks - report_to integrations (TensorBoard, W&B, MLflow), early stopping - stay as they are."""
    if mode() != "verbose":
        trainer.remove_callback(transformers.trainer_callback.ProgressCallback)
        trainer.remove_callback(transformers.trainer_callback.PrinterCallback)
    for callback in trainer.callback_handler.callbacks:
        if isinstance(callback, TrainingDisplay):
            return callback
    display = TrainingDisplay()
    trainer.add_callback(display)
    return display


__all__ = ["TrainingDisplay", "use_display", "LOSS_SMOOTHING", "PLAIN_LINES"]
