DROP TABLE social_states;
ALTER TABLE accounts DROP COLUMN scope;
