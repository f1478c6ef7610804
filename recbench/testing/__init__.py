"""Test and benchmark helpers that ship with recbench: a stub OpenAI-compatible server, server process helpers."""
