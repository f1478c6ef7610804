"""Statistics of verdicts: paired tests, bootstrap CIs, clustering and seeds, multiple comparisons, letters, power."""
from recbench.stats.baselines import expected_hr_at_k, expected_ndcg_at_k, expected_ptc
from recbench.stats.clusters import SeedPool, cluster_means, pool_seeds
from recbench.stats.letters import compact_letters
from recbench.stats.multiple import adjust
from recbench.stats.paired import (
                                   TestResult,
                                   is_binary,
                                   mcnemar_test,
                                   paired_bootstrap_ci,
                                   paired_test,
                                   sign_flip_mc_se,
                                   sign_flip_test,
                                   t_test,
                                   wilcoxon_test,
)
from recbench.stats.power import (
                                   min_detectable_difference,
                                   min_detectable_difference_normal,
                                   paired_sd_with_seeds,
                                   power,
)

__all__ = ["SeedPool", "TestResult", "adjust", "cluster_means", "compact_letters", "expected_hr_at_k",
           "expected_ndcg_at_k", "expected_ptc", "is_binary", "mcnemar_test", "min_detectable_difference",
           "min_detectable_difference_normal", "paired_bootstrap_ci", "paired_sd_with_seeds", "paired_test", "pool_seeds",
           "power", "sign_flip_mc_se", "sign_flip_test", "t_test", "wilcoxon_test"]
