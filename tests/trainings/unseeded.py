"""Never seeds anything and writes model.pt into its working directory, like many scripts do."""

from tiny import train

train(checkpoint="model.pt")
