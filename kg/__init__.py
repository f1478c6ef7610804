"""The knowledge-graph layer (recbench.kg): a typed item/entity graph, loaders, condition extraction, query building."""
from recbench.kg.graph import KnowledgeGraph, display_title, normalize_title, split_year

__all__ = ["KnowledgeGraph", "display_title", "normalize_title", "split_year"]
