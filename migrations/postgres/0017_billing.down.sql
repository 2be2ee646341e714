DROP TABLE IF EXISTS entitlement_grants;
DROP TABLE IF EXISTS billing_invoices;
DROP TABLE IF EXISTS billing_subscriptions;
DROP TABLE IF EXISTS processor_events;
DROP TABLE IF EXISTS checkout_requests;
DROP TABLE IF EXISTS billing_plans;
DROP TABLE IF EXISTS processor_connections;
