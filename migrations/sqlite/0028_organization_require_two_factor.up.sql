-- Organizations may require a second factor of their members (issue 23): members without one
-- are refused on the organization's /api/v1 routes until they enrol.
ALTER TABLE organizations ADD COLUMN require_two_factor INTEGER NOT NULL DEFAULT 0 CHECK (require_two_factor IN (0, 1));
