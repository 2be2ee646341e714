package identity

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/pquerna/otp"
	"github.com/pquerna/otp/totp"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/seal"
)

// Second factors, as better-auth's twoFactor plugin has them: a TOTP secret (RFC 6238: SHA-1,
// six digits, 30-second steps, one step of clock skew either way) turned on by the first code
// it accepts, ten single-use backup codes, a short-lived pending sign-in between the password
// and the code (the two_factor cookie), and trusted devices that skip the second step (the
// trust_device cookie).
const (
	TOTPPeriod = 30 * time.Second
	TOTPDigits = 6
	// TOTPSkew is how many steps before and after the current one a code may belong to.
	TOTPSkew = 1
	// BackupCodeCount is how many backup codes an enrolment (or a regeneration) makes.
	BackupCodeCount = 10
	// TwoFactorSignInLifetime is how long a pending sign-in (the two_factor cookie) lasts:
	// better-auth's twoFactorCookieMaxAge.
	TwoFactorSignInLifetime = 10 * time.Minute
	// TwoFactorSignInAttempts is how many wrong codes one pending sign-in takes; the next
	// attempt ends it (better-auth's TOO_MANY_ATTEMPTS_REQUEST_NEW_CODE).
	TwoFactorSignInAttempts = 5
	// TrustDeviceLifetime is how long a trusted device skips the second step (better-auth's
	// trustDeviceMaxAge); each sign-in that uses it renews it.
	TrustDeviceLifetime = 30 * 24 * time.Hour
)

// Cookie names of the second step: better-auth's "<prefix>.two_factor" and
// "<prefix>.trust_device", with the __Host- prefix under https like the session cookie.
const (
	twoFactorCookieName   = "gatehouse.two_factor"
	trustDeviceCookieName = "gatehouse.trust_device"
)

// Errors of the second factor.
var (
	// ErrWrongCode is a TOTP or backup code that does not match, or one used before.
	ErrWrongCode = errors.New("identity: wrong second-factor code")
	// ErrNoPendingSignIn is a request without a valid, unexpired two_factor cookie.
	ErrNoPendingSignIn = errors.New("identity: no pending two-factor sign-in")
	// ErrNoTwoFactor is a user without a TOTP enrolment.
	ErrNoTwoFactor = errors.New("identity: two factor not enrolled")
)

// TwoFactors keeps users' second factors in the store: TOTP secrets sealed under the keyring,
// backup codes as HMACs, and the tokens of the second step hashed. Build one with
// NewTwoFactors; it is safe for concurrent use.
type TwoFactors struct {
	store *store.Store
	ring  *seal.Keyring
	// cookieKey signs the second step's cookies, derived from the master key for this purpose
	// alone, so that neither cookie can pass for a session cookie or the other way round.
	cookieKey []byte
	secure    bool
}

// NewTwoFactors returns the second factors of st, sealing secrets with ring and deriving its
// keys from master; secure (an https base URL) names the cookies __Host- and marks them Secure.
func NewTwoFactors(st *store.Store, ring *seal.Keyring, master []byte, secure bool) *TwoFactors {
	return &TwoFactors{store: st, ring: ring, secure: secure,
		cookieKey: seal.DeriveKey(master, "two-factor-cookie")}
}

// Enrolment is what an enrolment hands the user once: the otpauth URI of the new secret and
// the backup codes in the clear.
type Enrolment struct {
	URI         string
	BackupCodes []string
}

// Enroll gives user a new TOTP secret and new backup codes in tx. A new enrolment stays off
// until its first code is accepted (CheckTOTP); a user whose factor was on keeps it on, under
// the new secret. issuer names the account in authenticator apps.
func (f *TwoFactors) Enroll(ctx context.Context, tx *store.Tx, user store.User, issuer string) (Enrolment, error) {
	key, err := totp.Generate(totp.GenerateOpts{Issuer: issuer, AccountName: user.Email, Period: uint(TOTPPeriod / time.Second),
		Digits: otp.DigitsSix, Algorithm: otp.AlgorithmSHA1, SecretSize: 20})
	if err != nil {
		return Enrolment{}, fmt.Errorf("identity: enroll two factor: %w", err)
	}
	sealed, err := f.ring.Seal([]byte(key.Secret()), store.TwoFactorSecretAAD(user.ID))
	if err != nil {
		return Enrolment{}, fmt.Errorf("identity: enroll two factor: %w", err)
	}
	codes, hashes, err := newBackupCodes(user.ID)
	if err != nil {
		return Enrolment{}, err
	}
	if err := tx.PutTwoFactor(ctx, user.ID, sealed, hashes); err != nil {
		return Enrolment{}, fmt.Errorf("identity: enroll two factor: %w", err)
	}
	return Enrolment{URI: key.URL(), BackupCodes: codes}, nil
}

// URI returns the otpauth URI of user's TOTP secret, or ErrNoTwoFactor.
func (f *TwoFactors) URI(ctx context.Context, user store.User, issuer string) (string, error) {
	_, secret, err := f.secret(ctx, user.ID)
	if err != nil {
		return "", err
	}
	raw, err := base32.StdEncoding.WithPadding(base32.NoPadding).DecodeString(secret)
	if err != nil {
		return "", fmt.Errorf("identity: totp uri: user %s: %w", user.ID, err)
	}
	key, err := totp.Generate(totp.GenerateOpts{Issuer: issuer, AccountName: user.Email, Period: uint(TOTPPeriod / time.Second),
		Digits: otp.DigitsSix, Algorithm: otp.AlgorithmSHA1, Secret: raw})
	if err != nil {
		return "", fmt.Errorf("identity: totp uri: %w", err)
	}
	return key.URL(), nil
}

// TwoFactorReader reads enrolments; *store.Store implements it.
type TwoFactorReader interface {
	TwoFactorByUser(ctx context.Context, userID string) (store.TwoFactor, error)
}

// TwoFactorOn reports whether userID's second factor is on (enrolled and verified), read from r
// (the caller's store).
func TwoFactorOn(ctx context.Context, r TwoFactorReader, userID string) (bool, error) {
	tf, err := r.TwoFactorByUser(ctx, userID)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	return err == nil && tf.Verified, err
}

// SecondFactorReader reads what HasSecondFactor needs.
type SecondFactorReader interface {
	TwoFactorReader
	PasskeysOf(ctx context.Context, userID string) ([]store.Passkey, error)
}

// HasSecondFactor reports whether userID can satisfy a second-factor requirement: a TOTP
// factor that is on, or a registered passkey (a passkey sign-in is multi-factor).
func HasSecondFactor(ctx context.Context, r SecondFactorReader, userID string) (bool, error) {
	if on, err := TwoFactorOn(ctx, r, userID); err != nil || on {
		return on, err
	}
	pks, err := r.PasskeysOf(ctx, userID)
	return len(pks) > 0, err
}

// Enrolled returns userID's enrolment, or ErrNoTwoFactor.
func (f *TwoFactors) Enrolled(ctx context.Context, userID string) (store.TwoFactor, error) {
	tf, err := f.store.TwoFactorByUser(ctx, userID)
	if errors.Is(err, store.ErrNotFound) {
		return store.TwoFactor{}, ErrNoTwoFactor
	}
	return tf, err
}

// secret reads userID's enrolment and opens its secret.
func (f *TwoFactors) secret(ctx context.Context, userID string) (store.TwoFactor, string, error) {
	tf, err := f.Enrolled(ctx, userID)
	if err != nil {
		return tf, "", err
	}
	plain, err := f.ring.Open(tf.Secret, store.TwoFactorSecretAAD(userID))
	if err != nil {
		return tf, "", fmt.Errorf("identity: open totp secret: user %s: %w", userID, err)
	}
	return tf, string(plain), nil
}

// CheckTOTP accepts code for userID in tx when it is the code of a time step within TOTPSkew of
// now that is later than every step accepted before, and records that step, so that an accepted
// code cannot be used again (nor an earlier one). It turns an unverified enrolment on and
// reports whether it did. A code that does not match, or was used, is ErrWrongCode; a user
// without an enrolment is ErrNoTwoFactor.
func (f *TwoFactors) CheckTOTP(ctx context.Context, tx *store.Tx, userID, code string) (turnedOn bool, err error) {
	tf, secret, err := f.secret(ctx, userID)
	if err != nil {
		return false, err
	}
	step, ok := matchTOTP(secret, strings.TrimSpace(code), f.store.Now())
	if !ok {
		return false, ErrWrongCode
	}
	if err := tx.UseTOTPStep(ctx, userID, step); errors.Is(err, store.ErrNotFound) {
		return false, ErrWrongCode
	} else if err != nil {
		return false, err
	}
	if !tf.Verified {
		if err := tx.VerifyTwoFactor(ctx, userID); err != nil {
			return false, err
		}
	}
	return !tf.Verified, nil
}

// matchTOTP returns the time step within TOTPSkew of now whose code is code, comparing every
// candidate in constant time.
func matchTOTP(secret, code string, now time.Time) (int64, bool) {
	if len(code) != TOTPDigits {
		return 0, false
	}
	period := int64(TOTPPeriod / time.Second)
	current := now.Unix() / period
	var found int64
	ok := false
	for step := current - TOTPSkew; step <= current+TOTPSkew; step++ {
		want, err := totp.GenerateCodeCustom(secret, time.Unix(step*period, 0), totp.ValidateOpts{
			Period: uint(period), Digits: otp.DigitsSix, Algorithm: otp.AlgorithmSHA1})
		if err != nil {
			return 0, false
		}
		if subtle.ConstantTimeCompare([]byte(want), []byte(code)) == 1 {
			found, ok = step, true
		}
	}
	return found, ok
}

// UseBackupCode spends userID's unused backup code code in tx, or returns ErrWrongCode.
func (f *TwoFactors) UseBackupCode(ctx context.Context, tx *store.Tx, userID, code string) error {
	err := tx.UseBackupCode(ctx, userID, HashBackupCode(userID, strings.TrimSpace(code)))
	if errors.Is(err, store.ErrNotFound) {
		return ErrWrongCode
	}
	return err
}

// RegenerateBackupCodes replaces userID's backup codes with BackupCodeCount new ones in tx and
// returns them in the clear.
func (f *TwoFactors) RegenerateBackupCodes(ctx context.Context, tx *store.Tx, userID string) ([]string, error) {
	codes, hashes, err := newBackupCodes(userID)
	if err != nil {
		return nil, err
	}
	if err := tx.ReplaceBackupCodes(ctx, userID, hashes); err != nil {
		return nil, err
	}
	return codes, nil
}

// newBackupCodes makes BackupCodeCount codes of userID in better-auth's form, ten base62
// characters as "xxxxx-xxxxx" (about 59 bits each), and their hashes.
func newBackupCodes(userID string) (codes, hashes []string, err error) {
	for range BackupCodeCount {
		raw, err := RandomBase62(10)
		if err != nil {
			return nil, nil, err
		}
		c := raw[:5] + "-" + raw[5:]
		codes, hashes = append(codes, c), append(hashes, HashBackupCode(userID, c))
	}
	return codes, hashes, nil
}

// HashBackupCode is the stored form of userID's backup code: the hex SHA-256 of the user id
// and the code. A code is 59 random bits, so a plain hash makes a leaked table useless (every
// guess is bound to one user), and unlike a keyed hash it survives a master-key rotation: the
// codes users keep on paper go on working.
func HashBackupCode(userID, code string) string {
	sum := sha256.Sum256([]byte("gatehouse/backup-code/" + userID + "/" + code))
	return hex.EncodeToString(sum[:])
}

// TwoFactorCookieName is the pending sign-in cookie's name.
func (f *TwoFactors) TwoFactorCookieName() string { return f.cookieName(twoFactorCookieName) }

// TrustDeviceCookieName is the trusted-device cookie's name.
func (f *TwoFactors) TrustDeviceCookieName() string { return f.cookieName(trustDeviceCookieName) }

func (f *TwoFactors) cookieName(name string) string {
	if f.secure {
		return hostCookiePrefix + name
	}
	return name
}

// StartSignIn records a pending sign-in of userID in tx (TwoFactorSignInLifetime,
// TwoFactorSignInAttempts wrong codes) and returns its cookie: HttpOnly, SameSite=Lax, signed
// with a key of its own, Max-Age its lifetime.
func (f *TwoFactors) StartSignIn(ctx context.Context, tx *store.Tx, userID string, remember bool) (*http.Cookie, error) {
	return f.issue(ctx, tx, store.TwoFactorSignIn, userID, remember, TwoFactorSignInLifetime, f.TwoFactorCookieName())
}

// TrustDevice records a trusted device of userID in tx and returns its cookie (TrustDeviceLifetime).
func (f *TwoFactors) TrustDevice(ctx context.Context, tx *store.Tx, userID string) (*http.Cookie, error) {
	return f.issue(ctx, tx, store.TwoFactorTrustDevice, userID, true, TrustDeviceLifetime, f.TrustDeviceCookieName())
}

func (f *TwoFactors) issue(ctx context.Context, tx *store.Tx, purpose, userID string, remember bool, life time.Duration, name string) (*http.Cookie, error) {
	token, err := NewSessionToken()
	if err != nil {
		return nil, err
	}
	err = tx.CreateTwoFactorToken(ctx, HashToken(token), store.TwoFactorToken{Purpose: purpose, UserID: userID,
		RememberMe: remember, ExpiresAt: f.store.Now().Add(life)})
	if err != nil {
		return nil, fmt.Errorf("identity: %s token: %w", purpose, err)
	}
	return SessionCookie(name, CookieValue(f.cookieKey, token), life, f.secure), nil
}

// PendingSignIn returns the token hash and the pending sign-in of r's two_factor cookie, or
// ErrNoPendingSignIn (no cookie, a bad signature, an unknown, used or expired token).
func (f *TwoFactors) PendingSignIn(r *http.Request) (string, store.TwoFactorToken, error) {
	return f.fromCookie(r, store.TwoFactorSignIn, f.TwoFactorCookieName())
}

// TrustedDevice returns the token hash and record of r's trust_device cookie, or
// ErrNoPendingSignIn when it has none that is valid.
func (f *TwoFactors) TrustedDevice(r *http.Request) (string, store.TwoFactorToken, error) {
	return f.fromCookie(r, store.TwoFactorTrustDevice, f.TrustDeviceCookieName())
}

// HasCookie reports whether r carries a pending sign-in cookie, valid or not (the CSRF check
// treats such a request like a cookie-authenticated one).
func (f *TwoFactors) HasCookie(r *http.Request) bool {
	_, err := r.Cookie(f.TwoFactorCookieName())
	return err == nil
}

func (f *TwoFactors) fromCookie(r *http.Request, purpose, name string) (string, store.TwoFactorToken, error) {
	ck, err := r.Cookie(name)
	if err != nil || ck.Value == "" {
		return "", store.TwoFactorToken{}, ErrNoPendingSignIn
	}
	token, ok := VerifySignedToken(f.cookieKey, ck.Value)
	if !ok {
		return "", store.TwoFactorToken{}, ErrNoPendingSignIn
	}
	hash := HashToken(token)
	t, err := f.store.TwoFactorTokenByHash(r.Context(), purpose, hash)
	if errors.Is(err, store.ErrNotFound) {
		return "", store.TwoFactorToken{}, ErrNoPendingSignIn
	}
	if err != nil {
		return "", store.TwoFactorToken{}, err
	}
	return hash, t, nil
}

// ExpiredTwoFactorCookie deletes the pending sign-in cookie.
func (f *TwoFactors) ExpiredTwoFactorCookie() *http.Cookie {
	return ExpiredCookie(f.TwoFactorCookieName(), f.secure)
}

// ExpiredTrustDeviceCookie deletes the trusted-device cookie.
func (f *TwoFactors) ExpiredTrustDeviceCookie() *http.Cookie {
	return ExpiredCookie(f.TrustDeviceCookieName(), f.secure)
}
