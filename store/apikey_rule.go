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

// usableKeyJoin and usableKeyCondition select the API keys (k) that may still authenticate at
// the time given as the condition's one placeholder: the SQL form of APIKeyUsable. Usage ingest
// confirms its events' keys with them (Tx.ingestUsage, postgresIngest).
const (
	usableKeyJoin = `api_keys k
		JOIN service_accounts a ON a.id = k.service_account_id
		JOIN projects p ON p.id = a.project_id
		JOIN organizations o ON o.id = p.organization_id`
	usableKeyCondition = `k.revoked_at IS NULL AND (k.expires_at IS NULL OR k.expires_at > ?)
		AND a.disabled_at IS NULL AND p.archived_at IS NULL AND o.archived_at IS NULL`
)
