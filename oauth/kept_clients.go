package oauth

import (
	"context"
	"errors"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"
	"github.com/ory/fosite"

	"github.com/gatehouse-dev/gatehouse/store"
)

// Clients kept between client_credentials requests.
//
// A client_credentials token request reads its client (OIDCClientByID: the client's row, its
// project and organization) and then writes the token row: two statements, on PostgreSQL two
// round trips. The token endpoint instead keeps the confidential clients it has read, each with
// the version of its row, and authenticates a client_credentials request against the kept copy
// (fosite compares the presented secret with the kept hash, an HMAC, in constant time, and checks
// the kept grant types and scopes). The token row is then written on condition, in the statement
// that writes it, that the client is still at that version and its project and organization are
// not archived (store.OAuthToken.ClientVersion). Any change to a client's row moves its version
// (a trigger, migration 38), so a client disabled, deleted, its secret rotated or its grants or
// scopes changed a moment ago, on any replica, refuses the write (store.ErrClientChanged). The
// request is then answered again from a fresh read, as every request was before (Provider.Token):
// a rotated-out secret gets 401 invalid_client on the very next request. Any other failure of a
// request served from a kept client is answered again from a fresh read as well, so that a client
// presenting its new secret, or a scope added a moment ago, is never refused on an old copy.
//
// Introspection by a caller that authenticates with HTTP Basic keeps clients too. Its one
// read is the token row, and that statement confirms the caller at the kept version, and the
// token's own client usable (store.OAuthTokenConfirmed, through keptCaller); a row not
// confirmed is not found, and the request is answered again from a fresh read, so a caller
// disabled or its secret rotated a moment ago gets 401 invalid_client on the very next request,
// and a token whose client was disabled is inactive.
//
// Only those two keep clients, and only clients that authenticate with a secret: a
// private_key_jwt client's assertion is recorded (its jti) before the token is written, so a
// second attempt would find it used. Revocation and the other grants read their client on
// every request.
//
// The client's read was a fifth of a PostgreSQL ES256 token's server CPU and one of its two
// round trips (docs/benchmarks.md, "Clients kept between token requests"), and one of an
// introspection's two statements.

// keptClientsSize and keptClientsTTL bound the kept clients: at most that many, each forgotten
// that long after it was read. Freshness does not rest on them: every token written from a kept
// client confirms it.
const (
	keptClientsSize = 10_000
	keptClientsTTL  = 5 * time.Minute
)

// keptClient is a client as read, with its row's version.
type keptClient struct {
	client  *Client
	version int64
}

// newKeptClients makes the kept clients by id: golang-lru's thread-safe expirable LRU.
func newKeptClients() *expirable.LRU[string, keptClient] {
	return expirable.NewLRU[string, keptClient](keptClientsSize, nil, keptClientsTTL)
}

// clientKeeping is what a request that may use kept clients records in its clientMemo.
type clientKeeping struct {
	// versions are the clients the request took from the kept ones or read and kept, with the
	// versions their token rows are written on condition of.
	versions map[string]int64
	// used is set once a client was taken from the kept ones.
	used bool
}

// withKeptClients returns ctx with an empty client memo that may use, and adds to, the kept
// clients: for a client_credentials token request.
func withKeptClients(ctx context.Context) context.Context {
	return context.WithValue(ctx, clientMemoKey{}, &clientMemo{clients: map[string]fosite.Client{},
		keep: &clientKeeping{versions: map[string]int64{}}})
}

// takeKeptClient returns client id from the kept ones when memo's request may use them.
func (f *FositeStore) takeKeptClient(memo *clientMemo, id string) (fosite.Client, bool) {
	if memo == nil || memo.keep == nil {
		return nil, false
	}
	k, ok := f.kept.Get(id)
	if !ok {
		return nil, false
	}
	memo.mu.Lock()
	memo.keep.versions[id], memo.keep.used = k.version, true
	memo.mu.Unlock()
	return k.client, true
}

// keepClient keeps client c, just read at version, when memo's request may use kept clients
// and c authenticates with a secret.
func (f *FositeStore) keepClient(memo *clientMemo, id string, c fosite.Client, version int64) {
	client, ok := c.(*Client)
	if memo.keep == nil || !ok || client.IsPublic() {
		return
	}
	f.kept.Add(id, keptClient{client: client, version: version})
	memo.mu.Lock()
	memo.keep.versions[id] = version
	memo.mu.Unlock()
}

// keptCaller returns the client a request that may use kept clients has taken from them or read
// and kept, with its version, when there is exactly one: an introspection's caller before its
// token is read.
func keptCaller(ctx context.Context) (id string, version int64, ok bool) {
	memo, _ := ctx.Value(clientMemoKey{}).(*clientMemo)
	if memo == nil || memo.keep == nil {
		return "", 0, false
	}
	memo.mu.Lock()
	defer memo.mu.Unlock()
	if len(memo.keep.versions) != 1 {
		return "", 0, false
	}
	for id, version = range memo.keep.versions {
	}
	return id, version, true
}

// keptClientVersion is the version a token row of client id written for ctx's request is
// conditioned on: 0 (none) unless the request may use kept clients and took or kept that one.
func keptClientVersion(ctx context.Context, id string) int64 {
	memo, _ := ctx.Value(clientMemoKey{}).(*clientMemo)
	if memo == nil || memo.keep == nil {
		return 0
	}
	memo.mu.Lock()
	defer memo.mu.Unlock()
	return memo.keep.versions[id]
}

// answerAgain reports whether a request served with ctx that failed with err must be answered
// again from a fresh read of its client: it took a client from the kept ones, or its token row
// was refused because its client changed. The clients it took or kept are forgotten then.
func (f *FositeStore) answerAgain(ctx context.Context, err error) bool {
	memo, _ := ctx.Value(clientMemoKey{}).(*clientMemo)
	if memo == nil || memo.keep == nil {
		return false
	}
	memo.mu.Lock()
	defer memo.mu.Unlock()
	if !memo.keep.used && !errors.Is(err, store.ErrClientChanged) {
		return false
	}
	for id := range memo.keep.versions {
		f.kept.Remove(id)
	}
	return true
}
