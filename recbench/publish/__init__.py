"""Results where researchers keep them: experiment trackers behind one interface (`tracker.py`: MLflow, Weights &
Biases) and a Hugging Face Hub dataset export (`hub.py`, `hub_card.py`). Nothing here is imported by a run unless
`+tracking=...` asks for it; each tracker's library is imported only when that tracker is used
(docs/results_elsewhere.md)."""
