package store_test

import (
	"testing"

	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

func TestConformance(t *testing.T) {
	for _, b := range storetest.Backends(t) {
		t.Run(b.Name, func(t *testing.T) { storetest.Run(t, b.Open) })
	}
}
