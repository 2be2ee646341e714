-- Subject totals across environments: one row per project and subject, the fold of its
-- usage_subjects rows (earliest first_seen, latest last_seen, summed events, quantity and
-- revenue), kept by the same statements that write usage_subjects. The subject directory and
-- the summary's active counts over every environment read it instead of folding each
-- subject's rows per request.
CREATE TABLE usage_subject_totals (
    project_id TEXT NOT NULL,
    subject_id TEXT NOT NULL,
    first_seen TEXT NOT NULL,
    last_seen  TEXT NOT NULL,
    events     INTEGER NOT NULL,
    quantity   REAL NOT NULL,
    revenue    INTEGER NOT NULL,
    PRIMARY KEY (project_id, subject_id)
) WITHOUT ROWID;

INSERT INTO usage_subject_totals (project_id, subject_id, first_seen, last_seen, events, quantity, revenue)
SELECT project_id, subject_id, MIN(first_seen), MAX(last_seen), SUM(events), SUM(quantity), SUM(revenue)
FROM usage_subjects GROUP BY project_id, subject_id;
