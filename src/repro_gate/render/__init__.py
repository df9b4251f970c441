"""Rendering a manifest for people: the console, Markdown for GitHub."""
