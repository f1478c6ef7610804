"""The config-only benchmark: a data file, a sandboxed Jinja2 prompt, a parser, a ground-truth field, metrics."""
