package server

import (
	"encoding/json"
	"math/big"
	"slices"
	"strconv"
)

// Numbers a request body may hold: JSON sets no bound on a number's size, but every number
// Gatehouse accepts ends up in a double, and the schema validator compares numbers as exact
// rationals (math/big), which refuses exponents beyond about a million and then fails
// (santhosh-tekuri/jsonschema dereferences the nil it gets: a panic, answered 500). A number
// outside a double's range (±1.8e308), or one math/big cannot hold (1e-10000000), is refused as
// bad input before any schema sees it, with its path.

// numberRangeMessage is the FieldError message of such a number.
const numberRangeMessage = "must be a number between -1.8e308 and 1.8e308"

// mayHoldHugeNumber reports whether raw, a JSON document, could hold a number beyond a double's
// range: a number with an exponent (a digit or a point followed by e or E) or of more than 308
// digits. Strings are skipped, so that the walk of numberRangeErrors runs only where it may
// find something: an id such as "prj_01m8e9…" held it for nearly every body (a fifth of a usage
// event's validation in the pinned profile). raw is a document decodeJSONDocument accepted, so
// a quote outside a string opens one and an unescaped quote inside closes it.
func mayHoldHugeNumber(raw []byte) bool {
	run, inString := 0, false
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if inString {
			switch c {
			case '\\':
				i++ // the escaped character, a quote included
			case '"':
				inString = false
			}
			continue
		}
		switch {
		case c == '"':
			inString, run = true, 0
		case c >= '0' && c <= '9':
			if run++; run > 308 {
				return true
			}
		case (c == 'e' || c == 'E') && i > 0 && (raw[i-1] >= '0' && raw[i-1] <= '9' || raw[i-1] == '.'):
			return true
		case c != '.':
			run = 0
		}
	}
	return false
}

// numberRangeErrors returns an error for every number in the decoded body v (json.Number) that
// a double or math/big cannot hold, at its path under base, and v with each such number
// replaced by 0 (in place in its array or object), so that the schema can judge the rest of v
// without meeting it.
func numberRangeErrors(v any, base []string) (any, []FieldError) {
	var out []FieldError
	path := slices.Clone(base)
	bad := func(x any) bool {
		n, ok := x.(json.Number)
		if ok && !numberInRange(string(n)) {
			out = append(out, FieldError{Path: slices.Clone(path), Message: numberRangeMessage})
			return true
		}
		return false
	}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case []any:
			for i, x := range v {
				path = append(path, strconv.Itoa(i))
				if bad(x) {
					v[i] = json.Number("0")
				}
				walk(x)
				path = path[:len(path)-1]
			}
		case map[string]any:
			for k, x := range v {
				path = append(path, k)
				if bad(x) {
					v[k] = json.Number("0")
				}
				walk(x)
				path = path[:len(path)-1]
			}
		}
	}
	if bad(v) {
		return json.Number("0"), out
	}
	walk(v)
	return v, out
}

// numberInRange reports whether the JSON number s parses as a finite double and as an exact
// rational.
func numberInRange(s string) bool {
	if _, err := strconv.ParseFloat(s, 64); err != nil {
		return false
	}
	_, ok := new(big.Rat).SetString(s)
	return ok
}
