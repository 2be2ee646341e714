// Package openapi holds Gatehouse's hand-maintained OpenAPI 3.1 document, the source of truth
// for both the generated server interface (gen/) and request validation (server/).
package openapi

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"

	"gopkg.in/yaml.v3"
)

// YAML is openapi.yaml exactly as written.
//
//go:embed openapi.yaml
var YAML []byte

// ProductionOrigin is the origin written into the committed snapshot openapi.json.
const ProductionOrigin = "https://gatehouse.example.com"

// JSON renders the document as indented JSON with keys in the order they are written in
// openapi.yaml and a single servers entry whose url is origin. Nothing else is changed, so the
// output for two origins differs only in servers[0].url.
func JSON(origin string) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(YAML, &doc); err != nil {
		return nil, fmt.Errorf("openapi: parse yaml: %w", err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("openapi: document root is not a mapping")
	}
	if err := setServerURL(doc.Content[0], origin); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := writeJSON(&buf, doc.Content[0]); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, buf.Bytes(), "", "  "); err != nil {
		return nil, fmt.Errorf("openapi: indent: %w", err)
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

// setServerURL replaces the url of the single servers entry.
func setServerURL(root *yaml.Node, origin string) error {
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value != "servers" {
			continue
		}
		servers := root.Content[i+1]
		if servers.Kind != yaml.SequenceNode || len(servers.Content) != 1 {
			return fmt.Errorf("openapi: servers must hold exactly one entry")
		}
		entry := servers.Content[0]
		for j := 0; j+1 < len(entry.Content); j += 2 {
			if entry.Content[j].Value == "url" {
				entry.Content[j+1].Value = origin
				return nil
			}
		}
	}
	return fmt.Errorf("openapi: no servers[0].url")
}

// writeJSON encodes a YAML node as JSON, keeping mapping keys in document order.
func writeJSON(buf *bytes.Buffer, n *yaml.Node) error {
	switch n.Kind {
	case yaml.AliasNode:
		return writeJSON(buf, n.Alias)
	case yaml.MappingNode:
		buf.WriteByte('{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			if i > 0 {
				buf.WriteByte(',')
			}
			key, _ := json.Marshal(n.Content[i].Value)
			buf.Write(key)
			buf.WriteByte(':')
			if err := writeJSON(buf, n.Content[i+1]); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	case yaml.SequenceNode:
		buf.WriteByte('[')
		for i, c := range n.Content {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeJSON(buf, c); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	case yaml.ScalarNode:
		return writeScalar(buf, n)
	default:
		return fmt.Errorf("openapi: unsupported yaml node kind %d at line %d", n.Kind, n.Line)
	}
	return nil
}

func writeScalar(buf *bytes.Buffer, n *yaml.Node) error {
	switch n.ShortTag() {
	case "!!null":
		buf.WriteString("null")
		return nil
	case "!!bool", "!!int", "!!float":
		var v any
		if err := n.Decode(&v); err != nil {
			return fmt.Errorf("openapi: line %d: %w", n.Line, err)
		}
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("openapi: line %d: %w", n.Line, err)
		}
		buf.Write(b)
		return nil
	default:
		b, _ := json.Marshal(n.Value)
		buf.Write(b)
		return nil
	}
}
