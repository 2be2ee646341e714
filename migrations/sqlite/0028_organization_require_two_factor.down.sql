ALTER TABLE organizations DROP COLUMN require_two_factor;
