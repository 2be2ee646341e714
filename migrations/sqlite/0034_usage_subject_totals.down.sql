DROP TABLE usage_subject_totals;
