package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/mail"
	"net/url"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/labstack/echo/v4"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// validator checks requests against the OpenAPI document before any handler runs.
type validator struct {
	// spec is the document as kin-openapi's parameter validator reads it (see newValidator).
	spec *openapi3.T
	opts *openapi3filter.Options
	// bodies holds, per operation id, the JSON request body's schema compiled once (kin-openapi
	// would marshal and compile it again on every request).
	bodies map[string]*jsonBody
	// paramOpts validates everything but the body, for requests whose body is checked
	// against a compiled schema.
	paramOpts *openapi3filter.Options
}

// jsonBody is an operation's application/json request body.
type jsonBody struct {
	required bool
	schema   *jsonschema.Schema
	// arbitraryText: the body schema's x-arbitrary-text is true, so its strings are exempt
	// from the text rule (validate_text.go).
	arbitraryText bool
	// fast, when not nil, is true only for a decoded body that schema accepts; false leaves the
	// body to schema (validate_fast.go). fastSchema is its compiled form.
	fast       func(any) bool
	fastSchema *fastSchema
	// stream, when not nil, is fast over the body's bytes (validate_stream.go), for the bodies
	// bound from their bytes (typedBodies): a body it accepts is never decoded into a tree.
	stream func([]byte) bool
}

func newValidator(doc *openapi3.T) (*validator, error) {
	defineFormats.Do(func() {
		openapi3.DefineStringFormatValidator("email", openapi3.NewCallbackValidator(validEmail))
	})
	// kin-openapi validates a 3.1 document's parameters by compiling a JSON Schema 2020-12
	// validator for every parameter of every request (a third of a request's CPU). JSON bodies
	// are checked against schemas compiled once (compileBodies); parameters and form bodies use
	// plain keywords (type, enum, pattern, bounds, lengths) that kin-openapi's own validator,
	// which compiles nothing per request, checks the same way. Its copy of the document says so.
	spec := *doc
	spec.OpenAPI = "3.0.3"
	bodies, err := compileBodies(doc)
	if err != nil {
		return nil, err
	}
	opts := &openapi3filter.Options{
		MultiError:         true,
		AuthenticationFunc: openapi3filter.NoopAuthenticationFunc,
	}
	paramOpts := *opts
	paramOpts.ExcludeRequestBody = true
	return &validator{spec: &spec, bodies: bodies, opts: opts, paramOpts: &paramOpts}, nil
}

// route is the operation at path and method in kin-openapi's terms. Echo does the routing:
// this only names the operation a routed request is validated against.
//
// The operation is a copy whose security requirements are empty: credentials are the
// authentication middleware's (auth.go), and kin-openapi's check of them would only call its
// no-op AuthenticationFunc, after reading the whole body into memory and handing the request a
// copy (openapi3filter.validateSecurityRequirement): 4 % of a single usage event's CPU in the
// pinned profile. kin-openapi has no option to skip it; an empty, non-nil list is skipped.
func (v *validator) route(path, method string) *routers.Route {
	item := v.spec.Paths.Value(path)
	op := item.GetOperation(method)
	if op != nil {
		unsecured := *op
		unsecured.Security = &openapi3.SecurityRequirements{}
		op = &unsecured
	}
	return &routers.Route{Spec: v.spec, Path: path, PathItem: item, Method: method, Operation: op}
}

// compileBodies compiles every operation's JSON request body schema, with JSON Schema 2020-12,
// from the document itself (so "#/components/schemas/…" references resolve), asserting the
// formats kin-openapi knows (email as redefined above).
func compileBodies(doc *openapi3.T) (map[string]*jsonBody, error) {
	raw, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("server: compile request bodies: %w", err)
	}
	var tree any
	if err := json.Unmarshal(raw, &tree); err != nil {
		return nil, fmt.Errorf("server: compile request bodies: %w", err)
	}
	const base = "urn:gatehouse:openapi.json"
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	for name, f := range openapi3.SchemaStringFormats {
		c.RegisterFormat(&jsonschema.Format{Name: name, Validate: func(v any) error {
			if s, ok := v.(string); ok {
				return f.Validate(s)
			}
			return nil
		}})
	}
	c.AssertFormat()
	inlined := inlineSchemaRefs(tree)
	if err := c.AddResource(base, inlined); err != nil {
		return nil, fmt.Errorf("server: compile request bodies: %w", err)
	}
	out := map[string]*jsonBody{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			if op.RequestBody == nil || op.RequestBody.Value == nil || op.RequestBody.Value.Content.Get("application/json") == nil {
				continue
			}
			ptr := "/paths/" + pointerToken(path) + "/" + strings.ToLower(method) + "/requestBody/content/application~1json/schema"
			if op.RequestBody.Ref != "" {
				ptr = strings.TrimPrefix(op.RequestBody.Ref, "#") + "/content/application~1json/schema"
			}
			schema, err := c.Compile(base + "#" + (&url.URL{Fragment: ptr}).EscapedFragment())
			if err != nil {
				return nil, fmt.Errorf("server: compile the request body of %s: %w", op.OperationID, err)
			}
			body := &jsonBody{required: op.RequestBody.Value.Required, schema: schema}
			if f, ok := newFastSchema(pointerNode(inlined, ptr), schema); ok {
				body.fast, body.fastSchema = f.valid, f
				if typedBodies[op.OperationID] && f.canStream() {
					body.stream = f.validDocument
				}
			}
			if mt := op.RequestBody.Value.Content.Get("application/json"); mt.Schema != nil && mt.Schema.Value != nil {
				body.arbitraryText, _ = mt.Schema.Value.Extensions["x-arbitrary-text"].(bool)
			}
			out[op.OperationID] = body
		}
	}
	return out, nil
}

// pointerNode is the value at a JSON pointer in a decoded JSON tree, nil when there is none.
func pointerNode(tree any, ptr string) any {
	if ptr == "" {
		return tree
	}
	for _, tok := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch x := tree.(type) {
		case map[string]any:
			tree = x[tok]
		default:
			return nil
		}
	}
	return tree
}

// pointerToken escapes one JSON pointer token.
func pointerToken(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// presizeLimit bounds the buffer readBody sizes from a declared Content-Length before reading:
// a batch of 100 decision checks is about 10 kB; a larger body grows its buffer as it is read.
const presizeLimit = 64 << 10

// readBody reads req's body whole, as io.ReadAll does (what was read, and the error that ended
// the read), into a buffer sized from its Content-Length (up to presizeLimit): io.ReadAll
// starts at 512 bytes and grows by copying, five allocations and copies for a 10 kB batch.
func readBody(req *http.Request) ([]byte, error) {
	buf := bytes.NewBuffer(make([]byte, 0, min(max(req.ContentLength, 0), presizeLimit)+bytes.MinRead))
	_, err := buf.ReadFrom(req.Body)
	return buf.Bytes(), err
}

// validateBody checks a JSON request body against its compiled schema and returns it decoded
// (numbers as json.Number), so later stages need not decode it again, or as streamedBody when
// its streamed check accepted it undecoded. The body stays readable
// for the handler.
func validateBody(req *http.Request, b *jsonBody) (any, []FieldError, error) {
	var raw []byte
	if req.Body != nil && req.Body != http.NoBody {
		var err error
		if raw, err = readBody(req); err != nil {
			return nil, nil, err
		}
		req.Body = io.NopCloser(bytes.NewReader(raw))
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		if b.required {
			return nil, []FieldError{{Path: []string{"body"}, Message: "is required"}}, nil
		}
		return nil, nil, nil
	}
	if b.stream != nil && streamable(raw) && b.stream(raw) {
		req.Body = &validatedBody{Reader: bytes.NewReader(raw), raw: raw}
		return streamedBody(raw), nil, nil
	}
	v, ok := decodeJSONDocument(raw)
	if !ok {
		return nil, []FieldError{{Path: []string{"body"}, Message: parseMessage(true)}}, nil
	}
	var text []FieldError
	if !b.arbitraryText {
		if marked, ok := markNonText(raw); ok {
			// What the decoder would have replaced with U+FFFD is refused instead.
			raw = marked
			v, _ = decodeJSONDocument(raw)
		}
		if bytes.Contains(raw, []byte(`\u0000`)) {
			text = jsonTextErrors(v, []string{"body"})
		}
	}
	if mayHoldHugeNumber(raw) {
		// Numbers out of range are replaced by 0 in v, for the schema to judge the rest.
		var errs []FieldError
		v, errs = numberRangeErrors(v, []string{"body"})
		text = preferText(text, errs)
	}
	var err error
	if b.fast == nil || !b.fast(v) {
		err = b.schema.Validate(v)
	}
	if err == nil {
		if len(text) > 0 {
			return nil, text, nil
		}
		req.Body = &validatedBody{Reader: bytes.NewReader(raw), value: v}
		return v, nil, nil
	}
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		return nil, nil, err
	}
	return nil, preferText(text, validationErrors(verr, []string{"body"})), nil
}

// validatedBody is a request body that passed validateBody: its bytes, still readable, and the
// value decoded from them and validated (nil when the streamed check accepted the bytes without
// decoding them: then the binder reads raw). It has the method (ValidatedValue) by which
// oapi-codegen's strict handlers recognise a body kin-openapi validated with KeepValidatedValue:
// they bind that value (runtime.BindJSONValue, member names matched exactly) instead of
// decoding the bytes a second time, and fall back to decoding them when it does not fit.
type validatedBody struct {
	*bytes.Reader
	raw   []byte
	value any
}

// ValidatedValue is the decoded body as it was validated (numbers as json.Number).
func (b *validatedBody) ValidatedValue() any { return b.value }

// Close does nothing: the bytes are in memory.
func (b *validatedBody) Close() error { return nil }

// isJSON reports whether a Content-Type header names application/json.
func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/json"
}

// defineFormats registers the string formats kin-openapi does not check by itself. Its format
// registry is process-wide, so this runs once.
var defineFormats sync.Once

// validEmail accepts a bare address (no display name, comments or quoting), as sign-up needs.
// Surrounding white space is allowed: handlers trim and lower-case emails.
func validEmail(s string) error {
	s = strings.TrimSpace(s)
	a, err := mail.ParseAddress(s)
	if err != nil || a.Name != "" || a.Address != s || strings.ContainsAny(s, " \t\r\n\"<>(),;:[]\\") {
		return errors.New("not an email address")
	}
	return nil
}

// validate checks a matched operation's parameters and body against the spec. It runs after
// authentication, so that an anonymous caller learns nothing about the request's shape.
func (s *Server) validate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		m := routeOf(c)
		if m == nil || m.policy.surface == surfaceProtocol {
			return next(c)
		}
		// url.Values silently drops pairs it cannot decode, so a parameter sent as "%zz" would
		// read as absent; refuse the query instead.
		if _, err := url.ParseQuery(c.Request().URL.RawQuery); err != nil {
			return Validation(FieldError{Path: []string{"query"}, Message: "is not valid percent-encoding"})
		}
		body, errs, err := s.validator.check(c.Request(), m.route, m.params)
		if err != nil {
			return err
		}
		m.body = body
		if len(errs) > 0 {
			return Validation(errs...)
		}
		return next(c)
	}
}

// check validates one request against its operation: parameters (and form bodies) with
// kin-openapi, a JSON body against its compiled schema, every string against the text rule
// (validate_text.go). It returns the valid JSON body decoded
// (nil for none) and the issues found; an error means validation itself failed. The body stays
// readable for the handler.
func (v *validator) check(req *http.Request, route *routers.Route, params map[string]string) (any, []FieldError, error) {
	input := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: v.opts}
	b := v.bodies[route.Operation.OperationID]
	if b != nil && !isJSON(req.Header.Get("Content-Type")) && req.ContentLength != 0 {
		b = nil // not JSON: kin-openapi checks it (forms) or refuses its content type
	}
	if b != nil {
		input.Options = v.paramOpts
	}
	text := paramTextErrors(req, route, params)
	if b == nil {
		formText, err := formTextErrors(req)
		if err != nil {
			return nil, nil, fmt.Errorf("server: validate request body: %w", err)
		}
		text = append(text, formText...)
	}
	var errs []FieldError
	if err := openapi3filter.ValidateRequest(req.Context(), input); err != nil {
		if errs = fieldErrors(err); len(errs) == 0 {
			return nil, nil, fmt.Errorf("server: validate request: %w", err)
		}
	}
	var body any
	if b != nil {
		decoded, bodyErrs, err := validateBody(req, b)
		if err != nil {
			return nil, nil, fmt.Errorf("server: validate request body: %w", err)
		}
		body, errs = decoded, append(errs, bodyErrs...)
	}
	return body, preferText(text, errs), nil
}
