"""model.backend keys checked against the backend's constructor before Hydra makes a run dir (a refused key, which
may hold a secret, is then written nowhere)."""
from __future__ import annotations

from omegaconf import DictConfig, OmegaConf

from recbench.api.errors import ConfigError, suggest

#: keys of a `_target_` node that hydra.utils.instantiate reads itself (not handed to the constructor)
_INSTANTIATE_KEYS = {"_target_", "_convert_", "_recursive_", "_partial_", "_args_"}


def check_backend_keys(cfg: DictConfig) -> None:
    """A ConfigError naming a model.backend key its backend's constructor does not take (e.g. a misplaced
    +model.backend.api_key=...), before Hydra makes a run dir; the value is never shown (it may be a secret)."""
    import inspect

    from hydra.utils import get_class

    node = OmegaConf.select(cfg, "model.backend")
    target = node.get("_target_") if isinstance(node, DictConfig) else None
    if not target or "${" in str(target):
        return
    try:
        params = inspect.signature(get_class(str(target)).__init__).parameters.values()
    except Exception:  # noqa: BLE001 - a target that does not import: building the backend says why, in one line
        return
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return
    takes = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)} - {"self"}
    unknown = [str(k) for k in node.keys() if str(k) not in takes | _INSTANTIATE_KEYS]
    if unknown:
        cls = str(target).rsplit(".", 1)[-1]
        raise ConfigError(f"model.backend.{unknown[0]}: {cls} ({target}) takes no key '{unknown[0]}'."
                          f"{suggest(unknown[0], sorted(takes))} Its keys: {', '.join(sorted(takes))}. Nothing was "
                          "run or written")
