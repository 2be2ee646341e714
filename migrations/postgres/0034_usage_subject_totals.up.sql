-- Subject totals across environments: one row per project and subject, the fold of its
-- usage_subjects rows (earliest first_seen, latest last_seen, summed events, quantity and
-- revenue), kept by the same statements that write usage_subjects. The subject directory and
-- the summary's active counts over every environment read it instead of folding each
-- subject's rows per request. Like usage_subjects it has no index on the columns that change
-- with each event, so its updates stay HOT.
CREATE TABLE usage_subject_totals (
    project_id TEXT COLLATE "C" NOT NULL,
    subject_id TEXT COLLATE "C" NOT NULL,
    first_seen TIMESTAMPTZ NOT NULL,
    last_seen  TIMESTAMPTZ NOT NULL,
    events     BIGINT NOT NULL,
    quantity   DOUBLE PRECISION NOT NULL,
    revenue    BIGINT NOT NULL,
    PRIMARY KEY (project_id, subject_id)
) WITH (fillfactor = 70);

-- Writers of usage_subjects wait until the totals are filled, so none is missed.
LOCK TABLE usage_subjects IN SHARE MODE;
INSERT INTO usage_subject_totals (project_id, subject_id, first_seen, last_seen, events, quantity, revenue)
SELECT project_id, subject_id, MIN(first_seen), MAX(last_seen), SUM(events), SUM(quantity), SUM(revenue)
FROM usage_subjects GROUP BY project_id, subject_id;
