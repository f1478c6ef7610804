"""LLMRec ranking reference rows without a model, fit on every user's items except the held-out one: popularity,
item-kNN, PureSVD and a seeded random order."""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import svds

from recbench.api.task import ReferenceMethod
from recbench.api.types import Example, Outcome
from recbench.tasks.llmrec import settings
from recbench.tasks.llmrec.views import RankTaskView, _run_seed, _seed_for


# ---- ranking baselines (fit on every user's items except the held-out one) ---------------------
class _RankBaseline(ReferenceMethod[RankTaskView]):
    settings_rules = settings.RANK_BASELINE

    def prepare(self, examples: list[Example]) -> None:
        """Score every example's candidates in one vectorised pass; keep the top-n ranking per example."""
        train = self.task.train_sequences()
        items = self.task.data.items
        self.index = {it: j for j, it in enumerate(items)}
        rows, cols, vals = [], [], []
        self.user_row = {}
        decay = float(self.cfg.recency_decay) if self.task.ordered_history else 1.0
        for r, (u, seq) in enumerate(train.items()):
            self.user_row[u] = r
            L = len(seq)
            for pos, it in enumerate(seq):
                rows.append(r)
                cols.append(self.index[it])
                vals.append(decay ** (L - 1 - pos))
        shape = (len(train), len(items))
        # binary interactions X (duplicates collapse) and the recency-weighted history H used for scoring
        self.X = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=shape)
        self.X.data[:] = 1.0
        self.H = sp.csr_matrix((np.asarray(vals), (rows, cols)), shape=shape)
        self.fit()
        todo = list(examples)
        cand = np.array([[self.index[c] for c in e.data["candidates"]] for e in todo], dtype=np.int64)
        urow = np.array([self.user_row[e.data["user_id"]] for e in todo], dtype=np.int64)
        scores = np.zeros(cand.shape)
        bs = int(self.cfg.batch_users)
        for s in range(0, len(todo), bs):
            scores[s:s + bs] = self.score_batch(urow[s:s + bs], cand[s:s + bs])
        n = max(self.task.ks)
        order = np.argsort(-scores, axis=1, kind="stable")[:, :n]  # ties keep the frozen (shuffled) order
        self.ranked = {e.id: [e.data["candidates"][j] for j in order[i]] for i, e in enumerate(todo)}

    def fit(self) -> None:
        """Fit the model on self.X."""

    def score_batch(self, urows: np.ndarray, cands: np.ndarray) -> np.ndarray:
        """Scores (batch x candidates)."""
        raise NotImplementedError

    def predict(self, example: Example) -> Outcome:
        """The precomputed top-n candidates."""
        return Outcome(self.ranked[example.id], "ok")


class Popularity(_RankBaseline):
    """Rank candidates by their number of training interactions."""

    name = "popularity"

    def fit(self) -> None:
        """Item interaction counts."""
        self.pop = np.asarray(self.X.sum(0)).ravel()

    def score_batch(self, urows: np.ndarray, cands: np.ndarray) -> np.ndarray:
        """Popularity of each candidate."""
        return self.pop[cands]


class ItemKNN(_RankBaseline):
    """Item-based kNN: cosine similarity of item interaction vectors, summed over the (recency-weighted) history."""

    name = "item_knn"

    def fit(self) -> None:
        """Cosine item-item similarity, optionally sparsified to each item's `neighbours` most similar items."""
        norms = np.sqrt(np.asarray(self.X.sum(0)).ravel())
        norms[norms == 0] = 1.0
        Xn = self.X @ sp.diags(1.0 / norms)
        S = (Xn.T @ Xn).tocsr()
        S.setdiag(0.0)
        S.eliminate_zeros()
        k = self.cfg.neighbours
        if k:
            S = _top_k_per_row(S, int(k))
        self.S = S.T.tocsr()  # scores = H @ S^T : sum_j w_j * sim(candidate, j)
        self.pop = np.asarray(self.X.sum(0)).ravel()

    def score_batch(self, urows: np.ndarray, cands: np.ndarray) -> np.ndarray:
        """Summed similarity to the history; popularity breaks ties (a tiny weight)."""
        P = (self.H[urows] @ self.S).tocsr()
        r = np.repeat(np.arange(len(urows)), cands.shape[1])
        sims = np.asarray(P[r, cands.ravel()]).reshape(cands.shape)
        return sims + 1e-9 * self.pop[cands] / (self.pop.max() or 1)


class PureSVD(_RankBaseline):
    """Matrix factorisation (PureSVD, Cremonesi et al. 2010): truncated SVD of the interaction matrix, fold-in scores."""

    name = "mf"

    def fit(self) -> None:
        """Top-`factors` right singular vectors of X."""
        k = min(int(self.cfg.factors), min(self.X.shape) - 1)
        _, _, vt = svds(self.X.astype(np.float64), k=k, random_state=_run_seed(self))
        self.V = vt.T  # items x k

    def score_batch(self, urows: np.ndarray, cands: np.ndarray) -> np.ndarray:
        """(h V) . V[c] for each candidate c."""
        U = np.asarray(self.H[urows] @ self.V)  # batch x k
        return np.einsum("bk,bck->bc", U, self.V[cands])


class RandomRank(_RankBaseline):
    """Random order of the candidates (seeded by `seed` and the user): the chance reference (HR@10 = 0.1 at 100)."""

    name = "random"

    def prepare(self, examples: list[Example]) -> None:
        """Seeded permutation per example."""
        n = max(self.task.ks)
        seed = _run_seed(self)
        self.ranked = {}
        for e in examples:
            perm = np.random.default_rng(_seed_for(seed, e.id)).permutation(len(e.data["candidates"]))
            self.ranked[e.id] = [e.data["candidates"][j] for j in perm[:n]]


def _top_k_per_row(S: sp.csr_matrix, k: int) -> sp.csr_matrix:
    """Keep the k largest entries of each row of a CSR matrix."""
    S = S.tocsr()
    indptr, indices, data = S.indptr, S.indices, S.data
    keep = np.zeros(len(data), dtype=bool)
    for i in range(S.shape[0]):
        a, b = indptr[i], indptr[i + 1]
        if b - a <= k:
            keep[a:b] = True
        else:
            keep[a + np.argpartition(-data[a:b], k)[:k]] = True
    out = sp.csr_matrix((np.where(keep, data, 0.0), indices, indptr), shape=S.shape)
    out.eliminate_zeros()
    return out


__all__ = ["Popularity", "ItemKNN", "PureSVD", "RandomRank"]
