package server

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/store/storetest"
)

// seedBilling creates a project with a plan of 10 features, 1,000 subjects each with an active
// subscription to it and two grants (one expired), and returns the project and its first
// environment.
func seedBilling(b *testing.B, st *store.Store) (projectID, envID string) {
	b.Helper()
	ctx := context.Background()
	err := st.InTx(ctx, func(tx *store.Tx) error {
		u := store.User{Name: "Owner", Email: fmt.Sprintf("owner-%d@example.com", time.Now().UnixNano())}
		org := store.Organization{Name: "Bench", Slug: fmt.Sprintf("bench-%d", time.Now().UnixNano())}
		p := store.Project{Name: "Shop", Slug: "shop"}
		if err := storetest.CreateOwnedProject(ctx, tx, &u, "!", &org, &p); err != nil {
			return err
		}
		projectID, envID = p.ID, p.Environments[0].ID
		ents := map[string]any{}
		for i := range 10 {
			ents[fmt.Sprintf("feature-%d", i)] = i%2 == 0
		}
		if err := tx.CreatePlan(ctx, &store.Plan{ProjectID: p.ID, Key: "pro", Name: "Pro", Currency: "usd",
			Interval: store.IntervalMonth, Entitlements: ents}); err != nil {
			return err
		}
		past := time.Now().Add(-time.Hour)
		for i := range 1000 {
			subject := fmt.Sprintf("usr_bench_%04d", i)
			if _, _, err := tx.ApplySubscription(ctx, store.Subscription{ProjectID: p.ID, EnvironmentID: envID,
				ProcessorID: "sub_" + subject, SubjectID: subject, PlanKey: "pro", Status: store.StatusActive, EventCreated: time.Now()}); err != nil {
				return err
			}
			for _, g := range []store.EntitlementGrant{{FeatureKey: "seats", Value: 5}, {FeatureKey: "beta", Value: true, ExpiresAt: &past}} {
				g.ProjectID, g.SubjectID, g.ActorType = p.ID, subject, store.ActorSystem
				if err := tx.CreateEntitlementGrant(ctx, &g); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return projectID, envID
}

// BenchmarkSubjectEntitlements measures store.SubjectEntitlements, behind GET …/entitlements and
// the OAuth entitlements claim, cycling through 1,000 subscribed subjects.
func BenchmarkSubjectEntitlements(b *testing.B) {
	for _, be := range benchBackends(b) {
		b.Run(be.name, func(b *testing.B) {
			st := be.open(b)
			projectID, _ := seedBilling(b, st)
			ctx := context.Background()
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				ents, err := st.SubjectEntitlements(ctx, projectID, fmt.Sprintf("usr_bench_%04d", i%1000), "", st.Now())
				if err != nil || len(ents) != 11 {
					b.Fatalf("%d entitlements, %v", len(ents), err)
				}
			}
		})
	}
}

// BenchmarkWebhookApply measures one webhook event's transaction: the dedupe row and a
// subscription update (a new event id each time).
func BenchmarkWebhookApply(b *testing.B) {
	for _, be := range benchBackends(b) {
		b.Run(be.name, func(b *testing.B) {
			st := be.open(b)
			projectID, envID := seedBilling(b, st)
			ctx := context.Background()
			t0 := time.Now()
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				subject := fmt.Sprintf("usr_bench_%04d", i%1000)
				err := st.InTx(ctx, func(tx *store.Tx) error {
					fresh, err := tx.RecordProcessorEvent(ctx, envID, fmt.Sprintf("evt_bench_%d", i), "customer.subscription.updated", t0)
					if err != nil || !fresh {
						return fmt.Errorf("record event: %v %v", fresh, err)
					}
					_, _, err = tx.ApplySubscription(ctx, store.Subscription{ProjectID: projectID, EnvironmentID: envID,
						ProcessorID: "sub_" + subject, Status: store.StatusActive, EventCreated: t0.Add(time.Duration(i+1) * time.Second)})
					return err
				})
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
