"""Trust measurements: pure statistics over plain tables and arrays.

No imports from the engine, config, providers or protocols: everything here can be recomputed
offline from a run directory or any table. Conventions: a ratings matrix is items x raters
(``None``/NaN = missing); a statistic that is undefined for the data (empty input, a single
rater, constant ratings) is NaN; malformed input raises ``ValueError``.
"""

from judge_engine.stats.adequacy import AdequacyResult, adequacy, human_preferred
from judge_engine.stats.agreement import (
    ICC_FORMS,
    category_counts,
    cohen_kappa,
    fleiss_kappa,
    icc,
    krippendorff_alpha,
    percent_agreement,
    randolph_kappa,
)
from judge_engine.stats.bias import (
    PreferenceGap,
    excess_preference,
    length_correlations,
    preference_gap,
)
from judge_engine.stats.bootstrap import (
    Alpha,
    Fleiss,
    Icc,
    Kappa,
    Randolph,
    bootstrap_interval,
    bootstrap_values,
    percentile_interval,
    point,
)
from judge_engine.stats.consistency import (
    RepeatConsistency,
    RunSpread,
    consistency_table,
    delta_shares,
    flip_rate,
    item_spread,
    mean_pairwise_spearman,
    repeat_consistency,
    run_spread,
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
from judge_engine.stats.panel import CategoricalField, panel_coefficients
from judge_engine.stats.reliability import coefficients
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
from judge_engine.stats.temperature import TemperaturePair, compare_temperatures, temperature_table

__all__ = [
    "AdequacyResult",
    "Alpha",
    "CategoricalField",
    "Fleiss",
    "ICC_FORMS",
    "Icc",
    "Kappa",
    "MqmSpanAgreement",
    "Outcome",
    "PreferenceGap",
    "Randolph",
    "RepeatConsistency",
    "Run",
    "RunSpread",
    "SpanScores",
    "Table",
    "TableError",
    "TemperaturePair",
    "adequacy",
    "bootstrap_ci",
    "bootstrap_interval",
    "bootstrap_values",
    "category_counts",
    "coefficients",
    "cohen_kappa",
    "compare_temperatures",
    "consistency_table",
    "correlation",
    "delta_shares",
    "excess_preference",
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
    "length_correlations",
    "mean_pairwise_spearman",
    "mqm_span_agreement",
    "panel_coefficients",
    "parse_list",
    "pearson",
    "percent_agreement",
    "percentile_interval",
    "point",
    "preference_gap",
    "randolph_kappa",
    "read_run",
    "read_table",
    "repeat_consistency",
    "run_spread",
    "run_table",
    "score_matrices",
    "span_char_kappa",
    "span_prf",
    "spearman",
    "system_level_correlation",
    "system_means",
    "temperature_table",
    "wilson_interval",
]
