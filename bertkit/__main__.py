"""`python -m bertkit ...` runs the CLI (also what `accelerate launch -m bertkit` and `torchrun -m bertkit` use)."""

from bertkit.cli import main

main()
