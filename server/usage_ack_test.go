package server

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/gatehouse-dev/gatehouse/gen"
)

// TestUsageAckEncoding: usageAckBody writes the same status, Content-Type and bytes as the
// generated responses it replaces, for ordinary ids and for ids that need escaping.
func TestUsageAckEncoding(t *testing.T) {
	for _, id := range []string{"uev_01JD3Q8Z7X", "", `quote" back\ <tag> & ` + "\u2028 é \x01"} {
		for _, duplicate := range []bool{false, true} {
			want := httptest.NewRecorder()
			ack := gen.UsageEventAck{Accepted: !duplicate, Duplicate: duplicate, Id: id}
			var err error
			if duplicate {
				err = gen.IngestUsageEvent200JSONResponse{Data: ack}.VisitIngestUsageEventResponse(want)
			} else {
				err = gen.IngestUsageEvent201JSONResponse{Data: ack}.VisitIngestUsageEventResponse(want)
			}
			if err != nil {
				t.Fatal(err)
			}
			got := httptest.NewRecorder()
			if err := (usageAckBody{id: id, duplicate: duplicate}).VisitIngestUsageEventResponse(got); err != nil {
				t.Fatal(err)
			}
			if got.Code != want.Code || got.Header().Get("Content-Type") != "application/json" ||
				!bytes.Equal(got.Body.Bytes(), want.Body.Bytes()) || !json.Valid(got.Body.Bytes()) {
				t.Errorf("id %q duplicate %v: got %d %q, want %d %q", id, duplicate, got.Code, got.Body, want.Code, want.Body)
			}
		}
	}
}
