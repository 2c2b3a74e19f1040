package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// A small JSON Schema validator for the subset docs/schema/*.schema.json
// use (type, properties, required, additionalProperties, items, enum,
// const, minimum, maximum, anyOf, $ref to #/$defs): enough to hold the
// --json output to its documented schema without a new dependency.

type schemaDoc struct {
	root map[string]any
}

func loadSchema(t *testing.T, action string) *schemaDoc {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "schema", action+".schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("schema %s: %v", action, err)
	}
	return &schemaDoc{root: m}
}

// validate returns the first way v breaks the schema s ("" when it does not).
func (d *schemaDoc) validate(s map[string]any, v any, at string) string {
	if ref, ok := s["$ref"].(string); ok {
		name, found := strings.CutPrefix(ref, "#/$defs/")
		defs, _ := d.root["$defs"].(map[string]any)
		sub, ok := defs[name].(map[string]any)
		if !found || !ok {
			return at + ": unresolved $ref " + ref
		}
		return d.validate(sub, v, at)
	}
	if ty, ok := s["type"].(string); ok && !hasType(ty, v) {
		return fmt.Sprintf("%s: %v is not %s", at, v, ty)
	}
	if c, ok := s["const"]; ok && !reflect.DeepEqual(c, v) {
		return fmt.Sprintf("%s: %v is not %v", at, v, c)
	}
	if e, ok := s["enum"].([]any); ok {
		found := false
		for _, x := range e {
			found = found || reflect.DeepEqual(x, v)
		}
		if !found {
			return fmt.Sprintf("%s: %v not in %v", at, v, e)
		}
	}
	if n, ok := v.(float64); ok {
		if m, ok := s["minimum"].(float64); ok && n < m {
			return fmt.Sprintf("%s: %v < %v", at, n, m)
		}
		if m, ok := s["maximum"].(float64); ok && n > m {
			return fmt.Sprintf("%s: %v > %v", at, n, m)
		}
	}
	if obj, ok := v.(map[string]any); ok {
		props, _ := s["properties"].(map[string]any)
		for _, r := range asList(s["required"]) {
			if _, ok := obj[r.(string)]; !ok {
				return at + ": missing " + r.(string)
			}
		}
		for k, x := range obj {
			sub, ok := props[k].(map[string]any)
			if !ok {
				switch ap := s["additionalProperties"].(type) {
				case bool:
					if !ap {
						return at + ": unexpected field " + k
					}
					continue
				case map[string]any:
					sub = ap
				default:
					continue
				}
			}
			if msg := d.validate(sub, x, at+"."+k); msg != "" {
				return msg
			}
		}
	}
	if arr, ok := v.([]any); ok {
		if items, ok := s["items"].(map[string]any); ok {
			for i, x := range arr {
				if msg := d.validate(items, x, fmt.Sprintf("%s[%d]", at, i)); msg != "" {
					return msg
				}
			}
		}
	}
	if branches, ok := s["anyOf"].([]any); ok {
		var msgs []string
		for _, a := range branches {
			msg := d.validate(a.(map[string]any), v, at)
			if msg == "" {
				msgs = nil
				break
			}
			msgs = append(msgs, msg)
		}
		if msgs != nil {
			return at + ": matches no anyOf branch: " + strings.Join(msgs, "; ")
		}
	}
	return ""
}

func asList(v any) []any { l, _ := v.([]any); return l }

func hasType(ty string, v any) bool {
	switch ty {
	case "object":
		_, ok := v.(map[string]any)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	case "string":
		_, ok := v.(string)
		return ok
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "integer":
		n, ok := v.(float64)
		return ok && n == float64(int64(n))
	}
	return false
}

// jsonTypes are the documented Go types of each output.
var jsonTypes = map[string]func() any{
	"status":      func() any { return new(StatusJSON) },
	"gets":        func() any { return new(GetsJSON) },
	"host_status": func() any { return new(HostStatusJSON) },
	"renewal":     func() any { return new(RenewalJSON) },
	"inquire":     func() any { return new(InquireJSON) },
	"locks":       func() any { return new(LocksJSON) },
}

// checkJSON validates out (one action's --json output) against the
// action's schema and decodes it into the documented Go type with unknown
// fields refused; it returns the decoded value.
func checkJSON(t *testing.T, action, out string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("%s --json: not JSON: %v\n%s", action, err, out)
	}
	d := loadSchema(t, action)
	if msg := d.validate(d.root, v, action); msg != "" {
		t.Fatalf("%s --json breaks docs/schema/%s.schema.json: %s\n%s", action, action, msg, out)
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(out)))
	dec.DisallowUnknownFields()
	typed := jsonTypes[action]()
	if err := dec.Decode(typed); err != nil {
		t.Fatalf("%s --json into %T: %v", action, typed, err)
	}
	return typed
}

// TestSchemaValidator: the validator refuses what the schemas forbid, so a
// passing check means something.
func TestSchemaValidator(t *testing.T) {
	d := loadSchema(t, "locks")
	for _, c := range []struct {
		doc string
		ok  bool
	}{
		{`{"schema":2,"action":"locks","result":-111}`, true},
		{`{"schema":2,"action":"locks","result":0}`, false},
		{`{"schema":2,"action":"locks","result":0,"host_name":"h","monotime":5,"lockspaces":[],"resources":[]}`, true},
		{`{"action":"locks","result":0,"host_name":"h","monotime":5,"lockspaces":[],"resources":[]}`, false},
		{`{"schema":1,"action":"locks","result":-111}`, false},
		{`{"schema":2,"action":"locks","result":0,"host_name":"h","monotime":"5","lockspaces":[],"resources":[]}`, false},
		{`{"schema":2,"action":"locks","result":0,"host_name":"h","monotime":5,"lockspaces":[{"name":"LS","host_id":1,
			"path":"/p","offset":0,"state":"","renewal_last_result":0,"hosts_result":0,"hosts":[]}],"resources":[]}`, false},
		{`{"schema":2,"action":"locks","result":0,"host_name":"h","monotime":5,"lockspaces":[{"name":"LS","host_id":1,
			"path":"/p","offset":0,"state":"FAILED","renewal_last_result":-202,"hosts_result":0,"hosts":[{"host_id":1,
			"name":"h","generation":1,"timestamp":3,"state":"LIVE","local":true,"last_live":3,"renewed_ago":2}]}],"resources":[]}`, true},
		{`{"schema":2,"action":"locks","result":0,"host_name":"h","monotime":5,"lockspaces":[],"resources":[],"x":1}`, false},
		{`{"schema":2,"action":"status","result":-1}`, false},
		{`{"schema":2,"action":"locks","result":0,"host_name":"h","monotime":5,"lockspaces":[{"name":"LS"}],"resources":[]}`, false},
		{`{"schema":2,"action":"locks","result":0,"host_name":"h","monotime":5,"lockspaces":[],"resources":[{"lockspace":"LS","name":"R",
			"disks":[{"path":"/p","offset":-1}],"lver":1,"mode":"EX","read_result":0,"owners":[],"local":[]}]}`, false},
		{`{"schema":2,"action":"locks","result":0,"host_name":"h","monotime":5,"lockspaces":[],"resources":[{"lockspace":"LS","name":"R",
			"disks":[{"path":"/p","offset":0}],"lver":1,"mode":"XX","read_result":0,"owners":[],"local":[]}]}`, false},
		{`{"schema":2,"action":"locks","result":0,"host_name":"h","monotime":5,"lockspaces":[],"resources":[{"lockspace":"LS","name":"R",
			"disks":[{"path":"/p","offset":0}],"lver":1,"mode":"SH","read_result":0,"owners":[],"local":[]}]}`, true},
	} {
		var v any
		if err := json.Unmarshal([]byte(c.doc), &v); err != nil {
			t.Fatal(err)
		}
		if msg := d.validate(d.root, v, "locks"); (msg == "") != c.ok {
			t.Errorf("%s: got %q, want ok=%v", c.doc, msg, c.ok)
		}
	}
	for action := range jsonTypes {
		loadSchema(t, action)
	}
}
