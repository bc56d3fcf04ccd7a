"""BertkitConfig: BERT's config.json, field for field, under bertkit's own model_type.

In memory the model_type is "bertkit" (transformers refuses to register a second "bert"); on disk it is written as
"bert" with stock architecture names, so every checkpoint bertkit saves loads in plain transformers, and every stock
BERT checkpoint loads here without conversion. The exception is what stock BERT cannot compute (mean pooling, see
`bertkit_only_reason`): that stays "bertkit" on disk, so stock transformers refuses it rather than predict otherwise.
"""

from transformers import PreTrainedConfig

STOCK_MODEL_TYPE = "bert"
# Written into config.json beside model_type "bertkit" when stock transformers cannot express the model.
BERTKIT_ONLY_KEY = "bertkit_required"


def bertkit_only_reason(config: dict) -> str | None:
    """Why stock transformers would compute a model with this config (a config.json dict) differently, or None when
    it computes it exactly. Such a config stays model_type "bertkit" on disk, so that stock Auto classes refuse it
    ("unrecognized model type bertkit") instead of loading it and silently predicting something else."""
    if config.get("classifier_pooling", "cls") != "cls":
        return ("mean pooling (classifier_pooling=mean) averages the real tokens' vectors, which stock BERT cannot "
                "express: BertForSequenceClassification would load it with a random pooler over [CLS] instead; "
                "install bertkit and `import bertkit` before loading it with transformers")
    return None


class BertkitConfig(PreTrainedConfig):
    model_type = "bertkit"

    vocab_size: int = 30522
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    layer_norm_eps: float = 1e-12
    pad_token_id: int | None = 0
    classifier_dropout: float | None = None
    tie_word_embeddings: bool = True
    # bertkit's only addition: how sequence classification pools the encoder output.
    # "cls" is BERT's pooler (tanh(W h_[CLS])); "mean" averages the real tokens' last hidden states.
    classifier_pooling: str = "cls"
    # Run batches with padding on their real tokens only (see bertkit.padding): same outputs at the real
    # tokens, zeros at padding positions, much less work when lengths vary. Per call: `model(..., unpad=False)`.
    # Stock transformers keeps it as an unused attribute when it reads the saved config.json.
    unpad: bool = True
    # With labels, the MLM heads project only the labelled positions (labels != -100) onto the vocabulary and return
    # logits of shape (M, V), in training and evaluation alike (ModernBERT's `sparse_prediction`); False returns the
    # full (B, T, V), as stock BERT. Per call: `model(..., sparse_prediction=True)`.
    sparse_prediction: bool = False

    def __post_init__(self, **kwargs):
        # Architecture checks (hidden_size a multiple of num_attention_heads, no decoder flags) run when a model is
        # built, as in stock BERT, so a config can be made, edited and saved in any order. classifier_pooling is
        # bertkit's own field with no valid value outside the two: a typo is refused as soon as it is written.
        if self.classifier_pooling not in ("cls", "mean"):
            raise ValueError(f"classifier_pooling must be 'cls' or 'mean', got {self.classifier_pooling!r}")
        super().__post_init__(**kwargs)

    @classmethod
    def from_dict(cls, config_dict, **kwargs):
        # Stock checkpoints say model_type "bert": they are ours to load, so take them without a warning.
        if config_dict.get("model_type") in (STOCK_MODEL_TYPE, cls.model_type):
            config_dict = {**config_dict, "model_type": cls.model_type}
        if config_dict.get("is_decoder") or config_dict.get("add_cross_attention"):  # stock BERT attends causally
            raise ValueError("this BERT is configured as a decoder (is_decoder / add_cross_attention): bertkit is an "
                             "encoder with bidirectional attention and would compute it differently")
        config_dict = {key: value for key, value in config_dict.items() if key != BERTKIT_ONLY_KEY}  # to_dict's note
        return super().from_dict(config_dict, **kwargs)

    @classmethod
    def get_config_dict(cls, *args, **kwargs):
        config_dict, kwargs = super().get_config_dict(*args, **kwargs)
        if config_dict.get("model_type") == STOCK_MODEL_TYPE:
            config_dict = {**config_dict, "model_type": cls.model_type}
        return config_dict, kwargs

    def to_dict(self):
        # Written as stock BERT so that a checkpoint made with bertkit needs nothing but transformers to load; what
        # stock BERT cannot express stays "bertkit" (and its Bertkit* architecture), with the reason beside it.
        output = super().to_dict()
        output.pop(BERTKIT_ONLY_KEY, None)
        reason = bertkit_only_reason(output)
        if reason:
            return {**output, BERTKIT_ONLY_KEY: reason}
        output["model_type"] = STOCK_MODEL_TYPE
        if output.get("architectures"):
            output["architectures"] = [name.replace("Bertkit", "Bert", 1) for name in output["architectures"]]
        return output


__all__ = ["BertkitConfig", "bertkit_only_reason"]
