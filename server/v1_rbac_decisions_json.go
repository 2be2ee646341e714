package server

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
)

// decisionsAnswer is the 200 answer of POST /authorize and POST /authorize/batch, written
// straight from the store's results without reflection and without the generated types'
// intermediate values (nullable.Nullable is a map per expiry): on a 100-check batch, encoding
// through encoding/json and building those values was about a tenth of the request. The bytes
// are exactly those the generated Visit methods write for the same answer (json.Encoder with
// HTML escaping, fields in the generated structs' order, a final newline), which
// TestDecisionsAnswerMatchesGenerated checks against them: {"data":{decision}} for one
// decision (single), {"data":{"results":[decision, …]}} for a batch. A decision is
// gen.AuthorizationDecision's members allowed, decisionId, explanation (only when explain is
// set), roles; the explanation is gen.DecisionExplanation's (see decisionBody).
type decisionsAnswer struct {
	single  bool
	explain bool
	results []store.CheckResult
	ids     []string // the decision ids, one per result
}

// VisitAuthorizeResponse implements gen.AuthorizeResponseObject.
func (a decisionsAnswer) VisitAuthorizeResponse(w http.ResponseWriter) error { return a.write(w) }

// VisitAuthorizeBatchResponse implements gen.AuthorizeBatchResponseObject.
func (a decisionsAnswer) VisitAuthorizeBatchResponse(w http.ResponseWriter) error {
	return a.write(w)
}

func (a decisionsAnswer) write(w http.ResponseWriter) error {
	b, err := a.appendJSON(make([]byte, 0, a.sizeHint()))
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	// Declared, so that net/http sends a batch's answer (past its 2 KB buffer) in one piece
	// rather than chunked, which took an extra write to the connection for the last chunk.
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	_, err = w.Write(b)
	return err
}

// sizeHint is a capacity that usually holds the whole answer: each decision's member names and
// punctuation (45 bytes), its id and its roles counted, an explanation estimated.
func (a decisionsAnswer) sizeHint() int {
	n := 32
	for i := range a.results {
		n += 48 + len(a.ids[i])
		for _, r := range a.results[i].Roles {
			n += len(r) + 3
		}
		if a.explain {
			n += 384
		}
	}
	return n
}

// appendJSON appends the answer's JSON text, newline included. Its error is encoding/json's
// for an expiry it cannot encode (a year outside 0–9999), which no stored binding has.
func (a decisionsAnswer) appendJSON(b []byte) ([]byte, error) {
	var err error
	b = append(b, `{"data":`...)
	if a.single {
		if b, err = a.appendDecision(b, 0); err != nil {
			return nil, err
		}
		return append(b, "}\n"...), nil
	}
	b = append(b, `{"results":`...)
	if a.results == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range a.results {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = a.appendDecision(b, i); err != nil {
				return nil, err
			}
		}
		b = append(b, ']')
	}
	return append(b, "}}\n"...), nil
}

// appendDecision appends result i as gen.AuthorizationDecision.
func (a decisionsAnswer) appendDecision(b []byte, i int) ([]byte, error) {
	r := &a.results[i]
	b = append(b, `{"allowed":`...)
	b = strconv.AppendBool(b, r.Allowed)
	b = append(b, `,"decisionId":`...)
	b = appendJSONString(b, a.ids[i])
	if a.explain {
		var err error
		b = append(b, `,"explanation":`...)
		if b, err = appendExplanation(b, r); err != nil {
			return nil, err
		}
	}
	b = append(b, `,"roles":`...)
	b = appendJSONStrings(b, r.Roles)
	return append(b, '}'), nil
}

// appendExplanation appends r's explanation as gen.DecisionExplanation: grantedBy when
// allowed; considered and reason when denied (members in that order, as generated).
func appendExplanation(b []byte, r *store.CheckResult) ([]byte, error) {
	var err error
	if r.Allowed {
		b = append(b, `{"grantedBy":[`...)
		first := true
		for _, g := range r.Bindings {
			if g.Expired || g.Matched == "" { // not granting (store.CheckResult.GrantedBy)
				continue
			}
			if !first {
				b = append(b, ',')
			}
			first = false
			b = append(b, `{"bindingId":`...)
			b = appendJSONString(b, g.BindingID)
			b = append(b, `,"expiresAt":`...)
			if b, err = appendJSONTime(b, g.ExpiresAt); err != nil {
				return nil, err
			}
			b = append(b, `,"matched":`...)
			b = appendJSONString(b, g.Matched)
			b = append(b, `,"roleId":`...)
			b = appendJSONString(b, g.RoleID)
			b = append(b, `,"roleSlug":`...)
			b = appendJSONString(b, g.RoleSlug)
			b = append(b, '}')
		}
		return append(b, "]}"...), nil
	}
	b = append(b, `{"considered":[`...)
	for j, c := range r.Bindings {
		if j > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"bindingId":`...)
		b = appendJSONString(b, c.BindingID)
		b = append(b, `,"expired":`...)
		b = strconv.AppendBool(b, c.Expired)
		b = append(b, `,"expiresAt":`...)
		if b, err = appendJSONTime(b, c.ExpiresAt); err != nil {
			return nil, err
		}
		b = append(b, `,"roleSlug":`...)
		b = appendJSONString(b, c.RoleSlug)
		b = append(b, '}')
	}
	b = append(b, `],"reason":`...)
	b = appendJSONString(b, string(r.DenialReason()))
	return append(b, '}'), nil
}

// appendJSONStrings appends ss as a JSON array of strings, or null for a nil slice (as
// encoding/json does).
func appendJSONStrings(b []byte, ss []string) []byte {
	if ss == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, s)
	}
	return append(b, ']')
}

// appendJSONString appends s as encoding/json writes it with HTML escaping: text of printable
// ASCII other than " \ < > & is copied between quotes; anything else is left to encoding/json
// (escapes, invalid UTF-8, U+2028 and U+2029).
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			quoted, err := json.Marshal(s)
			if err != nil { // not reached: encoding/json encodes every string
				return append(b, `""`...)
			}
			return append(b, quoted...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// appendJSONTime appends t as nullable.Nullable[time.Time] encodes it: null for nil, else
// time.Time's JSON text, RFC 3339 with nanoseconds between quotes (MarshalJSON's text, by
// AppendText, which formats it the same way without allocating; its error, for a time RFC 3339
// cannot represent, is returned).
func appendJSONTime(b []byte, t *time.Time) ([]byte, error) {
	if t == nil {
		return append(b, "null"...), nil
	}
	b = append(b, '"')
	b, err := t.AppendText(b)
	if err != nil {
		return nil, err
	}
	return append(b, '"'), nil
}
