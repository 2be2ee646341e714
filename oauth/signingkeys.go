package oauth

import (
	"context"
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v3"

	"github.com/gatehouse-dev/gatehouse/store"
)

// Token signing keys.
//
// The provider signs every JWT (access tokens, ID tokens) under one key at a time and publishes
// its public keys at /.well-known/jwks.json. A key is RS256, ES256 or EdDSA (signingalgs.go);
// KeySetOptions.Algorithm (GATEHOUSE_SIGNING_ALG) picks the algorithm of the keys a KeySet
// generates, so a rotation may move from one algorithm to another: both keys are published
// through the timeline below, and tokens of either verify. Keys live in the signing_keys table,
// the private key sealed (package store/seal) under the secret key with the additional data
// "signing-key:<kid>".
//
// Timeline of a rotation (`gatehouse keys rotate-signing`) started at T with publish delay P
// (GATEHOUSE_SIGNING_KEY_PUBLISH_DELAY, default DefaultPublishDelay = 1 h):
//
//	T             the new key is created and published; the old key still signs.
//	T + P         the new key signs (ActivatesAt). Relying parties that cached the JWKS before
//	              T have refetched it by now (our JWKS says max-age=300; P is 12 times that).
//	T + P + L + S the old key leaves the JWKS (RetiresAt): L = MaxSignedTokenLifetime (1 h) is
//	              the life of the last token it signed, S = ClockSkew (5 min) the leeway
//	              verifiers allow past exp.
//
// Every replica sees a rotation within its cache TTL (DefaultKeyCacheTTL = 1 min), far less
// than P; activation and retirement are times stored in the rows, so replicas switch keys at
// the same instant whatever their cache age.
const (
	// DefaultSigningAlgorithm is the algorithm of generated keys when KeySetOptions names none.
	DefaultSigningAlgorithm = store.SigningAlgorithmRS256
	// SigningKeyBits is the RSA modulus size of generated RS256 keys.
	SigningKeyBits = 2048
	// MaxSignedTokenLifetime is the longest lifetime of a token signed with these keys (access
	// and ID tokens live 1 h). A key stays published this long after it stops signing, plus
	// ClockSkew.
	MaxSignedTokenLifetime = time.Hour
	// ClockSkew is the leeway a verifier may allow past a token's exp.
	ClockSkew = 5 * time.Minute
	// DefaultPublishDelay is how long a new key is published before it signs.
	DefaultPublishDelay = time.Hour
	// DefaultKeyCacheTTL is how long a KeySet reuses the keys it read from the database.
	DefaultKeyCacheTTL = time.Minute
)

// ErrRotationPending is returned by Rotate while the key of an earlier rotation is published but
// not signing yet: rotating again before it activates would retire a key before it ever signed.
var ErrRotationPending = errors.New("oauth: a signing key rotation is already pending")

// Sealer seals and opens secrets at rest, binding each to additional data; *seal.Keyring is
// one. (Package oauth cannot import store/seal, which derives its keys with DeriveKey.)
type Sealer interface {
	Seal(plaintext, aad []byte) (string, error)
	Open(sealed string, aad []byte) ([]byte, error)
}

// SigningKey is a signing key with its private key opened.
type SigningKey struct {
	// ID is the key's "kid".
	ID string
	// Algorithm is the key's JWS "alg": RS256, ES256 or EdDSA.
	Algorithm string
	// Key is the private key: *rsa.PrivateKey, *ecdsa.PrivateKey (P-256) or ed25519.PrivateKey.
	Key         crypto.Signer
	ActivatesAt time.Time
	// RetiresAt is nil for the newest key, which has no retirement scheduled.
	RetiresAt *time.Time
}

// JSONWebKey returns the private key as a JWK with kid, alg and use sig: what a JWS signer
// (go-jose, fosite's jwt.DefaultSigner) takes, so that the header carries the kid and alg.
func (k SigningKey) JSONWebKey() *jose.JSONWebKey {
	return &jose.JSONWebKey{Key: k.Key, KeyID: k.ID, Algorithm: k.Algorithm, Use: "sig"}
}

// KeySetOptions tune a KeySet; the zero value is the production setting.
type KeySetOptions struct {
	// Now is the clock (nil: time.Now). Tests drive the rotation timeline with it.
	Now func() time.Time
	// CacheTTL is how long keys read from the database are reused: 0 means
	// DefaultKeyCacheTTL, a negative value reads them on every call.
	CacheTTL time.Duration
	// Algorithm is the algorithm of the keys Ensure and Rotate generate: one of
	// SigningAlgorithms ("" means DefaultSigningAlgorithm). Keys already stored keep theirs.
	Algorithm string
}

// KeySet is the provider's signing keys over the store: the key that signs now (Current) and
// the public keys relying parties verify with (JWKS). It is safe for concurrent use.
type KeySet struct {
	store  *store.Store
	sealer Sealer
	now    func() time.Time
	ttl    time.Duration
	alg    string

	mu       sync.Mutex
	loaded   bool
	loadedAt time.Time
	// keys are the rows not retired at loadedAt, newest activation first, with their parsed
	// public keys.
	keys []publicKey
	// private caches opened private keys by kid.
	private map[string]crypto.Signer
}

type publicKey struct {
	row store.SigningKey
	key crypto.PublicKey
}

// NewKeySet returns the key set over st; sealer seals new private keys and opens stored ones.
// It reads nothing yet: call Ensure at start-up. An Algorithm that is not one of
// SigningAlgorithms makes every key generation fail (Ensure, Rotate); configuration checks it
// first (CheckSigningAlgorithm).
func NewKeySet(st *store.Store, sealer Sealer, opts KeySetOptions) *KeySet {
	ks := &KeySet{store: st, sealer: sealer, now: opts.Now, ttl: opts.CacheTTL, alg: opts.Algorithm,
		private: map[string]crypto.Signer{}}
	if ks.alg == "" {
		ks.alg = DefaultSigningAlgorithm
	}
	if ks.now == nil {
		ks.now = time.Now
	}
	if ks.ttl == 0 {
		ks.ttl = DefaultKeyCacheTTL
	}
	return ks
}

// Algorithm is the algorithm of the keys ks generates.
func (ks *KeySet) Algorithm() string { return ks.alg }

// Current returns the key to sign with now: the newest key whose ActivatesAt has passed and
// that is not retired. When there is none (an empty database) it creates one, as Ensure does.
func (ks *KeySet) Current(ctx context.Context) (SigningKey, error) {
	keys, err := ks.snapshot(ctx, false)
	if err != nil {
		return SigningKey{}, err
	}
	if k, ok := current(keys, ks.now()); ok {
		return ks.open(k)
	}
	return ks.Ensure(ctx)
}

// ErrNoSigningKeyForAlgorithm is returned by CurrentFor when the key that signs now has another
// algorithm than the one asked for.
var ErrNoSigningKeyForAlgorithm = errors.New("oauth: no active signing key of the algorithm")

// CurrentFor returns the key to sign with now when its algorithm is alg, and an error wrapping
// ErrNoSigningKeyForAlgorithm otherwise. One key signs at a time: the outgoing key of a rotation
// stops signing when the next one activates (it is only published after that, for the tokens
// it signed), so a client that registered another algorithm than the current key's gets no
// token rather than one it cannot verify.
func (ks *KeySet) CurrentFor(ctx context.Context, alg string) (SigningKey, error) {
	k, err := ks.Current(ctx)
	if err != nil {
		return SigningKey{}, err
	}
	if k.Algorithm != alg {
		return SigningKey{}, fmt.Errorf("%w: %s is asked for, key %s signs %s", ErrNoSigningKeyForAlgorithm, alg, k.ID, k.Algorithm)
	}
	return k, nil
}

// Ensure makes sure a key signs now and returns it: when the database holds no active key and
// none is scheduled, it generates a key of ks.Algorithm() that signs at once (no relying party
// can hold a token yet). Replicas that call it together end up with one key: the database admits
// one unscheduled key, and the losers read the winner's.
func (ks *KeySet) Ensure(ctx context.Context) (SigningKey, error) {
	keys, err := ks.snapshot(ctx, true)
	if err != nil {
		return SigningKey{}, err
	}
	if k, ok := current(keys, ks.now()); ok {
		return ks.open(k)
	}
	if !hasHead(keys) {
		next, err := ks.newKey(time.Time{})
		if err != nil {
			return SigningKey{}, err
		}
		err = ks.store.InTx(ctx, func(tx *store.Tx) error {
			existing, err := tx.ListSigningKeys(ctx, ks.now())
			if err != nil || hasHead(publicRows(existing)) {
				return err
			}
			next.ActivatesAt = ks.now()
			return tx.CreateSigningKey(ctx, &next)
		})
		if err != nil && !errors.Is(err, store.ErrConflict) { // conflict: another replica won
			return SigningKey{}, fmt.Errorf("oauth: ensure signing key: %w", err)
		}
	}
	if keys, err = ks.snapshot(ctx, true); err != nil {
		return SigningKey{}, err
	}
	if k, ok := current(keys, ks.now()); ok {
		return ks.open(k)
	}
	return SigningKey{}, errors.New("oauth: ensure signing key: no key is active (the newest is not active yet and no older key is left)")
}

// Rotation is what Rotate did.
type Rotation struct {
	// KeyID is the new key; it is published now and signs from ActivatesAt.
	KeyID       string
	ActivatesAt time.Time
	// RetiredKeyID is the key that signed until now ("" when there was none); it stays
	// published until RetiresAt.
	RetiredKeyID string
	RetiresAt    time.Time
}

// Rotate creates the next key, published now and signing from now + publishDelay, and
// schedules the retirement of the current newest key at that activation plus
// MaxSignedTokenLifetime plus ClockSkew (see the timeline above). With no key at all it
// creates one that signs at once. It returns ErrRotationPending while the key of an earlier
// rotation has not activated yet, and an error wrapping store.ErrConflict when a concurrent
// rotation won.
func (ks *KeySet) Rotate(ctx context.Context, publishDelay time.Duration) (Rotation, error) {
	if publishDelay < 0 {
		return Rotation{}, fmt.Errorf("oauth: rotate signing key: negative publish delay %s", publishDelay)
	}
	next, err := ks.newKey(time.Time{})
	if err != nil {
		return Rotation{}, err
	}
	var r Rotation
	err = ks.store.InTx(ctx, func(tx *store.Tx) error {
		now := ks.now()
		keys, err := tx.ListSigningKeys(ctx, now)
		if err != nil {
			return err
		}
		r = Rotation{KeyID: next.ID, ActivatesAt: now}
		for _, k := range keys {
			if k.RetiresAt != nil {
				continue
			}
			if k.ActivatesAt.After(now) {
				return fmt.Errorf("%w: key %s signs from %s", ErrRotationPending, k.ID, k.ActivatesAt.Format(time.RFC3339))
			}
			r.ActivatesAt = now.Add(publishDelay)
			r.RetiredKeyID = k.ID
			r.RetiresAt = r.ActivatesAt.Add(MaxSignedTokenLifetime + ClockSkew)
			if _, err := tx.RetireSigningKeys(ctx, r.RetiresAt); err != nil {
				return err
			}
		}
		next.ActivatesAt = r.ActivatesAt
		if err := tx.CreateSigningKey(ctx, &next); err != nil {
			return err
		}
		r.ActivatesAt, r.RetiresAt = next.ActivatesAt, r.RetiresAt.UTC().Truncate(time.Microsecond)
		return nil
	})
	ks.invalidate()
	if err != nil {
		return Rotation{}, fmt.Errorf("oauth: rotate signing key: %w", err)
	}
	return r, nil
}

// JWKS returns the published public keys, newest activation first: every key not retired,
// including the next key before it signs. It never holds private members.
func (ks *KeySet) JWKS(ctx context.Context) (jose.JSONWebKeySet, error) {
	keys, err := ks.snapshot(ctx, false)
	if err != nil {
		return jose.JSONWebKeySet{}, err
	}
	now := ks.now()
	set := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{}}
	for _, k := range keys {
		if k.row.RetiresAt == nil || k.row.RetiresAt.After(now) {
			set.Keys = append(set.Keys, jose.JSONWebKey{Key: k.key, KeyID: k.row.ID, Algorithm: k.row.Algorithm, Use: "sig"})
		}
	}
	return set, nil
}

// snapshot returns the keys not retired when they were read, from the cache unless it is
// older than the TTL, the clock went back, or fresh is set.
func (ks *KeySet) snapshot(ctx context.Context, fresh bool) ([]publicKey, error) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	now := ks.now()
	if !fresh && ks.loaded && ks.ttl > 0 && !now.Before(ks.loadedAt) && now.Sub(ks.loadedAt) < ks.ttl {
		return ks.keys, nil
	}
	rows, err := ks.store.ListSigningKeys(ctx, now)
	if err != nil {
		return nil, fmt.Errorf("oauth: signing keys: %w", err)
	}
	keys := make([]publicKey, 0, len(rows))
	for _, row := range rows {
		pub, err := parsePublicKey(row.Algorithm, row.PublicKey)
		if err != nil {
			return nil, fmt.Errorf("oauth: signing key %s: %w", row.ID, err)
		}
		keys = append(keys, publicKey{row: row, key: pub})
	}
	ks.keys, ks.loaded, ks.loadedAt = keys, true, now
	return keys, nil
}

// invalidate drops the cached keys.
func (ks *KeySet) invalidate() {
	ks.mu.Lock()
	ks.loaded = false
	ks.mu.Unlock()
}

// open returns k with its private key, opened once and then cached. The opened key must match
// the published public key, so a row whose public half was swapped does not sign.
func (ks *KeySet) open(k publicKey) (SigningKey, error) {
	ks.mu.Lock()
	priv := ks.private[k.row.ID]
	ks.mu.Unlock()
	if priv == nil {
		der, err := ks.sealer.Open(k.row.PrivateKey, store.SigningKeyAAD(k.row.ID))
		if err != nil {
			return SigningKey{}, fmt.Errorf("oauth: signing key %s: %w", k.row.ID, err)
		}
		parsed, err := x509.ParsePKCS8PrivateKey(der)
		clear(der)
		if err != nil {
			return SigningKey{}, fmt.Errorf("oauth: signing key %s: %w", k.row.ID, err)
		}
		signer, ok := parsed.(crypto.Signer)
		if !ok || !publicKeyEqual(signer.Public(), k.key) {
			return SigningKey{}, fmt.Errorf("oauth: signing key %s: the private key does not match the published key", k.row.ID)
		}
		priv = signer
		ks.mu.Lock()
		ks.private[k.row.ID] = priv
		ks.mu.Unlock()
	}
	return SigningKey{ID: k.row.ID, Algorithm: k.row.Algorithm, Key: priv, ActivatesAt: k.row.ActivatesAt, RetiresAt: k.row.RetiresAt}, nil
}

// newKey generates a key of ks.alg and returns its row: id "sig_<ulid>", the PKCS #8 DER
// private key sealed with SigningKeyAAD(id), the public key in PEM.
func (ks *KeySet) newKey(activates time.Time) (store.SigningKey, error) {
	priv, err := generateSigningKey(ks.alg)
	if err != nil {
		return store.SigningKey{}, fmt.Errorf("oauth: generate signing key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return store.SigningKey{}, fmt.Errorf("oauth: generate signing key: %w", err)
	}
	id := store.NewID("sig")
	sealed, err := ks.sealer.Seal(der, store.SigningKeyAAD(id))
	clear(der)
	if err != nil {
		return store.SigningKey{}, fmt.Errorf("oauth: seal signing key: %w", err)
	}
	spki, err := x509.MarshalPKIXPublicKey(priv.Public())
	if err != nil {
		return store.SigningKey{}, fmt.Errorf("oauth: generate signing key: %w", err)
	}
	return store.SigningKey{
		ID: id, Algorithm: ks.alg, PrivateKey: sealed,
		PublicKey:   string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: spki})),
		ActivatesAt: activates,
	}, nil
}

// current picks the signing key at now from keys (newest activation first).
func current(keys []publicKey, now time.Time) (publicKey, bool) {
	for _, k := range keys {
		if !k.row.ActivatesAt.After(now) && (k.row.RetiresAt == nil || k.row.RetiresAt.After(now)) {
			return k, true
		}
	}
	return publicKey{}, false
}

// hasHead reports whether a key without a scheduled retirement is among keys.
func hasHead(keys []publicKey) bool {
	for _, k := range keys {
		if k.row.RetiresAt == nil {
			return true
		}
	}
	return false
}

// publicRows wraps rows for hasHead.
func publicRows(rows []store.SigningKey) []publicKey {
	out := make([]publicKey, len(rows))
	for i, r := range rows {
		out[i].row = r
	}
	return out
}
