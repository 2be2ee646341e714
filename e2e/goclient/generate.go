// Package goclient is oapi-codegen's Go client for Gatehouse, generated from the committed
// snapshot ../../openapi/openapi.json as a user of the API would generate it. Only the
// end-to-end tests use it. Never edit client.gen.go by hand; run `make generate`.
package goclient

//go:generate go run github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen -config config.yaml ../../openapi/openapi.json
