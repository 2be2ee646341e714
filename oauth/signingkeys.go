package oauth

import (
	"context"
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v3"

	"github.com/gatehouse-dev/gatehouse/store"
)

// Token signing keys.
//
// The provider signs every JWT (access tokens, ID tokens) and publishes its public keys at
// /.well-known/jwks.json. A key is RS256, ES256 or EdDSA (signingalgs.go). Each algorithm the
// provider offers (KeySetOptions.Algorithms, GATEHOUSE_SIGNING_ALGS) has its own line of keys
// with at most one key not scheduled for retirement (its head; the database admits one per
// algorithm), so a client that registered id_token_signed_response_alg is served by the key of
// its algorithm (CurrentFor) while the others sign with the default algorithm's key
// (KeySetOptions.Algorithm, GATEHOUSE_SIGNING_ALG; Current). An offered algorithm without a key
// gets one at start-up (EnsureAll) or on first use. Keys live in the signing_keys table, the
// private key sealed (package store/seal) under the secret key with the additional data
// "signing-key:<kid>".
//
// Timeline of a rotation of one algorithm's line (`gatehouse keys rotate-signing`, Rotate and
// RotateAlgorithm) started at T with publish delay P (GATEHOUSE_SIGNING_KEY_PUBLISH_DELAY,
// default DefaultPublishDelay = 1 h):
//
//	T             the new key is created and published; the old key still signs.
//	T + P         the new key signs (ActivatesAt). Relying parties that cached the JWKS before
//	              T have refetched it by now (our JWKS says max-age=300; P is 12 times that).
//	T + P + L + S the old key leaves the JWKS (RetiresAt): L = MaxSignedTokenLifetime (1 h) is
//	              the life of the last token it signed, S = ClockSkew (5 min) the leeway
//	              verifiers allow past exp.
//
// So a key signs from ActivatesAt until RetiresAt - L - S (signsAt), whichever key replaced
// it. A rotation of the default algorithm also retires the heads of algorithms no longer
// offered: that is how GATEHOUSE_SIGNING_ALG moves from one algorithm to another, both keys
// published through the timeline, tokens of either verifying, and the default key falling back
// to the newest key that signs while the new algorithm's key is not active yet.
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
	// Algorithm is the default algorithm: the one Current signs with and Ensure and Rotate
	// generate keys of; one of SigningAlgorithms ("" means DefaultSigningAlgorithm). Keys
	// already stored keep theirs.
	Algorithm string
	// Algorithms are the algorithms offered: each keeps an active key (EnsureAll, CurrentFor)
	// and clients may register them. Algorithm is offered whether listed or not, and comes
	// first; nil offers only Algorithm.
	Algorithms []string
}

// KeySet is the provider's signing keys over the store: the key that signs now (Current) and
// the public keys relying parties verify with (JWKS). It is safe for concurrent use.
type KeySet struct {
	store  *store.Store
	sealer Sealer
	now    func() time.Time
	ttl    time.Duration
	alg    string
	// offered is alg then the other offered algorithms.
	offered []string

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
	ks.offered = []string{ks.alg}
	for _, a := range opts.Algorithms {
		if !slices.Contains(ks.offered, a) {
			ks.offered = append(ks.offered, a)
		}
	}
	if ks.now == nil {
		ks.now = time.Now
	}
	if ks.ttl == 0 {
		ks.ttl = DefaultKeyCacheTTL
	}
	return ks
}

// Algorithm is the default algorithm: Current's, and that of the keys Ensure and Rotate make.
func (ks *KeySet) Algorithm() string { return ks.alg }

// Algorithms are the algorithms offered, the default first. The caller must not modify them.
func (ks *KeySet) Algorithms() []string { return ks.offered }

// Current returns the key to sign with now for a client that asked for no algorithm: the
// newest key of the default algorithm that signs now (signsAt), else the newest key of any
// algorithm that signs now (while a rotation to the default algorithm has not activated yet).
// When no key signs (an empty database) it creates one, as Ensure does.
func (ks *KeySet) Current(ctx context.Context) (SigningKey, error) {
	keys, err := ks.snapshot(ctx, false)
	if err != nil {
		return SigningKey{}, err
	}
	now := ks.now()
	if k, ok := current(keys, now, ks.alg); ok {
		return ks.open(k)
	}
	if k, ok := current(keys, now, ""); ok {
		return ks.open(k)
	}
	return ks.Ensure(ctx)
}

// ErrNoSigningKeyForAlgorithm is returned by CurrentFor when no key of the algorithm signs now
// and none can be made for it.
var ErrNoSigningKeyForAlgorithm = errors.New("oauth: no active signing key of the algorithm")

// CurrentFor returns the newest key of algorithm alg that signs now. When there is none and alg
// is offered with no key of its line pending, it creates one that signs at once (as Ensure).
// Otherwise (alg not offered, or its next key published but not active yet) it returns an
// error wrapping ErrNoSigningKeyForAlgorithm: a client that registered alg gets no token
// rather than one it cannot verify.
func (ks *KeySet) CurrentFor(ctx context.Context, alg string) (SigningKey, error) {
	keys, err := ks.snapshot(ctx, false)
	if err != nil {
		return SigningKey{}, err
	}
	if k, ok := current(keys, ks.now(), alg); ok {
		return ks.open(k)
	}
	if !slices.Contains(ks.offered, alg) {
		return SigningKey{}, fmt.Errorf("%w: %s is not offered (GATEHOUSE_SIGNING_ALGS) and no key of it signs", ErrNoSigningKeyForAlgorithm, alg)
	}
	return ks.ensure(ctx, alg)
}

// Ensure makes sure a key of the default algorithm signs now and returns it (see ensure).
func (ks *KeySet) Ensure(ctx context.Context) (SigningKey, error) {
	return ks.ensure(ctx, ks.alg)
}

// EnsureAll makes sure every offered algorithm has a key that signs now, or one published that
// will, and returns the key of each that signs now (none for a line whose next key is pending),
// in the order of Algorithms.
func (ks *KeySet) EnsureAll(ctx context.Context) ([]SigningKey, error) {
	var out []SigningKey
	for _, alg := range ks.offered {
		k, err := ks.ensure(ctx, alg)
		if errors.Is(err, ErrNoSigningKeyForAlgorithm) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	return out, nil
}

// ensure returns the newest key of alg that signs now. When alg has no key that signs and
// none scheduled (no head), it generates one that signs at once: no relying party can hold a
// token of it yet. When the head is published but not active yet it returns an error wrapping
// ErrNoSigningKeyForAlgorithm. Replicas that call it together end up with one key: the database
// admits one unscheduled key per algorithm, and the losers read the winner's.
func (ks *KeySet) ensure(ctx context.Context, alg string) (SigningKey, error) {
	keys, err := ks.snapshot(ctx, true)
	if err != nil {
		return SigningKey{}, err
	}
	if k, ok := current(keys, ks.now(), alg); ok {
		return ks.open(k)
	}
	if !hasHead(keys, alg) {
		next, err := newKey(ks.sealer, alg, time.Time{})
		if err != nil {
			return SigningKey{}, err
		}
		err = ks.store.InTx(ctx, func(tx *store.Tx) error {
			existing, err := tx.ListSigningKeys(ctx, ks.now())
			if err != nil || hasHead(publicRows(existing), alg) {
				return err
			}
			next.ActivatesAt = ks.now()
			return tx.CreateSigningKey(ctx, &next)
		})
		if err != nil && !errors.Is(err, store.ErrConflict) { // conflict: another replica won
			return SigningKey{}, fmt.Errorf("oauth: ensure %s signing key: %w", alg, err)
		}
	}
	if keys, err = ks.snapshot(ctx, true); err != nil {
		return SigningKey{}, err
	}
	if k, ok := current(keys, ks.now(), alg); ok {
		return ks.open(k)
	}
	return SigningKey{}, fmt.Errorf("%w: ensure %s signing key: its next key is not active yet and no older one signs", ErrNoSigningKeyForAlgorithm, alg)
}

// Rotation is what Rotate or RotateAlgorithm did.
type Rotation struct {
	// KeyID is the new key, of Algorithm; it is published now and signs from ActivatesAt.
	KeyID       string
	Algorithm   string
	ActivatesAt time.Time
	// RetiredKeyID is the key of Algorithm that signed until now, or when there was none the
	// first of Retired ("" when there was no key at all); it stays published until RetiresAt.
	RetiredKeyID string
	RetiresAt    time.Time
	// Retired are every key whose retirement the rotation scheduled at RetiresAt: the head of
	// Algorithm and, for Rotate, the heads of algorithms no longer offered.
	Retired []string
}

// Rotate rotates the default algorithm's line (RotateAlgorithm) and retires with it the heads
// of the algorithms ks does not offer, which is how the default algorithm moves from one
// algorithm to another.
func (ks *KeySet) Rotate(ctx context.Context, publishDelay time.Duration) (Rotation, error) {
	return ks.rotate(ctx, ks.alg, publishDelay, true)
}

// RotateAlgorithm creates the next key of alg, published now and signing from now +
// publishDelay, and schedules the retirement of alg's current head at that activation plus
// MaxSignedTokenLifetime plus ClockSkew (see the timeline above). With no key of alg at all it
// creates one that signs at once. It returns ErrRotationPending while the key of an earlier
// rotation of alg has not activated yet, and an error wrapping store.ErrConflict when a
// concurrent rotation won.
func (ks *KeySet) RotateAlgorithm(ctx context.Context, alg string, publishDelay time.Duration) (Rotation, error) {
	return ks.rotate(ctx, alg, publishDelay, false)
}

func (ks *KeySet) rotate(ctx context.Context, alg string, publishDelay time.Duration, unoffered bool) (Rotation, error) {
	if publishDelay < 0 {
		return Rotation{}, fmt.Errorf("oauth: rotate signing key: negative publish delay %s", publishDelay)
	}
	next, err := newKey(ks.sealer, alg, time.Time{})
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
		r = Rotation{KeyID: next.ID, Algorithm: alg, ActivatesAt: now}
		var retire []string
		for _, k := range keys { // newest activation first: alg's head before the others
			if k.RetiresAt != nil || (k.Algorithm != alg && (!unoffered || slices.Contains(ks.offered, k.Algorithm))) {
				continue
			}
			if k.Algorithm == alg && k.ActivatesAt.After(now) {
				return fmt.Errorf("%w: %s key %s signs from %s", ErrRotationPending, alg, k.ID, k.ActivatesAt.Format(time.RFC3339))
			}
			r.Retired = append(r.Retired, k.ID)
			if !slices.Contains(retire, k.Algorithm) {
				retire = append(retire, k.Algorithm)
			}
			if k.Algorithm == alg || r.RetiredKeyID == "" {
				r.RetiredKeyID = k.ID
			}
		}
		if len(r.Retired) > 0 {
			r.ActivatesAt = now.Add(publishDelay)
			r.RetiresAt = r.ActivatesAt.Add(MaxSignedTokenLifetime + ClockSkew)
			if _, err := tx.RetireSigningKeys(ctx, r.RetiresAt, retire...); err != nil {
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
		return Rotation{}, fmt.Errorf("oauth: rotate %s signing key: %w", alg, err)
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

// newKey generates a key of alg and returns its row: id "sig_<ulid>", the PKCS #8 DER
// private key sealed by sealer with SigningKeyAAD(id), the public key in PEM.
func newKey(sealer Sealer, alg string, activates time.Time) (store.SigningKey, error) {
	priv, err := generateSigningKey(alg)
	if err != nil {
		return store.SigningKey{}, fmt.Errorf("oauth: generate signing key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return store.SigningKey{}, fmt.Errorf("oauth: generate signing key: %w", err)
	}
	id := store.NewID("sig")
	sealed, err := sealer.Seal(der, store.SigningKeyAAD(id))
	clear(der)
	if err != nil {
		return store.SigningKey{}, fmt.Errorf("oauth: seal signing key: %w", err)
	}
	spki, err := x509.MarshalPKIXPublicKey(priv.Public())
	if err != nil {
		return store.SigningKey{}, fmt.Errorf("oauth: generate signing key: %w", err)
	}
	return store.SigningKey{
		ID: id, Algorithm: alg, PrivateKey: sealed,
		PublicKey:   string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: spki})),
		ActivatesAt: activates,
	}, nil
}

// signsAt reports whether key row k signs at now: from its activation until RetiresAt -
// MaxSignedTokenLifetime - ClockSkew, when the key that replaced it activated (the timeline
// above), so the last token it signed expires before it leaves the JWKS.
func signsAt(k store.SigningKey, now time.Time) bool {
	return !k.ActivatesAt.After(now) && (k.RetiresAt == nil || now.Before(k.RetiresAt.Add(-MaxSignedTokenLifetime-ClockSkew)))
}

// current picks the newest key of alg ("" for any algorithm) that signs at now from keys
// (newest activation first).
func current(keys []publicKey, now time.Time, alg string) (publicKey, bool) {
	for _, k := range keys {
		if (alg == "" || k.row.Algorithm == alg) && signsAt(k.row, now) {
			return k, true
		}
	}
	return publicKey{}, false
}

// hasHead reports whether a key of alg without a scheduled retirement is among keys.
func hasHead(keys []publicKey, alg string) bool {
	for _, k := range keys {
		if k.row.Algorithm == alg && k.row.RetiresAt == nil {
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
