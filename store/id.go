package store

import (
	"crypto/rand"
	"strings"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"
)

// idEntropy makes the IDs of this process strictly increasing: within one
// millisecond the random part of the previous ID is incremented instead of
// drawn afresh (ulid.Monotonic over crypto/rand; ulid's default entropy is
// math/rand, and IDs such as invitation IDs must not be guessable).
var idEntropy = struct {
	sync.Mutex
	*ulid.MonotonicEntropy
}{MonotonicEntropy: ulid.Monotonic(rand.Reader, 0)}

// NewID returns prefix + "_" + a ULID (github.com/oklog/ulid/v2) in lower
// case: 26 Crockford base32 characters, a 48-bit Unix millisecond timestamp
// followed by 80 random bits (crypto/rand). IDs sort by creation time, and
// IDs made by one process within one millisecond are strictly increasing.
// Example: NewID("aud") = "aud_01jd8x3q0f5m6z1v2c4k7r9t0w". NewID panics only
// if crypto/rand fails or 2^80 IDs are asked for in one millisecond.
func NewID(prefix string) string {
	idEntropy.Lock()
	id := ulid.MustNew(ulid.Timestamp(time.Now()), idEntropy.MonotonicEntropy)
	idEntropy.Unlock()
	return prefix + "_" + strings.ToLower(id.String())
}
