package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/stripe/stripe-go/v84"

	"github.com/gatehouse-dev/gatehouse/gen"
	"github.com/gatehouse-dev/gatehouse/store"
)

// Checkout idempotency problems.
var (
	errIdempotencyMismatch   = Conflict("Idempotency key already used with a different request")
	errIdempotencyInProgress = Conflict("A request with this idempotency key is in progress")
	errProcessorFailed       = &Error{Status: http.StatusBadGateway, Kind: kindBadGateway, Title: "The payment processor refused the request"}
)

// Metadata keys Gatehouse sets on Checkout Sessions (and their subscriptions and payment
// intents); the webhook reads them back.
const (
	metaProject     = "project_id"
	metaEnvironment = "environment_id"
	metaSubject     = "subject_id"
	metaPlan        = "plan_key"
)

// stripeTimeout bounds one Stripe API call; it is well below store.CheckoutReservationTimeout.
const stripeTimeout = 30 * time.Second

// stripeClient is a Stripe client for one request, with the environment's secret key, over
// the configured API base and HTTP client. stripe-go's logger is silenced: its lines would go
// to stderr outside the service's log.
func (s *Server) stripeClient(secretKey string) *stripe.Client {
	httpClient := s.cfg.StripeHTTPClient
	if httpClient == nil {
		httpClient = &http.Client{Timeout: stripeTimeout}
	}
	backends := stripe.NewBackendsWithConfig(&stripe.BackendConfig{
		URL:           stripe.String(s.cfg.StripeAPIBase),
		HTTPClient:    httpClient,
		LeveledLogger: &stripe.LeveledLogger{Level: stripe.LevelNull},
	})
	return stripe.NewClient(secretKey, stripe.WithBackends(backends))
}

// CreateCheckout starts a Stripe Checkout Session, idempotently per (project, idempotency-key):
// the key is reserved in its own transaction before Stripe is called, so concurrent requests
// with one key make one Stripe call; see the spec for the answers to replays.
func (s *Server) CreateCheckout(ctx context.Context, req gen.CreateCheckoutRequestObject) (gen.CreateCheckoutResponseObject, error) {
	b := *req.Body
	projectID, key := req.ProjectId, req.Params.IdempotencyKey
	if err := s.checkReturnURLs(b); err != nil {
		return nil, err
	}
	env, err := s.store.Environment(ctx, b.EnvironmentId)
	if err != nil || env.ProjectID != projectID {
		if err == nil || errors.Is(err, store.ErrNotFound) {
			return nil, ErrNotFound
		}
		return nil, err
	}
	plan, err := s.store.PlanByKey(ctx, projectID, b.PlanKey)
	if err != nil {
		return nil, err // ErrNotFound: 404
	}
	if plan.ArchivedAt != nil {
		return nil, Conflict("The plan is archived")
	}
	price := plan.PriceIDs[env.ID]
	if price == "" {
		return nil, errPlanNoPrice
	}
	conn, err := s.store.ProcessorConnection(ctx, env.ID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, errNotConnected
	}
	if err != nil {
		return nil, err
	}

	canonical, err := json.Marshal(b)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(canonical)
	hash := hex.EncodeToString(sum[:])
	var prior store.CheckoutRequest
	var reserved bool
	if err := s.store.InTx(ctx, func(tx *store.Tx) error {
		prior, reserved, err = tx.ReserveCheckout(ctx, projectID, key, hash)
		return err
	}); err != nil {
		return nil, err
	}
	if !reserved {
		switch {
		case prior.RequestHash != hash:
			return nil, errIdempotencyMismatch
		case prior.Response == nil:
			return nil, errIdempotencyInProgress
		}
		var out gen.Checkout
		if err := json.Unmarshal([]byte(*prior.Response), &out); err != nil {
			return nil, fmt.Errorf("server: stored checkout response: %w", err)
		}
		return gen.CreateCheckout201JSONResponse{Data: out}, nil
	}

	out, err := s.createCheckoutSession(ctx, conn, plan, price, b, key)
	// From here on the reservation is released or completed even when the client has gone
	// away: with the request's context, a disconnect would leave the key "in progress" until
	// store.CheckoutReservationTimeout. detached keeps the request's values (scope, request id).
	detached := context.WithoutCancel(ctx)
	if err != nil {
		// Free the key so that a retry calls Stripe again (with the same idempotency key).
		if rerr := s.store.InTx(detached, func(tx *store.Tx) error {
			return tx.ReleaseCheckout(detached, projectID, key)
		}); rerr != nil {
			return nil, errors.Join(err, rerr)
		}
		return nil, err
	}
	body, err := json.Marshal(out)
	if err != nil {
		return nil, err
	}
	err = s.store.InTx(detached, func(tx *store.Tx) error {
		if err := tx.CompleteCheckout(detached, projectID, key, string(body)); err != nil {
			return err
		}
		return s.auditBilling(detached, tx, "billing.checkout", "checkout_session", out.Id,
			map[string]any{"environmentId": env.ID, "subjectId": b.SubjectId, "planKey": plan.Key})
	})
	if err != nil {
		return nil, err
	}
	return gen.CreateCheckout201JSONResponse{Data: out}, nil
}

// createCheckoutSession makes the one Stripe call of a checkout. A Stripe error is a 502 whose
// title says nothing of the key; its details go to the log.
func (s *Server) createCheckoutSession(ctx context.Context, conn store.ProcessorConnection, plan store.Plan, price string, b gen.CheckoutCreate, idempotencyKey string) (gen.Checkout, error) {
	secret, err := s.keyring.Open(conn.SecretKey, store.ProcessorSecretKeyAAD(conn.EnvironmentID))
	if err != nil {
		return gen.Checkout{}, fmt.Errorf("server: open processor secret key of %s: %w", conn.EnvironmentID, err)
	}
	metadata := map[string]string{metaProject: plan.ProjectID, metaEnvironment: conn.EnvironmentID,
		metaSubject: b.SubjectId, metaPlan: plan.Key}
	params := &stripe.CheckoutSessionCreateParams{
		SuccessURL:        stripe.String(b.SuccessUrl),
		CancelURL:         stripe.String(b.CancelUrl),
		ClientReferenceID: stripe.String(b.SubjectId),
		LineItems:         []*stripe.CheckoutSessionCreateLineItemParams{{Price: stripe.String(price), Quantity: stripe.Int64(1)}},
	}
	params.Metadata = metadata
	if plan.Interval == store.IntervalOneTime {
		params.Mode = stripe.String(string(stripe.CheckoutSessionModePayment))
		params.PaymentIntentData = &stripe.CheckoutSessionCreatePaymentIntentDataParams{Metadata: metadata}
	} else {
		params.Mode = stripe.String(string(stripe.CheckoutSessionModeSubscription))
		params.SubscriptionData = &stripe.CheckoutSessionCreateSubscriptionDataParams{Metadata: metadata}
	}
	params.SetIdempotencyKey(idempotencyKey)
	sess, err := s.stripeClient(string(secret)).V1CheckoutSessions.Create(ctx, params)
	if err != nil {
		var se *stripe.Error
		if errors.As(err, &se) {
			s.log.WarnContext(ctx, "stripe refused a checkout session", "status", se.HTTPStatusCode, "type", se.Type,
				"code", se.Code, "stripe_request_id", se.RequestID, "request_id", RequestID(ctx))
		} else {
			s.log.WarnContext(ctx, "stripe checkout session failed", "err", err, "request_id", RequestID(ctx))
		}
		return gen.Checkout{}, errProcessorFailed
	}
	return gen.Checkout{Id: sess.ID, Url: sess.URL, ExpiresAt: time.Unix(sess.ExpiresAt, 0).UTC(),
		Status: string(sess.Status), EnvironmentId: conn.EnvironmentID, SubjectId: b.SubjectId, PlanKey: plan.Key}, nil
}

// checkReturnURLs requires successUrl and cancelUrl on the base URL's origin or a trusted
// product origin (GATEHOUSE_TRUSTED_ORIGINS), as the CORS and cookie checks do.
func (s *Server) checkReturnURLs(b gen.CheckoutCreate) error {
	var errs []FieldError
	for _, f := range []struct{ name, value string }{{"successUrl", b.SuccessUrl}, {"cancelUrl", b.CancelUrl}} {
		if !s.allowedReturnURL(f.value) {
			errs = append(errs, FieldError{Path: []string{"body", f.name},
				Message: "must be on the base URL's origin or a trusted origin"})
		}
	}
	if len(errs) > 0 {
		return Validation(errs...)
	}
	return nil
}

func (s *Server) allowedReturnURL(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil || u.User != nil || u.Host == "" || u.Opaque != "" {
		return false
	}
	origin, err := NormalizeOrigin(u.Scheme + "://" + u.Host)
	if err != nil {
		return false
	}
	return origin == s.cfg.BaseURL || slices.Contains(s.cfg.TrustedOrigins, origin)
}
