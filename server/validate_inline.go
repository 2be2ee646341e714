package server

import (
	"slices"
	"strings"
)

// inlineSchemaRefs returns a copy of the OpenAPI document tree doc (as decoded from JSON) in
// which, under paths and components.requestBodies (where the request body schemas that
// compileBodies compiles live), every schema that is nothing but a $ref to
// "#/components/schemas/…" (annotations aside) is replaced by a copy of the schema it names,
// itself inlined the same way. The meaning is the same (2020-12 applies a $ref's target in
// place, and the siblings kept are annotations), and so are the instance locations of every
// error; what changes is the cost of validating: santhosh-tekuri/jsonschema validates each
// $ref as a separate schema (a new scope, its own bookkeeping, allocated per value), which was
// half the work of a 100-check batch whose every check holds two $refs. A $ref that would
// recurse (a schema reached again through its own references) stays, and resolves against
// components.schemas, which is left as it is.
func inlineSchemaRefs(doc any) any {
	root, ok := doc.(map[string]any)
	if !ok {
		return doc
	}
	components, _ := root["components"].(map[string]any)
	schemas, _ := components["schemas"].(map[string]any)
	if schemas == nil {
		return doc
	}
	var walk func(v any, stack []string) any
	walk = func(v any, stack []string) any {
		switch x := v.(type) {
		case map[string]any:
			if name, ok := bareSchemaRef(x); ok && !slices.Contains(stack, name) {
				if target, ok := schemas[name]; ok {
					return walk(target, append(stack, name))
				}
			}
			out := make(map[string]any, len(x))
			for k, e := range x {
				out[k] = walk(e, stack)
			}
			return out
		case []any:
			out := make([]any, len(x))
			for i, e := range x {
				out[i] = walk(e, stack)
			}
			return out
		}
		return v
	}
	out := make(map[string]any, len(root))
	for k, v := range root {
		out[k] = v
	}
	out["paths"] = walk(root["paths"], nil)
	if bodies, ok := components["requestBodies"]; ok {
		c := make(map[string]any, len(components))
		for k, v := range components {
			c[k] = v
		}
		c["requestBodies"] = walk(bodies, nil)
		out["components"] = c
	}
	return out
}

// bareSchemaRef returns the component schema name a schema refers to when the schema is only
// that $ref, beside annotations that validate nothing (description, title, examples,
// deprecated, $comment, extensions).
func bareSchemaRef(schema map[string]any) (string, bool) {
	ref, ok := schema["$ref"].(string)
	if !ok {
		return "", false
	}
	name, ok := strings.CutPrefix(ref, "#/components/schemas/")
	if !ok || strings.ContainsAny(name, "/~%") {
		return "", false
	}
	for k := range schema {
		switch {
		case k == "$ref", k == "description", k == "title", k == "example", k == "examples",
			k == "deprecated", k == "$comment", strings.HasPrefix(k, "x-"):
		default:
			return "", false
		}
	}
	return name, true
}
