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

// NewIDs returns n IDs made as NewID(prefix) makes them, strictly increasing
// and after every ID made before, for a batch that needs one each: one lock,
// one clock reading and one allocation for the text of all of them, lowered as it is written
// (strings.ToLower of the whole text was a second copy, about a third of the call's time in a
// pinned batch of 100). (It reads the monotonic entropy itself: ulid.New hands each ULID's
// random part to an io.Reader, which moved every ULID to the heap, an allocation per ID.)
func NewIDs(prefix string, n int) []string {
	size := len(prefix) + 1 + ulid.EncodedSize
	var text strings.Builder
	text.Grow(n * size)
	var random [10]byte
	var encoded [ulid.EncodedSize]byte
	idEntropy.Lock()
	ms := ulid.Timestamp(time.Now())
	for range n {
		if err := idEntropy.MonotonicRead(ms, random[:]); err != nil {
			idEntropy.Unlock()
			panic(err)
		}
		var id ulid.ULID
		if err := id.SetTime(ms); err != nil {
			idEntropy.Unlock()
			panic(err)
		}
		copy(id[6:], random[:])
		_ = id.MarshalTextTo(encoded[:])
		for i, c := range encoded {
			if 'A' <= c && c <= 'Z' {
				encoded[i] = c + ('a' - 'A')
			}
		}
		text.WriteString(prefix)
		text.WriteByte('_')
		text.Write(encoded[:])
	}
	idEntropy.Unlock()
	all := text.String()
	out := make([]string, n)
	for i := range out {
		out[i] = all[i*size : (i+1)*size]
	}
	return out
}
