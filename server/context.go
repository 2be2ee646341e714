package server

import (
	"context"
	"encoding/json"
	"io"
)

type ctxKey int

const requestIDKey ctxKey = iota

// withRequestID returns ctx carrying the request id.
func withRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey, id)
}

// RequestID returns the id of the request ctx belongs to, or "" outside a request.
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey).(string)
	return id
}

// jsonEncode writes v as JSON without escaping <, > and &, which JSON bodies do not need.
func jsonEncode(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
