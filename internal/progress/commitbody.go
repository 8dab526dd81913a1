package progress

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// CommitBodyLimit bounds a commit request's body.
const CommitBodyLimit = 4096

// commitShape is what every refusal of a commit body shows.
const commitShape = `{"epoch": E, "step": K[, "resumed": true]}`

// ParseCommit reads a commit body strictly (design §9): one JSON object
// with exactly the documented fields, spelled as documented (encoding/json
// alone would match "Epoch" and let a repeated key win silently), epoch
// and step present, nothing after the object. A refusal says what is
// wrong; nothing is recorded.
func ParseCommit(body []byte) (Commit, error) {
	var c Commit
	if len(body) > CommitBodyLimit {
		return c, fmt.Errorf("the body is over %d bytes: send %s", CommitBodyLimit, commitShape)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return c, fmt.Errorf("the body must be one JSON object %s", commitShape)
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return c, fmt.Errorf("the body is not valid JSON (%w): send %s", err, commitShape)
		}
		key, ok := tok.(string)
		if !ok {
			return c, fmt.Errorf("the body is not valid JSON: send %s", commitShape)
		}
		if seen[key] {
			return c, fmt.Errorf("field %q appears twice: send each field once, %s", key, commitShape)
		}
		seen[key] = true
		var v any
		if err := dec.Decode(&v); err != nil {
			return c, fmt.Errorf("field %q: %w", key, err)
		}
		switch key {
		case "epoch":
			c.Epoch, err = commitInt(key, v)
		case "step":
			c.Step, err = commitInt(key, v)
		case "resumed":
			b, ok := v.(bool)
			if !ok {
				err = fmt.Errorf(`field "resumed" must be true or false, got %s`, jsonText(v))
			}
			c.Resumed = b
		default:
			err = fmt.Errorf("unknown field %q (fields are case-sensitive): send %s", key, commitShape)
		}
		if err != nil {
			return c, err
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return c, fmt.Errorf("the body is not valid JSON (%w): send %s", err, commitShape)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return c, fmt.Errorf("the body must hold one JSON object and nothing after it: %s", commitShape)
	}
	for _, k := range []string{"epoch", "step"} {
		if !seen[k] {
			return c, fmt.Errorf("field %q is required: send %s", k, commitShape)
		}
	}
	return c, nil
}

// commitInt reads a non-negative integer field.
func commitInt(key string, v any) (int64, error) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, fmt.Errorf("field %q must be a non-negative integer, got %s", key, jsonText(v))
	}
	i, err := strconv.ParseInt(n.String(), 10, 64)
	if err != nil || i < 0 {
		return 0, fmt.Errorf("field %q must be a non-negative integer, got %s", key, n)
	}
	return i, nil
}

func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
