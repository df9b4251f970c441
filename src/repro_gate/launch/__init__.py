"""Launchers start one training run: locally as a subprocess, or as a sibling Docker container."""
