package server

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// The validation errors of kin-openapi (parameters, form bodies) and of the JSON Schema
// validator (JSON bodies) as the problem's field errors: a path and a sentence each.

// fieldErrors flattens kin-openapi's validation errors into problem field errors with path
// arrays and clean messages that never quote the submitted value.
func fieldErrors(err error) []FieldError {
	var out []FieldError
	var walk func(err error, base []string)
	walk = func(err error, base []string) {
		switch e := err.(type) {
		case openapi3.MultiError:
			for _, x := range e {
				walk(x, base)
			}
		case *openapi3filter.RequestError:
			path := base
			switch {
			case e.Parameter != nil:
				path = []string{e.Parameter.In, e.Parameter.Name}
			case e.RequestBody != nil:
				path = []string{"body"}
			}
			switch {
			case e.Err == nil:
				out = append(out, FieldError{Path: path, Message: requestReason(e.Reason)})
			case errors.Is(e.Err, openapi3filter.ErrInvalidRequired):
				out = append(out, FieldError{Path: path, Message: "is required"})
			case errors.Is(e.Err, openapi3filter.ErrInvalidEmptyValue):
				out = append(out, FieldError{Path: path, Message: "must not be empty"})
			default:
				var pe *openapi3filter.ParseError
				if errors.As(e.Err, &pe) && !isSchemaError(e.Err) {
					out = append(out, FieldError{Path: path, Message: parseMessage(e.RequestBody != nil)})
					return
				}
				walk(e.Err, path)
			}
		case *openapi3.SchemaError:
			out = append(out, schemaErrors(e, base)...)
		default:
			out = append(out, FieldError{Path: base, Message: "is invalid"})
		}
	}
	walk(err, nil)
	return out
}

func isSchemaError(err error) bool {
	var se *openapi3.SchemaError
	return errors.As(err, &se)
}

func parseMessage(body bool) string {
	if body {
		return "is not valid JSON"
	}
	return "has the wrong type or format"
}

// requestReason keeps the part of a kin-openapi reason before any quoted value.
func requestReason(reason string) string {
	switch {
	case strings.HasPrefix(reason, "header Content-Type has unexpected value"):
		return "has an unsupported Content-Type"
	case strings.Contains(reason, "must not be empty"), strings.Contains(reason, "value is required"):
		return "is required"
	}
	if i := strings.IndexAny(reason, `:"`); i > 0 {
		reason = reason[:i]
	}
	return strings.TrimSpace(reason)
}

// schemaErrors renders a schema error tree. A 3.1 document is checked by the JSON Schema
// 2020-12 validator, whose errors kin-openapi converts into SchemaErrors nested through Origin,
// each leaf keeping the original error as its cause; schemas it cannot compile fall back to
// kin-openapi's own validator, which fills Schema and SchemaField instead.
func schemaErrors(e *openapi3.SchemaError, base []string) []FieldError {
	var nested openapi3.MultiError
	if e.Origin != nil && errors.As(e.Origin, &nested) {
		var out []FieldError
		for _, sub := range nested {
			var se *openapi3.SchemaError
			if errors.As(sub, &se) {
				out = append(out, schemaErrors(se, base)...)
			}
		}
		return out
	}
	path := append(append([]string{}, base...), e.JSONPointer()...)
	var verr *jsonschema.ValidationError
	if e.Origin == nil && errors.As(e, &verr) {
		for len(verr.Causes) == 1 && isWrapperKind(verr.ErrorKind) {
			verr = verr.Causes[0]
		}
		return leafErrors(path, verr.ErrorKind)
	}
	if m := unsupportedProperty.FindStringSubmatch(e.Reason); m != nil {
		// The OpenAPI validator names an unknown property only in its reason.
		return withProperties(path, []string{m[1]}, "is not allowed")
	}
	return []FieldError{{Path: path, Message: legacyMessage(e)}}
}

var unsupportedProperty = regexp.MustCompile(`^property "([^"]+)" is unsupported`)

func isWrapperKind(k jsonschema.ErrorKind) bool {
	switch k.(type) {
	case *kind.Schema, *kind.Group, *kind.Reference, *kind.AllOf:
		return true
	}
	return false
}

func withProperties(path, props []string, msg string) []FieldError {
	out := make([]FieldError, len(props))
	for i, p := range props {
		out[i] = FieldError{Path: append(append([]string{}, path...), p), Message: msg}
	}
	return out
}

func kindMessage(k jsonschema.ErrorKind) string {
	switch k := k.(type) {
	case *kind.Type:
		return "must be " + article(strings.Join(k.Want, " or "))
	case *kind.Enum:
		return fmt.Sprintf("must be one of %s", joinValues(k.Want))
	case *kind.Const:
		return fmt.Sprintf("must be %s", joinValues([]any{k.Want}))
	case *kind.Format:
		return "must be a valid " + k.Want
	case *kind.MinItems:
		return fmt.Sprintf("must have at least %d item%s", k.Want, plural(k.Want))
	case *kind.MaxItems:
		return fmt.Sprintf("must have at most %d item%s", k.Want, plural(k.Want))
	case *kind.MinLength:
		return fmt.Sprintf("must be at least %d character%s long", k.Want, plural(k.Want))
	case *kind.MaxLength:
		return fmt.Sprintf("must be at most %d character%s long", k.Want, plural(k.Want))
	case *kind.MinProperties:
		return fmt.Sprintf("must have at least %d propert%s", k.Want, pluralY(k.Want))
	case *kind.MaxProperties:
		return fmt.Sprintf("must have at most %d propert%s", k.Want, pluralY(k.Want))
	case *kind.Pattern:
		return "must match the pattern " + k.Want
	case *kind.Minimum:
		return "must be at least " + k.Want.RatString()
	case *kind.Maximum:
		return "must be at most " + k.Want.RatString()
	case *kind.ExclusiveMinimum:
		return "must be greater than " + k.Want.RatString()
	case *kind.ExclusiveMaximum:
		return "must be less than " + k.Want.RatString()
	case *kind.MultipleOf:
		return "must be a multiple of " + k.Want.RatString()
	case *kind.UniqueItems:
		return "must not contain duplicates"
	case *kind.OneOf, *kind.AnyOf:
		return "does not match any allowed shape"
	case *kind.FalseSchema:
		return "is not allowed"
	}
	return "is invalid"
}

// legacyMessage renders an error of kin-openapi's own (OpenAPI 3.0 style) validator.
func legacyMessage(e *openapi3.SchemaError) string {
	s := e.Schema
	if s == nil {
		return "is invalid"
	}
	switch e.SchemaField {
	case "required":
		return "is required"
	case "additionalProperties":
		return "is not allowed"
	case "type":
		return "must be " + article(strings.Join(s.Type.Slice(), " or "))
	case "enum":
		return fmt.Sprintf("must be one of %s", joinValues(s.Enum))
	case "const":
		return fmt.Sprintf("must be %s", joinValues([]any{s.Const}))
	case "format":
		return "must be a valid " + s.Format
	case "minItems":
		return fmt.Sprintf("must have at least %d item%s", s.MinItems, plural(int(s.MinItems)))
	case "maxItems":
		return fmt.Sprintf("must have at most %d item%s", *s.MaxItems, plural(int(*s.MaxItems)))
	case "minLength":
		return fmt.Sprintf("must be at least %d character%s long", s.MinLength, plural(int(s.MinLength)))
	case "maxLength":
		return fmt.Sprintf("must be at most %d character%s long", *s.MaxLength, plural(int(*s.MaxLength)))
	case "pattern":
		return "must match the pattern " + s.Pattern
	case "minimum":
		return fmt.Sprintf("must be at least %v", *s.Min)
	case "maximum":
		return fmt.Sprintf("must be at most %v", *s.Max)
	case "uniqueItems":
		return "must not contain duplicates"
	case "oneOf", "anyOf":
		return "does not match any allowed shape"
	}
	return "is invalid"
}

func article(t string) string {
	if t == "" {
		return "valid"
	}
	if strings.IndexByte("aeiou", t[0]) >= 0 {
		return "an " + t
	}
	return "a " + t
}

func joinValues(vs []any) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = fmt.Sprintf("%v", v)
	}
	return strings.Join(parts, ", ")
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func pluralY(n int) string {
	if n == 1 {
		return "y"
	}
	return "ies"
}

// validationErrors renders a JSON Schema validation error tree: each leaf names its instance
// location under base.
func validationErrors(verr *jsonschema.ValidationError, base []string) []FieldError {
	switch verr.ErrorKind.(type) {
	case *kind.OneOf, *kind.AnyOf:
		// Every branch's complaint would confuse more than it helps.
		return []FieldError{{Path: append(append([]string{}, base...), verr.InstanceLocation...), Message: kindMessage(verr.ErrorKind)}}
	}
	if len(verr.Causes) > 0 {
		var out []FieldError
		for _, c := range verr.Causes {
			out = append(out, validationErrors(c, base)...)
		}
		return out
	}
	return leafErrors(append(append([]string{}, base...), verr.InstanceLocation...), verr.ErrorKind)
}

// leafErrors renders one failed JSON Schema keyword at path; required and
// additionalProperties name the properties themselves.
func leafErrors(path []string, k jsonschema.ErrorKind) []FieldError {
	switch k := k.(type) {
	case *kind.Required:
		return withProperties(path, k.Missing, "is required")
	case *kind.AdditionalProperties:
		return withProperties(path, k.Properties, "is not allowed")
	}
	return []FieldError{{Path: path, Message: kindMessage(k)}}
}
