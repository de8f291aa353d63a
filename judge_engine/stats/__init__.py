"""Trust measurements: pure statistics over plain tables and arrays.

No imports from the engine, config, providers or protocols: everything here can be recomputed
offline from a run directory or any table. Conventions: a ratings matrix is items x raters
(``None``/NaN = missing); a statistic that is undefined for the data (empty input, a single
rater, constant ratings) is NaN; malformed input raises ``ValueError``.
"""

from judge_engine.stats.adequacy import AdequacyResult, adequacy, human_preferred
from judge_engine.stats.agreement import (
    category_counts,
    cohen_kappa,
    fleiss_kappa,
    icc,
    krippendorff_alpha,
    percent_agreement,
    randolph_kappa,
)
from judge_engine.stats.consistency import (
    RepeatConsistency,
    consistency_table,
    delta_shares,
    flip_rate,
    item_spread,
    mean_pairwise_spearman,
    repeat_consistency,
)
from judge_engine.stats.correlation import (
    bootstrap_ci,
    correlation,
    grouped_correlation,
    kendall_tau_b,
    pearson,
    spearman,
    system_level_correlation,
    system_means,
    wilson_interval,
)
from judge_engine.stats.runs import Outcome, Run, read_run, run_table, score_matrices
from judge_engine.stats.spans import (
    MqmSpanAgreement,
    SpanScores,
    expressions_match,
    mqm_span_agreement,
    span_char_kappa,
    span_prf,
)
from judge_engine.stats.tables import Table, TableError, join, parse_list, read_table

__all__ = [
    "AdequacyResult",
    "MqmSpanAgreement",
    "Outcome",
    "RepeatConsistency",
    "Run",
    "SpanScores",
    "Table",
    "TableError",
    "adequacy",
    "bootstrap_ci",
    "category_counts",
    "cohen_kappa",
    "consistency_table",
    "correlation",
    "delta_shares",
    "expressions_match",
    "fleiss_kappa",
    "flip_rate",
    "grouped_correlation",
    "human_preferred",
    "icc",
    "item_spread",
    "join",
    "kendall_tau_b",
    "krippendorff_alpha",
    "mean_pairwise_spearman",
    "mqm_span_agreement",
    "parse_list",
    "pearson",
    "percent_agreement",
    "randolph_kappa",
    "read_run",
    "read_table",
    "repeat_consistency",
    "run_table",
    "score_matrices",
    "span_char_kappa",
    "span_prf",
    "spearman",
    "system_level_correlation",
    "system_means",
    "wilson_interval",
]
