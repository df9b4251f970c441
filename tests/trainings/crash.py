"""Prints progress, then fails the way a broken training does."""

for i in range(30):
    print(f"epoch line {i}")
raise SystemExit("loss became NaN at step 30")
