"""Knowledge distillation for sequence classification (single-label): a student learns the teacher's soft targets.

    layers = pick_layers(teacher_layers=6, num_layers=3)           -> [0, 2, 4]  (evenly spaced, DistilBERT style)
    student = student_from_teacher(teacher, layers)               embeddings, chosen layers, pooler, classifier
    trainer = DistillationTrainer(teacher=teacher, options=DistillOptions(temperature=2.0, alpha=0.5), ...)

The loss of a batch (Hinton et al.; TinyBERT's hidden-state term optional):

    alpha * T^2 * KL(softmax(teacher / T) || softmax(student / T))  +  (1 - alpha) * CE(student, labels)
      + hidden_weight * MSE(student hidden states, the teacher's at the mapped layers; real tokens only)

Every term is a mean over the micro-batch's rows (CE sums over labelled rows and divides by all rows, so unlabelled
transfer text, labels = -100, adds only soft targets; the MSE is per row over its real tokens). The Trainer then
divides by the accumulation steps (`loss_is_scaled_for_ga = False`, and no `num_items_in_batch` is passed): batch
8 x 1 and 2 x 4 give the same update whenever micro-batches have equal row counts.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from .errors import BertkitError
from .losses import IGNORE_INDEX
from .modeling_bert import BertkitForSequenceClassification
from .training import FineTuningTrainer


@dataclass
class DistillOptions:
    temperature: float = 2.0
    """Softens both distributions; the KL term is scaled by T^2 so its gradients keep their size."""
    alpha: float = 0.5
    """Weight of the soft-target (KL) term; 1 - alpha goes to the hard labels."""
    hidden_weight: float = 0.0
    """Weight of the hidden-state MSE between mapped layers (TinyBERT style); 0 = off."""


# ---------------------------------------------------------------------------------------------- the student


def pick_layers(teacher_layers: int, num_layers: int | None = None, layers: list[int] | None = None) -> list[int]:
    """The teacher layers a student keeps: `layers` as given (checked), or `num_layers` evenly spaced from the bottom
    (round(i * n / k): 6 -> 3 keeps [0, 2, 4]; 12 -> 6 keeps [0, 2, 4, 6, 8, 10])."""
    if layers is not None:
        if not layers or sorted(set(layers)) != list(layers) or layers[0] < 0 or layers[-1] >= teacher_layers:
            raise BertkitError(f"student.layers={list(layers)}: give increasing teacher layer numbers in "
                               f"0..{teacher_layers - 1}, e.g. [0, 2, 4]")
        return list(layers)
    if num_layers is None or not 1 <= num_layers <= teacher_layers:
        raise BertkitError(f"student.num_layers={num_layers}: give 1..{teacher_layers} (the teacher has "
                           f"{teacher_layers} layers), or student.layers=[...] or student.model=<checkpoint>")
    return [round(i * teacher_layers / num_layers) for i in range(num_layers)]


def student_from_teacher(teacher: BertkitForSequenceClassification, layers: list[int]):
    """A copy of the teacher with only `layers` of its encoder (renumbered 0..k-1): embeddings, pooler and
    classifier as they are. Its config says num_hidden_layers=k; nothing else changes."""
    config = copy.deepcopy(teacher.config)
    config.num_hidden_layers = len(layers)
    student = type(teacher)(config)
    state = {key: value for key, value in teacher.state_dict().items() if ".encoder.layer." not in key}
    for new, old in enumerate(layers):
        prefix = f"bert.encoder.layer.{old}."
        state.update({f"bert.encoder.layer.{new}.{key[len(prefix):]}": value
                      for key, value in teacher.state_dict().items() if key.startswith(prefix)})
    student.load_state_dict(state)
    return student


def layer_map(student_layers: int, teacher_layers: int, picked: list[int] | None = None) -> list[tuple[int, int]]:
    """(student, teacher) indices into `hidden_states` (0 = embeddings, i = output of layer i) that the hidden-state
    term matches: the picked layers for a student taken from the teacher, else evenly spaced (TinyBERT)."""
    if picked is not None:
        return [(0, 0)] + [(i + 1, layer + 1) for i, layer in enumerate(picked)]
    return [(i, round(i * teacher_layers / student_layers)) for i in range(student_layers + 1)]


def check_student(student, teacher, hidden_weight: float) -> None:
    """A student that reads the teacher's token ids and labels (and hidden sizes, when hidden states are matched)."""
    if student.config.vocab_size != teacher.config.vocab_size:
        raise BertkitError(f"the student's vocabulary ({student.config.vocab_size}) is not the teacher's "
                           f"({teacher.config.vocab_size}): both read the teacher's token ids — pick a student with "
                           "the teacher's tokenizer")
    if hidden_weight and student.config.hidden_size != teacher.config.hidden_size:
        raise BertkitError(f"hidden_weight={hidden_weight} matches hidden states, but the student's hidden size "
                           f"({student.config.hidden_size}) is not the teacher's ({teacher.config.hidden_size}) — "
                           "use hidden_weight=0, or a student taken from the teacher's layers")


# ---------------------------------------------------------------------------------------------- the loss


def soft_target_loss(student_logits, teacher_logits, temperature: float) -> torch.Tensor:
    """T^2 * KL(teacher/T || student/T), summed over classes, mean over rows. (B, C), (B, C) -> ()."""
    student = F.log_softmax(student_logits.float() / temperature, dim=-1)
    teacher = F.log_softmax(teacher_logits.float() / temperature, dim=-1)
    return F.kl_div(student, teacher, log_target=True, reduction="none").sum(-1).mean() * temperature**2


def hard_label_loss(student_logits, labels) -> torch.Tensor:
    """Cross-entropy summed over labelled rows (labels != -100), divided by all rows. (B, C), (B,) -> ()."""
    loss_sum = F.cross_entropy(student_logits.float(), labels.view(-1), ignore_index=IGNORE_INDEX, reduction="sum")
    return loss_sum / labels.numel()


def hidden_state_loss(student_hidden, teacher_hidden, attention_mask, pairs) -> torch.Tensor:
    """MSE between mapped hidden states at real tokens: per row over its tokens and features, then mean over rows and
    pairs. hidden states: tuples of (B, T, D); attention_mask (B, T)."""
    mask = attention_mask.unsqueeze(-1).float()  # (B, T, 1)
    per_row_count = mask.sum(dim=(1, 2)).clamp(min=1) * student_hidden[0].shape[-1]  # (B,)
    losses = [(((student_hidden[s].float() - teacher_hidden[t].float()) ** 2) * mask).sum(dim=(1, 2)) / per_row_count
              for s, t in pairs]
    return torch.stack(losses).mean(dim=0).mean()


def distillation_loss(student_out, teacher_out, labels, attention_mask, options: DistillOptions, pairs) -> tuple:
    """The total loss and its parts (for logging)."""
    parts = {"soft": soft_target_loss(student_out.logits, teacher_out.logits, options.temperature)}
    if options.alpha < 1:
        parts["hard"] = hard_label_loss(student_out.logits, labels)
    if options.hidden_weight:
        parts["hidden"] = hidden_state_loss(student_out.hidden_states, teacher_out.hidden_states, attention_mask,
                                            pairs)
    total = options.alpha * parts["soft"] + (1 - options.alpha) * parts.get("hard", 0.0)
    return total + options.hidden_weight * parts.get("hidden", 0.0), parts


class DistillationTrainer(FineTuningTrainer):
    """Trainer whose loss is `distillation_loss` against a frozen teacher (eval mode, no gradients, on the
    student's device). The loss is a per-micro-batch mean: the Trainer divides it by the accumulation steps."""

    def __init__(self, *args, teacher, options: DistillOptions, layer_pairs=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.teacher = teacher.to(self.args.device).eval().requires_grad_(False)
        self.options, self.layer_pairs = options, layer_pairs or []
        self.model_accepts_loss_kwargs = False  # no num_items_in_batch: our means are per micro-batch
        self.loss_is_scaled_for_ga = False  # ... so the Trainer divides by gradient_accumulation_steps

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        labels = inputs["labels"]
        inputs = {key: value for key, value in inputs.items() if key != "labels"}  # the caller's dict stays whole
        want_hidden = bool(self.options.hidden_weight)
        outputs = model(**inputs, output_hidden_states=want_hidden)
        if not model.training:  # evaluation: the plain classification loss, as classify reports it
            loss = F.cross_entropy(outputs.logits.float(), labels.view(-1), ignore_index=IGNORE_INDEX)
            return (loss, outputs) if return_outputs else loss
        with torch.no_grad():
            teacher_out = self.teacher(**inputs, output_hidden_states=want_hidden)
        loss, _ = distillation_loss(outputs, teacher_out, labels, inputs.get("attention_mask"), self.options,
                                    self.layer_pairs)
        return (loss, outputs) if return_outputs else loss


__all__ = ["DistillOptions", "pick_layers", "student_from_teacher", "layer_map", "check_student",
           "soft_target_loss", "hard_label_loss", "hidden_state_loss", "distillation_loss", "DistillationTrainer"]
