package server

import (
	"bytes"
	"io"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/gatehouse-dev/gatehouse/gen"
)

// typedBodies are the operations whose validated JSON body is bound from its bytes
// (bindDecisionBytes) rather than from a decoded tree, so that validating it never builds one
// (validate_stream.go): the two authorization decision bodies, whose 1 to 100 checks are the
// API's hottest input.
var typedBodies = map[string]bool{"authorize": true, "authorizeBatch": true}

// bindDecisionBytes binds raw, a body of a typedBodies operation that its streamed check
// accepted, into i (*gen.AuthorizeRequest or *gen.AuthorizeBatchRequest) as
// runtime.BindJSONValue binds its decoded value: member names matched exactly, an absent or null
// explain left nil. It is false, i untouched, for any other destination and for anything that
// does not have the body's shape (a member it does not know included).
//
// Written by hand over jsontext's tokens: decoding by reflection (encoding/json or its v2) would
// cost what building the tree cost, and these two bodies are the only ones bound this way.
func bindDecisionBytes(raw []byte, i any) bool {
	dec := streamDecoders.Get().(*jsontext.Decoder)
	defer func() {
		dec.Reset(noInput)
		streamDecoders.Put(dec)
	}()
	// The streamed check refused any repeated member name before this runs, so the decoder
	// need not track the names again (a set per object: a fifth of the bind's time in an
	// in-process profile of a batch of 100).
	dec.Reset(bytes.NewBuffer(raw), namesChecked)
	r := tokenReader{dec: dec, text: string(raw)}
	switch dst := i.(type) {
	case *gen.AuthorizeBatchRequest:
		var out gen.AuthorizeBatchRequest
		r.object(func(name []byte) bool {
			switch string(name) {
			case "projectId":
				out.ProjectId = r.string()
			case "explain":
				out.Explain = r.optionalBool()
			case "checks":
				out.Checks = make([]gen.AuthorizeCheck, 0, checksCapacity(len(raw)))
				r.array(func() {
					var c gen.AuthorizeCheck
					r.object(func(name []byte) bool { return r.checkMember(name, &c) })
					out.Checks = append(out.Checks, c)
				})
			default:
				return false
			}
			return true
		})
		if !r.end() || out.Checks == nil {
			return false
		}
		*dst = out
		return true
	case *gen.AuthorizeRequest:
		var out gen.AuthorizeRequest
		var c gen.AuthorizeCheck
		r.object(func(name []byte) bool {
			switch string(name) {
			case "projectId":
				out.ProjectId = r.string()
			case "explain":
				out.Explain = r.optionalBool()
			default:
				return r.checkMember(name, &c)
			}
			return true
		})
		if !r.end() {
			return false
		}
		out.PrincipalType, out.PrincipalId, out.Permission = c.PrincipalType, c.PrincipalId, c.Permission
		*dst = out
		return true
	}
	return false
}

// checksCapacity is the capacity for the checks of a batch body of n bytes: about one a 64
// bytes (a check with short ids is 60 to 90), at most 128 (the spec allows 100), so that a
// batch's checks are rarely copied while they are read.
func checksCapacity(n int) int {
	return min(n/64+1, 128)
}

// namesChecked configures bindDecisionBytes' decoder for a document whose member names have been
// checked for repeats already.
var namesChecked = jsontext.AllowDuplicateNames(true)

// checkMember reads the member name of a check (the principal and the permission, members of
// both decision bodies) into c; false for another name.
func (r *tokenReader) checkMember(name []byte, c *gen.AuthorizeCheck) bool {
	switch string(name) {
	case "principalType":
		c.PrincipalType = gen.PrincipalType(r.string())
	case "principalId":
		c.PrincipalId = r.string()
	case "permission":
		c.Permission = r.string()
	default:
		return false
	}
	return true
}

// tokenReader reads typed values from a jsontext decoder, remembering the first failure (a
// token of another kind than asked, a syntax error, a member refused): after it every read
// returns zero values, and end reports false.
type tokenReader struct {
	dec *jsontext.Decoder
	// text is the decoder's input, whose substrings are the strings read (one copy of the
	// body instead of one allocation a string).
	text   string
	failed bool
}

// object reads an object, calling member with each member's name, positioned at its value,
// which member must read whole; member returns false to refuse a name.
func (r *tokenReader) object(member func(name []byte) bool) {
	if !r.open('{') {
		return
	}
	for !r.failed && r.dec.PeekKind() == '"' {
		raw, err := r.dec.ReadValue()
		if err != nil || bytes.IndexByte(raw, '\\') >= 0 {
			r.failed = true // an escaped name is no name bound here
			return
		}
		if !member(raw[1 : len(raw)-1]) {
			r.failed = true
		}
	}
	r.close('}')
}

// array reads an array, calling element for each element, which element must read whole.
func (r *tokenReader) array(element func()) {
	if !r.open('[') {
		return
	}
	for !r.failed && r.dec.PeekKind() != ']' && r.dec.PeekKind() != 0 {
		element()
	}
	r.close(']')
}

func (r *tokenReader) open(kind jsontext.Kind) bool {
	if r.failed || r.dec.PeekKind() != kind {
		r.failed = true
		return false
	}
	if _, err := r.dec.ReadToken(); err != nil {
		r.failed = true
	}
	return !r.failed
}

func (r *tokenReader) close(kind jsontext.Kind) {
	if r.failed {
		return
	}
	if tok, err := r.dec.ReadToken(); err != nil || tok.Kind() != kind {
		r.failed = true
	}
}

// string reads a string: a substring of text when it has no escape.
func (r *tokenReader) string() string {
	if r.failed || r.dec.PeekKind() != '"' {
		r.failed = true
		return ""
	}
	raw, err := r.dec.ReadValue()
	if err != nil {
		r.failed = true
		return ""
	}
	if bytes.IndexByte(raw, '\\') < 0 {
		end := int(r.dec.InputOffset())
		return r.text[end-len(raw)+1 : end-1]
	}
	s, err := jsontext.AppendUnquote(nil, raw)
	if err != nil {
		r.failed = true
	}
	return string(s)
}

// optionalBool reads a boolean, or null as nil.
func (r *tokenReader) optionalBool() *bool {
	if r.failed {
		return nil
	}
	tok, err := r.dec.ReadToken()
	switch {
	case err != nil:
		r.failed = true
	case tok.Kind() == 't' || tok.Kind() == 'f':
		b := tok.Bool()
		return &b
	case tok.Kind() != 'n':
		r.failed = true
	}
	return nil
}

// end reports whether everything read so far was read and the document ends there.
func (r *tokenReader) end() bool {
	if r.failed {
		return false
	}
	_, err := r.dec.ReadToken()
	return err == io.EOF
}
