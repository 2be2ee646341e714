package usagegen

import (
	"slices"
	"testing"
)

// collect returns the event numbers of each chunk.
func collect(chunks []func(func(int))) [][]int {
	out := make([][]int, len(chunks))
	for c, chunk := range chunks {
		out[c] = []int{}
		chunk(func(i int) { out[c] = append(out[c], i) })
	}
	return out
}

func TestSubjectChunksLiteral(t *testing.T) {
	// 10 events over 3 subjects: 7919 ≡ 2 (mod 3), whose inverse is 2, so subject 0 has events
	// 0, 3, 6, 9; subject 1 (first event 1·2 mod 3 = 2) has 2, 5, 8; subject 2 (2·2 mod 3 = 1)
	// has 1, 4, 7. Chunks of about 4 events hold one subject each.
	got := collect(subjectChunks(Spec{Events: 10, Subjects: 3}, 4))
	want := [][]int{{0, 3, 6, 9}, {2, 5, 8}, {1, 4, 7}}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("chunks = %v, want %v", got, want)
	}
	// Fewer events than subjects: cut by event number.
	got = collect(subjectChunks(Spec{Events: 5, Subjects: 10}, 2))
	want = [][]int{{0, 1}, {2, 3}, {4}}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("chunks = %v, want %v", got, want)
	}
}

// TestSubjectChunksCoverEveryEvent checks that the chunks are a partition of the event numbers,
// that a chunk holds whole subjects (each subject's events in one chunk) and that chunks stay
// near their size.
func TestSubjectChunksCoverEveryEvent(t *testing.T) {
	for _, spec := range []Spec{
		{Events: 100_000, Subjects: 500},
		{Events: 99_991, Subjects: 1_237},
		{Events: 50_000, Subjects: 2 * subjectStep}, // no inverse: cut by event number
		{Events: 7, Subjects: 1},
	} {
		spec.Environments, spec.ProjectID, spec.Days = []string{"env"}, "prj", 90
		seen := make([]int, spec.Events)
		chunkOf := map[string]int{}
		for c, chunk := range collect(subjectChunks(spec, 2_000)) {
			if len(chunk) > 2*2_000 {
				t.Errorf("%+v: chunk %d has %d events", spec, c, len(chunk))
			}
			for _, i := range chunk {
				seen[i]++
				if spec.Subjects%subjectStep == 0 {
					continue
				}
				subject := spec.Event(i).SubjectID
				if prev, ok := chunkOf[subject]; ok && prev != c {
					t.Fatalf("%+v: subject %s in chunks %d and %d", spec, subject, prev, c)
				}
				chunkOf[subject] = c
			}
		}
		for i, n := range seen {
			if n != 1 {
				t.Fatalf("%+v: event %d in %d chunks", spec, i, n)
			}
		}
	}
}

func TestModInverse(t *testing.T) {
	for _, c := range []struct{ a, m, want int }{{7919, 3, 2}, {3, 7, 5}, {7919, 50_000, 0}} {
		got, ok := modInverse(c.a, c.m)
		if c.want == 0 {
			// 7919·x ≡ 1 (mod 50,000): checked by multiplication rather than written out.
			if !ok || c.a*got%c.m != 1 {
				t.Errorf("modInverse(%d, %d) = %d, %v", c.a, c.m, got, ok)
			}
			continue
		}
		if !ok || got != c.want {
			t.Errorf("modInverse(%d, %d) = %d, %v; want %d", c.a, c.m, got, ok, c.want)
		}
	}
	if _, ok := modInverse(7919, 2*7919); ok {
		t.Error("modInverse(7919, 15838) has no inverse")
	}
}
