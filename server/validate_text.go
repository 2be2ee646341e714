package server

import (
	"bytes"
	"io"
	"maps"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/routers"

	"github.com/gatehouse-dev/gatehouse/store"
)

// Text rule: every string the service accepts is UTF-8 text without NUL (store.ValidText), the
// one kind of string both databases store alike. Path, query and header parameters, url-encoded
// form fields and every string of a JSON body (member names included, at any depth, free-form
// JSON too) are checked at validation, before any query; a string that breaks the rule is a
// 400 naming its field. Only a JSON body whose schema says x-arbitrary-text: true is exempt (the
// processor webhook's event: Stripe's document, verified by its signature, not the caller's
// fields). The protocol routes are not validated; store.OIDCClientByID answers a client id that
// is not text as unknown without a query.
const (
	textMessage      = "must be valid UTF-8 without NUL characters"
	textNamesMessage = "must have member names that are valid UTF-8 without NUL characters"
)

// paramTextErrors names each path parameter, and each declared query or header parameter,
// whose value is not text.
func paramTextErrors(req *http.Request, route *routers.Route, params map[string]string) []FieldError {
	var out []FieldError
	for _, name := range slices.Sorted(maps.Keys(params)) {
		if !store.ValidText(params[name]) {
			out = append(out, FieldError{Path: []string{"path", name}, Message: textMessage})
		}
	}
	query := req.URL.Query()
	seen := map[string]bool{}
	for _, ps := range []openapi3.Parameters{route.Operation.Parameters, route.PathItem.Parameters} {
		for _, ref := range ps {
			p := ref.Value
			if p == nil || seen[p.In+" "+p.Name] {
				continue
			}
			seen[p.In+" "+p.Name] = true
			var values []string
			switch p.In {
			case openapi3.ParameterInQuery:
				values = query[p.Name]
			case openapi3.ParameterInHeader:
				values = req.Header.Values(p.Name)
			}
			if slices.ContainsFunc(values, func(v string) bool { return !store.ValidText(v) }) {
				out = append(out, FieldError{Path: []string{p.In, p.Name}, Message: textMessage})
			}
		}
	}
	return out
}

// formTextErrors names each field of a url-encoded form body whose value is not text. The
// body stays readable; a body that does not parse is left to kin-openapi.
func formTextErrors(req *http.Request) ([]FieldError, error) {
	mt, _, _ := mime.ParseMediaType(req.Header.Get("Content-Type"))
	if mt != "application/x-www-form-urlencoded" || req.Body == nil || req.Body == http.NoBody {
		return nil, nil
	}
	raw, err := readBody(req)
	if err != nil {
		return nil, err
	}
	req.Body = io.NopCloser(bytes.NewReader(raw))
	form, err := url.ParseQuery(string(raw))
	if err != nil {
		return nil, nil
	}
	var out []FieldError
	badName := false
	for _, name := range slices.Sorted(maps.Keys(form)) {
		switch {
		case !store.ValidText(name):
			badName = true
		case slices.ContainsFunc(form[name], func(v string) bool { return !store.ValidText(v) }):
			out = append(out, FieldError{Path: []string{"body", name}, Message: textMessage})
		}
	}
	if badName {
		out = append(out, FieldError{Path: []string{"body"}, Message: textNamesMessage})
	}
	return out, nil
}

// jsonTextErrors names each string of a decoded JSON value v at base that is not text, and
// each object with a member name that is not. Decoded JSON holds a NUL only where its document
// has the escape \u0000 (markNonText writes one for every other non-text), so callers walk only
// such documents.
func jsonTextErrors(v any, base []string) []FieldError {
	var out []FieldError
	path := slices.Clone(base)
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			if !store.ValidText(v) {
				out = append(out, FieldError{Path: slices.Clone(path), Message: textMessage})
			}
		case []any:
			for i, x := range v {
				path = append(path, strconv.Itoa(i))
				walk(x)
				path = path[:len(path)-1]
			}
		case map[string]any:
			badName := false
			for k, x := range v {
				if !store.ValidText(k) {
					badName = true
					continue
				}
				path = append(path, k)
				walk(x)
				path = path[:len(path)-1]
			}
			if badName {
				out = append(out, FieldError{Path: slices.Clone(path), Message: textNamesMessage})
			}
		}
	}
	walk(v)
	return out
}

// markNonText returns a JSON document whose decoding has a NUL wherever raw's decoding would
// silently hold U+FFFD instead of what was sent: each byte that is not valid UTF-8 and each
// \u escape of an unpaired surrogate becomes the escape \u0000. raw must be valid JSON, where
// such bytes and escapes occur only inside strings. ok is false when raw has none.
func markNonText(raw []byte) (marked []byte, ok bool) {
	if utf8.Valid(raw) && !bytes.Contains(raw, []byte(`\u`)) {
		return nil, false
	}
	const nul = `\u0000`
	out := make([]byte, 0, len(raw))
	for i := 0; i < len(raw); {
		c := raw[i]
		switch {
		case c == '\\' && raw[i+1] == 'u':
			r := hexRune(raw[i+2 : i+6])
			switch {
			case !utf16.IsSurrogate(r):
				out = append(out, raw[i:i+6]...)
			case r < 0xdc00 && i+12 <= len(raw) && raw[i+6] == '\\' && raw[i+7] == 'u' &&
				hexRune(raw[i+8:i+12]) >= 0xdc00 && hexRune(raw[i+8:i+12]) <= 0xdfff:
				out = append(out, raw[i:i+12]...) // a surrogate pair
				i += 6
			default:
				out, ok = append(out, nul...), true
			}
			i += 6
		case c == '\\':
			out = append(out, raw[i:i+2]...) // another escape, \\ included
			i += 2
		case c < utf8.RuneSelf:
			out = append(out, c)
			i++
		default:
			r, n := utf8.DecodeRune(raw[i:])
			if r == utf8.RuneError && n == 1 {
				out, ok = append(out, nul...), true
			} else {
				out = append(out, raw[i:i+n]...)
			}
			i += n
		}
	}
	return out, ok
}

// hexRune decodes the four hex digits of a \u escape.
func hexRune(h []byte) rune {
	n, _ := strconv.ParseUint(string(h), 16, 32)
	return rune(n)
}

// preferText returns text errors followed by the other errors at paths text errors do not name:
// a field that is not text gets that one message.
func preferText(text, other []FieldError) []FieldError {
	if len(text) == 0 {
		return other
	}
	out := slices.Clone(text)
	for _, e := range other {
		if !slices.ContainsFunc(text, func(t FieldError) bool { return slices.Equal(t.Path, e.Path) }) {
			out = append(out, e)
		}
	}
	return out
}
