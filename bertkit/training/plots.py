"""The training curve a run leaves beside its model (training_curve.png)."""

from __future__ import annotations

from pathlib import Path


def plot_training_curve(log_history: list[dict], path: Path, metric: str | None) -> Path | None:
    """Training loss (and eval loss / the eval metric) against step, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    train = [(e["step"], e["loss"]) for e in log_history if "loss" in e and "step" in e]
    evals = [e for e in log_history if "eval_loss" in e]
    if not train and not evals:
        return None
    figure, loss_axis = plt.subplots(figsize=(7, 4))
    if train:
        loss_axis.plot(*zip(*train), label="train loss", color="tab:blue")
    if evals:
        loss_axis.plot([e["step"] for e in evals], [e["eval_loss"] for e in evals], "o-", label="dev loss",
                       color="tab:orange")
    loss_axis.set_xlabel("step")
    loss_axis.set_ylabel("loss")
    key = f"eval_{metric}" if metric else None
    if key and any(key in e for e in evals):
        metric_axis = loss_axis.twinx()
        metric_axis.plot([e["step"] for e in evals if key in e], [e[key] for e in evals if key in e], "s--",
                         color="tab:green", label=f"dev {metric}")
        metric_axis.set_ylabel(f"dev {metric}")
        metric_axis.legend(loc="upper right")
    loss_axis.legend(loc="upper left")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


__all__ = ["plot_training_curve"]
