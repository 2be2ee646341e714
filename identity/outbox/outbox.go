// Package outbox delivers what must leave the process after a change commits — a mail today, a
// webhook delivery later — with retries, and without losing any of it.
//
// A caller writes a payload with Outbox.Enqueue in the transaction of the change that causes
// it, so the message exists exactly when the change does, and a restart loses nothing queued.
// The payload is JSON sealed with the master key (AES-256-GCM, bound to its row): messages
// carry links with single-use tokens, and a database dump must not. A Worker on each replica
// polls for due rows, claims a few at a time (store.ClaimOutbox: a lease, and on PostgreSQL
// FOR UPDATE SKIP LOCKED, so N replicas deliver each message once), opens the payload and hands
// it to the Handler registered for its kind. A failure is retried with exponential backoff
// until MaxAttempts; a Permanent one is given up at once. Delivered rows keep no payload.
//
// The package knows no payload kind: identity/mail registers the "mail" handler, and a webhook
// delivery handler is a second kind on the same table and worker.
//
// It imports store/ and store/seal only.
package outbox

import (
	"context"
	"errors"
	"fmt"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/seal"
)

// Handler delivers one payload of its kind (the JSON that was enqueued). A nil error means
// delivered; an error is retried later unless it is Permanent. ctx carries the attempt's
// timeout. A handler must be safe for concurrent use (several workers may run in one process).
type Handler func(ctx context.Context, payload []byte) error

// permanentError marks a failure that retrying cannot fix.
type permanentError struct{ err error }

func (e permanentError) Error() string { return e.err.Error() }
func (e permanentError) Unwrap() error { return e.err }

// Permanent marks err as a failure that retrying cannot fix (a recipient the mail server
// refuses for good, a payload that does not decode): the worker gives the message up at once.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanentError{err}
}

// IsPermanent reports whether err was marked with Permanent.
func IsPermanent(err error) bool {
	var p permanentError
	return errors.As(err, &p)
}

// Outbox writes payloads to the outbox table, sealed under the master key.
type Outbox struct {
	ring *seal.Keyring
}

// New returns an Outbox that seals payloads with ring (the master key; the Worker opens them
// with the same ring).
func New(ring *seal.Keyring) *Outbox {
	if ring == nil {
		panic("outbox: new: a keyring is required")
	}
	return &Outbox{ring: ring}
}

// Enqueue writes payload as a message of kind in tx, due at once, and returns its id. It is
// delivered only if tx commits.
func (o *Outbox) Enqueue(ctx context.Context, tx *store.Tx, kind string, payload []byte) (string, error) {
	return o.EnqueueOrdered(ctx, tx, kind, "", payload)
}

// EnqueueOrdered is Enqueue with a partition key: the worker attempts the messages of one key
// one after the other, oldest first (a webhook endpoint's deliveries).
func (o *Outbox) EnqueueOrdered(ctx context.Context, tx *store.Tx, kind, partitionKey string, payload []byte) (string, error) {
	id := store.NewOutboxID()
	sealed, err := o.ring.Seal(payload, store.OutboxPayloadAAD(id, kind))
	if err != nil {
		return "", fmt.Errorf("outbox: enqueue %s: %w", kind, err)
	}
	if err := tx.EnqueueOutbox(ctx, &store.OutboxMessage{ID: id, Kind: kind, Payload: sealed, PartitionKey: partitionKey}); err != nil {
		return "", err
	}
	return id, nil
}
