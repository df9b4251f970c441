"""Fakes, servers and fixtures shared by the test folders."""
