package chat_test

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/shardfeed/shardfeed/sidecar/chat"
	"github.com/shardfeed/shardfeed/sidecar/tokenizer"
)

// The chat conformance record (test/oracle/chat_oracle.py records it with
// the pinned transformers; make golden re-records it, make test-golden
// checks it still holds): 300 conversations (system messages, one to four
// turns, two user turns in a row, assistant tool calls and tool results)
// rendered by nine templates with tokenizers tokenizers trained. Each
// conversation renders to transformers' apply_chat_template text and ids,
// with its return_assistant_tokens_mask mask, or is refused with the
// template's own message.

const chatDir = "testdata/conformance"

type chatCase struct {
	Name, Template, Bos, Eos string
	Plain, Start, End        string
	Stops                    bool
}

type chatOutcome struct {
	Hash  string `json:"hash"`
	Mask  string `json:"mask"`
	Error string `json:"error"`
}

func gz(t *testing.T, name string) []byte {
	t.Helper()
	f, err := os.Open(filepath.Join(chatDir, name))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return data
}

// runs reads a mask written as runs ("0x12 1x5").
func runs(t *testing.T, s string) []uint8 {
	t.Helper()
	var out []uint8
	for _, r := range strings.Fields(s) {
		v, n, ok := strings.Cut(r, "x")
		count, err := strconv.Atoi(n)
		if !ok || err != nil || (v != "0" && v != "1") {
			t.Fatalf("mask run %q", r)
		}
		for range count {
			out = append(out, v[0]-'0')
		}
	}
	return out
}

// hashOf is the record's hash: Python's json.dumps of [text, ids].
func hashOf(text string, ids []int32) string {
	var b strings.Builder
	b.WriteString("[")
	b.WriteString(pyJSONString(text))
	b.WriteString(", [")
	for i, id := range ids {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Itoa(int(id)))
	}
	b.WriteString("]]")
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:])[:16]
}

// pyJSONString is a string as Python's json.dumps(ensure_ascii=False)
// writes it.
func pyJSONString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r < 0x20:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// load reads a case's tokenizer and parses its template, with the
// variables it renders with.
func (c chatCase) load(t *testing.T) (*tokenizer.Tokenizer, *chat.Template, map[string]any) {
	t.Helper()
	tk, err := tokenizer.Load(gz(t, c.Name+".tokenizer.json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join(chatDir, "templates", cmpOr(c.Plain, c.Template)))
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := chat.Parse(string(src))
	if err != nil {
		t.Fatal(err)
	}
	return tk, tpl, map[string]any{"bos_token": c.Bos, "eos_token": c.Eos}
}

// chatRecord reads the record's cases and its conversations' messages.
func chatRecord(t *testing.T) ([]chatCase, [][]any) {
	t.Helper()
	var cases []chatCase
	raw, err := os.ReadFile(filepath.Join(chatDir, "cases.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &cases); err != nil {
		t.Fatal(err)
	}
	var convs [][]any
	for line := range bytes.Lines(gz(t, "conversations.jsonl.gz")) {
		v, err := chat.FromJSON(line)
		if err != nil {
			t.Fatal(err)
		}
		m, _ := v.(*chat.Dict).Values["messages"].([]any)
		convs = append(convs, m)
	}
	return cases, convs
}

func TestChatConformance(t *testing.T) {
	cases, convs := chatRecord(t)
	if len(cases) < 9 || len(convs) < 300 {
		t.Fatalf("%d cases, %d conversations: re-record with make golden", len(cases), len(convs))
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			tk, tpl, vars := c.load(t)
			row, refused, stopped := 0, 0, 0
			for line := range bytes.Lines(gz(t, c.Name+".out.gz")) {
				var want chatOutcome
				if err := json.Unmarshal(line, &want); err != nil {
					t.Fatal(err)
				}
				text, spans, err := tpl.Render(convs[row], vars)
				if c.Plain != "" && err == nil {
					spans = chat.MarkerSpans(text, c.Start, c.End)
				}
				var te *chat.TemplateError
				switch {
				case want.Error != "":
					if !errors.As(err, &te) || te.Message != want.Error {
						t.Fatalf("conversation %d: transformers refuses it (%s), shardfeed says %v", row, want.Error, err)
					}
					refused++
				case err != nil:
					t.Fatalf("conversation %d: %v", row, err)
				default:
					ids, mask, err := chat.Tokenize(tk, text, spans)
					if err != nil {
						t.Fatal(err)
					}
					if got := hashOf(text, ids); got != want.Hash {
						t.Fatalf("conversation %d: the text or ids differ from transformers' (hash %s, recorded %s):\n%q\n%v", row, got, want.Hash, text, ids)
					}
					wantMask := runs(t, want.Mask)
					switch {
					case slices.Equal(mask, wantMask):
					case c.Stops && stoppedBefore(mask, wantMask):
						stopped++
					default:
						t.Fatalf("conversation %d: mask\n%v\ntransformers\n%v", row, mask, wantMask)
					}
				}
				row++
			}
			if row != len(convs) {
				t.Fatalf("%d outcomes recorded for %d conversations", row, len(convs))
			}
			t.Logf("%d conversations as transformers renders them, %d refused as it refuses them, %d marked on where it stops", row, refused, stopped)
		})
	}
}

// stoppedBefore says whether want is mask up to a token where transformers
// stopped marking: equal before it, nothing marked from it on.
func stoppedBefore(mask, want []uint8) bool {
	i := 0
	for i < len(mask) && i < len(want) && mask[i] == want[i] {
		i++
	}
	return len(mask) == len(want) && i < len(mask) && mask[i] == 1 && !slices.Contains(want[i:], 1)
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// One parsed template and tokenizer serve a sidecar's workers at once: from
// several goroutines each conversation renders and tokenizes as it does
// alone (the race pass runs this; the record above runs one goroutine a
// template and is skipped there).
func TestOneTemplateRendersFromManyGoroutines(t *testing.T) {
	cases, convs := chatRecord(t)
	convs = convs[:min(80, len(convs))]
	for _, c := range cases[:min(3, len(cases))] {
		t.Run(c.Name, func(t *testing.T) {
			tk, tpl, vars := c.load(t)
			outcome := func(conv []any) string {
				text, spans, err := tpl.Render(conv, vars)
				if err != nil {
					return "error: " + err.Error()
				}
				ids, mask, err := chat.Tokenize(tk, text, spans)
				if err != nil {
					return "error: " + err.Error()
				}
				return fmt.Sprintf("%s %v", hashOf(text, ids), mask)
			}
			want := make([]string, len(convs))
			for i, conv := range convs {
				want[i] = outcome(conv)
			}
			var wg sync.WaitGroup
			errs := make(chan string, 4)
			for g := range 4 {
				wg.Go(func() {
					for k := range convs {
						i := (k + g*len(convs)/4) % len(convs)
						if got := outcome(convs[i]); got != want[i] {
							errs <- fmt.Sprintf("conversation %d from goroutine %d: %s, alone %s", i, g, got, want[i])
							return
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for e := range errs {
				t.Error(e)
			}
		})
	}
}
