package store

import (
	"context"
	"fmt"
	"time"

	"github.com/lib/pq"
)

// postgresTokenTake inserts the rows of one take of the token queue and runs their purges, in
// one autocommit statement: one round trip and one commit for every row queued together. The
// rows come as arrays ($1–$16; $16 is each row's ClientVersion, 0 for an unconditional row); a
// conditional row is inserted only while its client is at that version and usable
// (oauthClientUsable), as oauthTokenInsertConfirmed inserts it. The purges, added up ($17 the
// earliest ExpiredBefore, $18 the summed Limit, 0 for none), run in the same statement; its
// DELETE sees the table as it was before the statement, so it never removes a row the statement
// inserts. RETURNING names the rows inserted: a conditional row it does not name was refused.
const postgresTokenTake = `WITH input AS (
	SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bool[],
		$7::text[], $8::text[], $9::text[], $10::text[], $11::text[], $12::bytea[], $13::text[],
		$14::timestamptz[], $15::timestamptz[], $16::int8[])
		AS r(kind, signature, request_id, client_id, subject, active, scopes, granted_scopes,
			requested_audience, granted_audience, form, session, access_signature, requested_at,
			expires_at, client_version)
), purged AS (
	DELETE FROM oauth_tokens WHERE (kind, signature) IN
		(SELECT kind, signature FROM oauth_tokens WHERE expires_at < $17 ORDER BY expires_at LIMIT $18)
)
INSERT INTO oauth_tokens (kind, signature, request_id, client_id, subject, active, scopes,
	granted_scopes, requested_audience, granted_audience, form, session, access_signature,
	requested_at, expires_at)
SELECT kind, signature, request_id, client_id, subject, active, scopes, granted_scopes,
	requested_audience, granted_audience, form, session, access_signature, requested_at, expires_at
FROM input r
WHERE r.client_version = 0 OR EXISTS (` + oauthClientUsable + `
	AND c.id = r.client_id AND c.version = r.client_version)
RETURNING kind, signature`

// storeTokensPostgres stores take with postgresTokenTake and marks each conditional row its
// client no longer allows refused (ErrClientChanged), as storeTokens does in a transaction. An
// invalid row (CreateOAuthToken's ErrInvalid) or a failed statement (a signature stored
// already: ErrConflict) fails the whole take, which flushTokens then stores row by row.
func (s *Store) storeTokensPostgres(ctx context.Context, take []pendingToken) error {
	n := len(take)
	kinds, signatures, requests, clients, subjects := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	scopes, granted, requestedAud, grantedAud, forms := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	accessSignatures, requestedAt, expiresAt := make([]string, n), make([]string, n), make([]string, n)
	active, sessions, versions := make([]bool, n), make([][]byte, n), make([]int64, n)
	var purge TokenPurge
	for i := range take {
		take[i].refused = nil
		t := take[i].row
		if err := validOAuthToken(t); err != nil {
			return err
		}
		kinds[i], signatures[i], requests[i], clients[i], subjects[i] = t.Kind, t.Signature, t.RequestID, t.ClientID, t.Subject
		scopes[i], granted[i], requestedAud[i], grantedAud[i], forms[i] = t.Scopes, t.GrantedScopes, t.RequestedAudience, t.GrantedAudience, t.Form
		accessSignatures[i], active[i], versions[i] = t.AccessSignature, t.Active, t.ClientVersion
		session, requested, expires := t.storedValues()
		sessions[i], requestedAt[i], expiresAt[i] = session, requested.text(), expires.text()
		purge = purge.plus(take[i].purge)
	}
	stmt, err := s.writeStatement(ctx, postgresTokenTake)
	if err != nil {
		return wrapError("create oauth token", err)
	}
	rows, err := stmt.QueryContext(ctx, pq.StringArray(kinds), pq.StringArray(signatures), pq.StringArray(requests),
		pq.StringArray(clients), pq.StringArray(subjects), pq.BoolArray(active), pq.StringArray(scopes),
		pq.StringArray(granted), pq.StringArray(requestedAud), pq.StringArray(grantedAud), pq.StringArray(forms),
		pq.ByteaArray(sessions), pq.StringArray(accessSignatures), pq.StringArray(requestedAt),
		pq.StringArray(expiresAt), pq.Int64Array(versions),
		sqlTime(purge.ExpiredBefore.UTC().Truncate(time.Microsecond)), purge.Limit)
	if err != nil {
		return wrapError("create oauth token", err)
	}
	defer rows.Close()
	stored := make(map[[2]string]bool, n)
	for rows.Next() {
		var kind, signature string
		if err := rows.Scan(&kind, &signature); err != nil {
			return wrapError("create oauth token", err)
		}
		stored[[2]string{kind, signature}] = true
	}
	if err := rows.Err(); err != nil {
		return wrapError("create oauth token", err)
	}
	for i, p := range take {
		if stored[[2]string{p.row.Kind, p.row.Signature}] {
			continue
		}
		if p.row.ClientVersion == 0 {
			return fmt.Errorf("store: create oauth token %s: not stored", p.row.Kind)
		}
		take[i].refused = fmt.Errorf("store: create oauth token: %w", ErrClientChanged)
	}
	return nil
}
