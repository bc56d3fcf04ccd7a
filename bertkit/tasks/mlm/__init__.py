"""Masked-LM pretraining: the mlm task (continued domain pretraining, whole-word masking, held-out perplexity)."""
