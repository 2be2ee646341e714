package store

import "time"

// The rule for whether an API key may still authenticate, in its two forms side by side: the Go
// predicate APIKeyUsable, which the server applies to a key it has read (APIKeyByPublicID,
// APIKeyDecision, or a key it remembered), and the SQL predicate usableKeyJoin +
// usableKeyCondition, which usage ingest applies in the transaction that records an event
// (IngestUsage). They must say the same thing; the conformance suite's APIKeyRule test puts
// keys in each state into a real database and checks both against one written-out table.
//
// A key may authenticate while it is not revoked, not expired (a key is expired from its
// ExpiresAt on), its service account is not disabled, and neither its project nor its
// organization is archived. A deleted key, account, project or organization is simply absent:
// the Go side reads no key (ErrNotFound), the SQL side joins no row. The key's secret is not
// part of the rule: only the server sees the secret a request presents.

// APIKeyRefusal is why a key may no longer authenticate, or APIKeyAccepted.
type APIKeyRefusal string

// Refusals, in the order APIKeyUsable checks them (a key both revoked and expired is revoked).
const (
	APIKeyAccepted APIKeyRefusal = ""
	APIKeyRevoked  APIKeyRefusal = "revoked"
	APIKeyDisabled APIKeyRefusal = "disabled" // its service account is disabled
	APIKeyExpired  APIKeyRefusal = "expired"
	APIKeyArchived APIKeyRefusal = "archived" // its project or organization is archived
)

// APIKeyUsable reports whether key k, as read, may authenticate at now and, when it may not,
// why. It is the Go form of usableKeyCondition.
func APIKeyUsable(k APIKeyAuth, now time.Time) (bool, APIKeyRefusal) {
	switch {
	case k.RevokedAt != nil:
		return false, APIKeyRevoked
	case k.DisabledAt != nil:
		return false, APIKeyDisabled
	case k.ExpiresAt != nil && !now.Before(*k.ExpiresAt):
		return false, APIKeyExpired
	case k.ProjectArchived || k.OrganizationArchived:
		return false, APIKeyArchived
	}
	return true, APIKeyAccepted
}

// usableKeyJoin (or on PostgreSQL usableKeyJoinPostgres) and usableKeyCondition select the API
// keys (k) that may still authenticate at the time given as the condition's one placeholder: the
// SQL form of APIKeyUsable. Usage ingest confirms its events' keys with them (Tx.ingestUsage,
// postgresIngest).
const (
	usableKeyJoin = `api_keys k
		JOIN service_accounts a ON a.id = k.service_account_id
		JOIN projects p ON p.id = a.project_id
		JOIN organizations o ON o.id = p.organization_id`
	// usableKeyJoinPostgres is usableKeyJoin read from the keys outwards, whatever the
	// statistics: each step is a LATERAL subquery that OFFSET 0 keeps PostgreSQL from pulling
	// up, so it is evaluated per row of the step before (a primary-key probe, or a scan of a
	// table the statistics call small). As a plain join, the generic plan cached for the ingest
	// statement, its tables' statistics older than their rows, joined every service account to
	// every project and probed api_keys once per account: 1.75 ms of a 2.1 ms flush with 111
	// accounts, 40 % of PostgreSQL's CPU per ingested event (docs/benchmarks.md,
	// TestIngestConfirmsKeysOncePerCall). Its columns are those usableKeyCondition reads.
	usableKeyJoinPostgres = `api_keys k
		CROSS JOIN LATERAL (SELECT a.project_id, a.disabled_at FROM service_accounts a
			WHERE a.id = k.service_account_id OFFSET 0) a
		CROSS JOIN LATERAL (SELECT p.organization_id, p.archived_at FROM projects p
			WHERE p.id = a.project_id OFFSET 0) p
		CROSS JOIN LATERAL (SELECT o.archived_at FROM organizations o WHERE o.id = p.organization_id OFFSET 0) o`
	usableKeyCondition = `k.revoked_at IS NULL AND (k.expires_at IS NULL OR k.expires_at > ?)
		AND a.disabled_at IS NULL AND p.archived_at IS NULL AND o.archived_at IS NULL`
)
