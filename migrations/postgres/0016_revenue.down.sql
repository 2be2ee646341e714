DROP TABLE IF EXISTS revenue_daily;
