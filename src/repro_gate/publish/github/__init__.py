"""Reporting to GitHub: check run with annotations, commit status, sticky PR comment."""
