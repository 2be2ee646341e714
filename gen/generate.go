// Package gen is generated from ../openapi/openapi.yaml by oapi-codegen: the echo strict-server
// interface and the wire types. Never edit api.gen.go by hand; run `make generate`.
package gen

//go:generate go run github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen -config config.yaml ../openapi/openapi.yaml
//go:generate go run ../openapi/snapshot -origin=${PRODUCTION_ORIGIN} -o ../openapi/openapi.json
