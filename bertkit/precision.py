"""Which precision a run trains or predicts at: `precision=auto | fp32 | fp16 | bf16` resolved against the hardware
there is, as TrainingArguments flags and a sentence saying what was chosen and why."""

from __future__ import annotations

from .errors import BertkitError

# torch is imported by the functions that ask the hardware: the names are checked before a command loads anything
INFERENCE_PRECISIONS = ("fp32", "bf16", "fp16", "auto", "int8")


def check_inference_precision(precision: str) -> None:
    """--precision of predict / evaluate / serve: one of INFERENCE_PRECISIONS (bertkit/inference.py runs them)."""
    if precision not in INFERENCE_PRECISIONS:
        raise BertkitError(f"--precision {precision}: use one of {', '.join(INFERENCE_PRECISIONS)}")


def cpu_supports_bf16() -> bool:
    """True on CPUs with native bf16 matmul (AVX-512 BF16 / AMX), where bf16 autocast pays."""
    import torch

    return bool(getattr(torch.cpu, "_is_avx512_bf16_supported", lambda: False)())


def resolve_precision(precision: str, cuda: bool | None = None) -> tuple[dict, str]:
    """TrainingArguments flags for `precision` (auto | fp32 | fp16 | bf16), and a sentence saying what and why."""
    import torch

    cuda = torch.cuda.is_available() if cuda is None else cuda
    cuda_bf16 = cuda and torch.cuda.is_bf16_supported()
    if precision == "auto":
        if cuda:
            precision = "bf16" if cuda_bf16 else "fp16"
            why = "CUDA GPU " + ("with bf16 support" if cuda_bf16 else "without bf16: fp16 with loss scaling")
        elif cpu_supports_bf16():
            precision, why = "bf16", "CPU with native bf16 matmul (AVX-512 BF16 / AMX)"
        else:
            precision, why = "fp32", "CPU without native bf16"
    else:
        why = "asked for"
    return _precision_flags(precision, cuda, cuda_bf16), f"precision {precision} ({why})"


def _precision_flags(precision: str, cuda: bool, cuda_bf16: bool) -> dict:
    """The TrainingArguments flags of one explicit precision on this hardware; a one-line error where it cannot run."""
    if precision == "fp32":
        return {} if cuda else {"use_cpu": True}
    if precision == "fp16":
        if not cuda:
            raise BertkitError("precision=fp16 needs a CUDA GPU — use precision=bf16 (CPU autocast) or fp32")
        return {"fp16": True}
    if precision == "bf16":
        if cuda and not cuda_bf16:
            raise BertkitError("this GPU has no bf16 support — use precision=fp16 or fp32")
        return {"bf16": True} if cuda else {"bf16": True, "use_cpu": True}
    raise BertkitError(f"precision must be auto, fp32, fp16 or bf16, got {precision!r}")


__all__ = ["INFERENCE_PRECISIONS", "check_inference_precision", "resolve_precision", "cpu_supports_bf16"]
