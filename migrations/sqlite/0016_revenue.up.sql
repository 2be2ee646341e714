-- Revenue rollup written by billing when an invoice is paid (store.Tx.AddRevenue),
-- read by the analytics. day: the UTC date 'YYYY-MM-DD', as in the usage rollups;
-- amount: minor units of currency (lower-case ISO 4217, e.g. usd); invoices: how
-- many paid invoices the amount sums.
CREATE TABLE revenue_daily (
    project_id     TEXT NOT NULL,
    environment_id TEXT NOT NULL,
    day            TEXT NOT NULL,
    subject_id     TEXT NOT NULL,
    currency       TEXT NOT NULL,
    amount         INTEGER NOT NULL,
    invoices       INTEGER NOT NULL,
    PRIMARY KEY (project_id, environment_id, day, subject_id, currency)
) WITHOUT ROWID;
CREATE INDEX revenue_daily_day_idx ON revenue_daily (project_id, day);
CREATE INDEX revenue_daily_subject_idx ON revenue_daily (project_id, subject_id, day);
