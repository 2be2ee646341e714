-- At most one pending invitation per organization and email, so that two
-- concurrent invite-member calls cannot both create one. Expiry is not part
-- of the rule (an index predicate cannot read the clock): the store cancels
-- an expired pending invitation before it creates the next one.

-- Existing duplicates: keep the newest pending invitation of each
-- organization and email, cancel the others.
UPDATE invitations SET status = 'canceled'
WHERE status = 'pending' AND EXISTS (
    SELECT 1 FROM invitations newer
    WHERE newer.organization_id = invitations.organization_id
        AND newer.email = invitations.email
        AND newer.status = 'pending'
        AND (newer.created_at > invitations.created_at
            OR (newer.created_at = invitations.created_at AND newer.id > invitations.id))
);

CREATE UNIQUE INDEX invitations_pending_email_idx ON invitations (organization_id, email)
    WHERE status = 'pending';
