"""The first step of a command chain: writes the data file train_on_prepared.py reads."""

from pathlib import Path

Path("prepared_data.txt").write_text("1234\n")
