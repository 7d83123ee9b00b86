package state

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"
)

// An image's answer survives a save and a load, SetImage is safe from
// parallel steps, and ImagesChanged says when a save is owed.
func TestImagesRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	s, err := New("p")
	if err != nil {
		t.Fatal(err)
	}
	if s.ImagesChanged() {
		t.Fatal("a new state has no image answers to save")
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.SetImage(fmt.Sprintf("sha256:%064d", i), Image{Answer: json.RawMessage(`{"version":"0.11.0","names":["LlamaForCausalLM"]}`), Seconds: 4.5,
				CheckedAt: time.Date(2026, 12, 1, 21, 0, 0, 5e8, time.FixedZone("x", 3600))})
		}()
	}
	wg.Wait()
	if !s.ImagesChanged() {
		t.Fatal("ImagesChanged is false after SetImage")
	}
	if err := s.Save(path); err != nil {
		t.Fatal(err)
	}
	if s.ImagesChanged() {
		t.Fatal("ImagesChanged is still true after Save")
	}
	back, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := back.Image(fmt.Sprintf("sha256:%064d", 3))
	var answer struct {
		Version string   `json:"version"`
		Names   []string `json:"names"`
	}
	if err := json.Unmarshal(got.Answer, &answer); err != nil || answer.Version != "0.11.0" || !reflect.DeepEqual(answer.Names, []string{"LlamaForCausalLM"}) {
		t.Fatalf("answer %s: %+v, %v", got.Answer, answer, err)
	}
	if !ok || got.Seconds != 4.5 || !got.CheckedAt.Equal(time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC)) {
		t.Fatalf("Image = %+v, %v", got, ok)
	}
	if len(back.Images) != 8 {
		t.Fatalf("%d images after load, want 8", len(back.Images))
	}
}

// TestImageEntryKeepsTheAnswerFlat: an image's entry in the state file is
// the kind's answer's fields, in their order, then the state's own; read
// back and written again, it is the same bytes (the state's own fields
// are not repeated from the answer).
func TestImageEntryKeepsTheAnswerFlat(t *testing.T) {
	im := Image{Answer: json.RawMessage(`{"vllm":"0.11.0","architectures":["A"],"unchecked":""}`), Refs: []string{"img:1"}, Seconds: 2,
		CheckedAt: time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC)}
	b, err := json.Marshal(im)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"vllm":"0.11.0","architectures":["A"],"unchecked":"","refs":["img:1"],"seconds":2,"checked_at":"2026-12-01T20:00:00Z"}`
	if string(b) != want {
		t.Fatalf("entry %s, want %s", b, want)
	}
	var back Image
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	again, err := json.Marshal(back)
	if err != nil || string(again) != want {
		t.Errorf("written again: %s, %v", again, err)
	}
	if _, err := json.Marshal(Image{Answer: json.RawMessage(`[1]`)}); err == nil {
		t.Error("an answer that is no object was written")
	}
}
