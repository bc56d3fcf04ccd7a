"""bertkit: a readable BERT reimplementation that plugs into the Hugging Face stack, plus fine-tuning recipes."""

__version__ = "0.1.0"
