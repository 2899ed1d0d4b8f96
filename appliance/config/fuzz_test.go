package config

import (
	"errors"
	"strings"
	"testing"
)

// FuzzLoad feeds arbitrary files and one environment value to the loader:
// it must never panic, and must return either a valid Config or an *Error
// whose every line starts with "config: ".
func FuzzLoad(f *testing.F) {
	f.Add([]byte(`{"Mqtt": {"Port": 1883}}`), "1883")
	f.Add(exampleJSON, "a:1,b:2")
	f.Add(devJSON, "true")
	f.Add([]byte(`{"Cluster": {"Seeds": "a:1 b:2", "Discovery": "SEEDS", "Enabled": true}}`), "")
	f.Add([]byte(`{"Mqtt": {"Port": 1e3}, "Mqtt": []}`), "-1")
	f.Fuzz(func(t *testing.T, file []byte, value string) {
		lookup := func(name string) (string, bool) {
			return value, strings.HasSuffix(name, "_PORT") || strings.HasSuffix(name, "_SEEDS")
		}
		c, err := load("fuzz.json", file, lookup)
		if err == nil {
			if verr := c.Validate(); verr != nil {
				t.Fatalf("Load returned a Config that does not validate: %v", verr)
			}
			return
		}
		var ce *Error
		if !errors.As(err, &ce) || len(ce.Problems) == 0 {
			t.Fatalf("error %v is not a non-empty *Error", err)
		}
		for _, line := range ce.Problems {
			if !strings.HasPrefix(line, "config: ") || strings.Contains(line, "\n") {
				t.Fatalf("bad problem line %q", line)
			}
		}
	})
}
