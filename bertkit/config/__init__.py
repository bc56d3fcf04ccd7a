"""YAML file + `key.sub=value` overrides -> a recipe's typed `@dataclass Config`, with errors that name the key.

    bertkit run classify -c classify/en_sentiment train.learning_rate=3.0e-5 llrd=0.9
      -> the YAML file becomes a dict, each override is written into it (the command line wins),   reading.py
      -> the dict is checked against the dataclass annotations and turned into the recipe's config, build.py, types.py
      -> the `train:` mapping is checked against `transformers.TrainingArguments` (the recipe does not declare
         those keys; the Trainer does) and passed on as `TrainingArguments(**cfg.train)`.            train.py
      -> the resolved config is written next to the checkpoints; `bertkit validate --keys` lists it. describe.py

Every mistake a user can make here raises `BertkitError` with one line that names the key and where its value
came from (`(from override train.learning_rate=abc)` or `(from recipes/configs/x.yaml, line 7)`). A field marked
`metadata=INLINE` (fields.py) puts its dataclass's keys at its parent's level: how recipes compose the shared
options of bertkit/options.py while users keep writing `output_dir=...` and `llrd=0.9`.
"""

from .build import build_config, load_config
from .describe import ConfigField, config_header_command, config_to_dict, describe_config, save_config
from .fields import INLINE, REQUIRED
from .reading import parse_override
from .train import TRAIN_KEY, validate_train_args

__all__ = [
    "REQUIRED",
    "INLINE",
    "build_config",
    "TRAIN_KEY",
    "ConfigField",
    "config_header_command",
    "config_to_dict",
    "describe_config",
    "load_config",
    "parse_override",
    "save_config",
    "validate_train_args",
]
