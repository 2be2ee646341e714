-- Nothing on PostgreSQL: the decision epoch is SQLite's alone (see migrations/sqlite/0036). On
-- PostgreSQL a decision is read with its API key in one query (store.APIKeyDecision); checking
-- an epoch would cost the same round trip, and one row that every RBAC write updates would
-- serialize those writes across replicas.
SELECT 1;
