package state

import (
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
			s.SetImage(fmt.Sprintf("sha256:%064d", i), Image{VLLM: "0.11.0", Architectures: []string{"LlamaForCausalLM"}, Seconds: 4.5,
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
	want := Image{VLLM: "0.11.0", Architectures: []string{"LlamaForCausalLM"}, Seconds: 4.5, CheckedAt: time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC)}
	if !ok || !reflect.DeepEqual(got, want) {
		t.Fatalf("Image = %+v, %v; want %+v", got, ok, want)
	}
	if len(back.Images) != 8 {
		t.Fatalf("%d images after load, want 8", len(back.Images))
	}
}
