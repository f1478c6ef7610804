"""Explanation judging: a benchmark that evaluates LLM judges against real users' own ratings of recommendation
explanations (Zhang et al. 2024, "Large Language Models as Evaluators for Recommendation Explanations")."""
