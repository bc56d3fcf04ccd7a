"""The "How to use" snippet of a model card, one body per pipeline tag: code that needs only transformers."""

from __future__ import annotations

_SAMPLE_TEXT = {"zh": "这部电影真好看！", "en": "This movie was great!"}
_MASK_TEXT = {
    "zh": 'f"巴黎是法国的首{tokenizer.mask_token}。"',
    "en": 'f"Paris is the capital of {tokenizer.mask_token}."',
}


def usage_snippet(card: dict) -> str:
    """A snippet that needs only transformers: the model must be usable by someone who never heard of bertkit
    (unless stock BERT cannot express it: then bertkit is imported to register its classes)."""
    repo, auto_class, tag = card["repo_id"], card["auto_class"], card["tag"]
    lang = "zh" if "zh" in (card["language"] or []) else "en"
    text = _MASK_TEXT[lang] if tag == "fill-mask" else _SAMPLE_TEXT[lang]
    head = [
        "import torch",
        f"from transformers import AutoTokenizer, {auto_class}",
        *(["", "import bertkit  # registers model_type \"bertkit\" with transformers' Auto classes"]
          if card["bertkit_only"] else []),
        "",
        f'tokenizer = AutoTokenizer.from_pretrained("{repo}")',
        f'model = {auto_class}.from_pretrained("{repo}").eval()',
        "",
    ]
    body = _USAGE_BODIES.get(tag, _USAGE_BODIES["feature-extraction"])(text, card["problem_type"])
    return "```python\n" + "\n".join(head + body) + "\n```"


def _usage_classify(text: str, problem_type: str | None) -> list[str]:
    lines = [f'inputs = tokenizer("{text}", return_tensors="pt")', "with torch.no_grad():",
             "    logits = model(**inputs).logits[0]"]
    if problem_type == "multi_label_classification":
        return lines + ["print([model.config.id2label[i] for i, p in enumerate(logits.sigmoid()) if p > 0.5])"]
    if problem_type == "regression":
        return lines + ["print(logits.item())"]
    return lines + ["print(model.config.id2label[int(logits.argmax())])"]


def _usage_tokens(text: str, _: str | None) -> list[str]:
    return [
        f'inputs = tokenizer("{text}", return_tensors="pt")',
        "with torch.no_grad():",
        "    predicted = model(**inputs).logits[0].argmax(-1)",
        "tokens = tokenizer.convert_ids_to_tokens(inputs.input_ids[0])",
        "print([(t, model.config.id2label[int(p)]) for t, p in zip(tokens, predicted)])",
    ]


def _usage_qa(text: str, _: str | None) -> list[str]:
    return [
        'question, context = "What was great?", "' + text + '"',
        'inputs = tokenizer(question, context, return_tensors="pt")',
        "with torch.no_grad():",
        "    out = model(**inputs)",
        "start, end = int(out.start_logits.argmax()), int(out.end_logits.argmax())",
        "print(tokenizer.decode(inputs.input_ids[0, start : end + 1]))",
    ]


def _usage_fill_mask(text: str, _: str | None) -> list[str]:
    return [
        f"text = {text}",
        'inputs = tokenizer(text, return_tensors="pt")',
        "with torch.no_grad():",
        "    logits = model(**inputs).logits  # ForPreTraining models: .prediction_logits",
        "position = int((inputs.input_ids[0] == tokenizer.mask_token_id).nonzero()[0])",
        "print(tokenizer.decode(logits[0, position].argmax()))",
    ]


def _usage_choice(text: str, _: str | None) -> list[str]:
    return [
        f'prompt, choices = "{text}", ["I liked it.", "I did not like it."]',
        'inputs = tokenizer([prompt] * len(choices), choices, return_tensors="pt", padding=True)',
        "with torch.no_grad():",
        "    logits = model(**{k: v.unsqueeze(0) for k, v in inputs.items()}).logits",
        "print(choices[int(logits.argmax())])",
    ]


def _usage_features(text: str, _: str | None) -> list[str]:
    return [
        f'inputs = tokenizer(["{text}"], return_tensors="pt", padding=True)',
        "with torch.no_grad():",
        "    hidden = model(**inputs).last_hidden_state",
        "mask = inputs.attention_mask.unsqueeze(-1)",
        "embedding = (hidden * mask).sum(1) / mask.sum(1)  # mean pooling",
    ]


_USAGE_BODIES = {
    "text-classification": _usage_classify,
    "token-classification": _usage_tokens,
    "question-answering": _usage_qa,
    "fill-mask": _usage_fill_mask,
    "multiple-choice": _usage_choice,
    "feature-extraction": _usage_features,
}


__all__ = ["usage_snippet"]
