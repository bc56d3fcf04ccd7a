"""A run whose training loss turns NaN / inf or explodes stops with one line, instead of training on and saving a
broken model as a success: no completion record is written (finish_run never runs), the exit code is 2 (the
learning rate, or the precision, is a setting to change), and the line names the step, the loss and the likely
cause.

The rule (LossWatch), over the losses Trainer logs (each the mean over logging_steps steps):
- a NaN or inf loss stops the run at once (bertkit turns off Trainer's logging_nan_inf_filter, which would
  otherwise log a run of NaN steps as the mean of the finite ones, or as 0.0);
- an explosion is a logged loss above max(10 x the first logged loss, the first + 10) twice in a row, or at the
  last log of the run. One spike that comes back down is a noisy batch, not a diverged model: a batch-1 run's
  confident mistake can log 6-9 once; a diverged one stays up (0.69 -> 40 -> 271 at learning rate 1e3)."""

from __future__ import annotations

import math

import transformers

from ..console import say
from ..errors import BertkitError

EXPLODES_BY = 10.0  # a loss this many times the first logged one (and at least FLOOR above it) has exploded
FLOOR = 10.0
SUSTAINED = 2  # logged losses in a row over the line


def _rate(value: float) -> str:
    """A learning rate as YAML reads it back as a float: 1.0e2, 3.0e-5."""
    mantissa, exponent = f"{value:.1e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def _loss(value: float) -> str:
    return f"{value:.4g}" if math.isfinite(value) else str(value)


class LossWatch:
    """The rule, apart from Trainer: `check(step, loss)` for each logged loss and `at_end()` when training ends
    return the one-line problem, or None."""

    def __init__(self, learning_rate: float, fp16: bool = False):
        self.learning_rate, self.fp16 = float(learning_rate), fp16
        self.first: tuple[int, float] | None = None
        self.over: list[tuple[int, float]] = []
        self.last: tuple[int, float] | None = None

    def limit(self) -> float | None:
        if self.first is None:
            return None
        first = self.first[1]
        return max(EXPLODES_BY * first, first + FLOOR)

    def check(self, step: int, loss: float) -> str | None:
        loss = float(loss)
        if not math.isfinite(loss):
            return self._problem(step, loss, "the training loss is " + _loss(loss) + " (the weights diverged)")
        if self.first is None:
            self.first = (step, loss)
        self.last = (step, loss)
        if loss > self.limit():
            self.over.append((step, loss))
            if len(self.over) >= SUSTAINED:
                return self._exploded(step, loss)
        else:
            self.over = []
        return None

    def at_end(self) -> str | None:
        """A run that ends with its last logged loss over the line has diverged, however briefly it was there."""
        if self.over and self.last is not None and self.over[-1] == self.last:
            return self._exploded(*self.last)
        return None

    def _exploded(self, step: int, loss: float) -> str:
        first_step, first = self.first
        return self._problem(step, loss, f"the training loss exploded to {_loss(loss)} (from {_loss(first)} at step "
                                         f"{first_step}; more than {EXPLODES_BY:g}x)")

    def _problem(self, step: int, loss: float, what: str) -> str:
        lower = _rate(self.learning_rate / 10)
        cause = (f"the learning rate {self.learning_rate:g} is likely too high: try train.learning_rate={lower} "
                 "(10x lower)")
        if self.fp16:
            cause += "; or an fp16 overflow: try precision=bf16 or precision=fp32"
        return f"training stopped at step {step}: {what} — {cause}"


class LossGuard(transformers.TrainerCallback):
    """LossWatch on a Trainer: raises BertkitError (so finish_run and its completion record never run) at the
    logged loss that breaks the rule, or at the end of training. In a hyperparameter search the trial stops instead,
    with a line, and the search goes on with the next trial (a high learning rate is what some trials try)."""

    def __init__(self, trainer: transformers.Trainer):
        self.trainer = trainer
        self.watch: LossWatch | None = None

    def on_train_begin(self, args, state, control, **kwargs):
        self.watch = LossWatch(args.learning_rate, bool(args.fp16))

    def on_log(self, args, state, control, logs=None, **kwargs):
        logs = logs or {}
        if self.watch is None:
            self.on_train_begin(args, state, control)
        problem = None
        if "loss" in logs:
            problem = self.watch.check(state.global_step, logs["loss"])
        elif isinstance(logs.get("train_loss"), float) and not math.isfinite(logs["train_loss"]):
            problem = self.watch.check(state.global_step, logs["train_loss"])
        self._stop(problem, control)

    def on_train_end(self, args, state, control, **kwargs):
        if self.watch is not None:
            self._stop(self.watch.at_end(), control)

    def _stop(self, problem: str | None, control) -> None:
        if problem is None:
            return
        if getattr(self.trainer, "hp_search_backend", None) is not None and getattr(self.trainer, "_trial", None):
            say(f"search trial stopped: {problem}")
            control.should_training_stop = True
            return
        for callback in self.trainer.callback_handler.callbacks:  # a live progress bar would swallow the line
            stop = getattr(callback, "stop_display", None)
            if callable(stop):
                stop()
        raise BertkitError(problem)


__all__ = ["LossWatch", "LossGuard", "EXPLODES_BY", "FLOOR"]
