"""LLM judges of generated answers (docs/judges.md): the two protocols (a rubric scored 1-5 per answer; one answer
against a reference run's, asked in both orders), their packaged prompt templates, how a judge answer is parsed, and
the judge pass as a task the run's EvalLoop drives (run/judging.py runs it)."""
