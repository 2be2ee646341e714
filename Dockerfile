# syntax=docker/dockerfile:1
# Gatehouse in a container: docker build -t gatehouse --build-arg VERSION=$(git describe --tags --always) \
#   --build-arg COMMIT=$(git rev-parse HEAD) . && docker run -p 8080:8080 -v gatehouse-data:/data gatehouse
#
# The builder runs `make build` (the same inputs as make build and make release: npm ci for the
# embedded bundles, then a static go build), so the image embeds what every other build embeds.

ARG GO_VERSION=1.26.8
ARG NODE_VERSION=20

FROM node:${NODE_VERSION}-bookworm-slim AS node

FROM golang:${GO_VERSION}-bookworm AS build
# Node and npm for `make assets`, from the official Node image (the golang image has neither).
COPY --from=node /usr/local/bin/node /usr/local/bin/node
COPY --from=node /usr/local/lib/node_modules /usr/local/lib/node_modules
RUN ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm \
 && ln -s ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx
# rsync: make console copies the console build into the embed folder with it.
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends rsync >/dev/null && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund --loglevel=error && printf 'module ignore\n' > node_modules/go.mod \
 && touch node_modules/.package-lock.json
COPY . .
ARG VERSION=dev
ARG COMMIT=
# modernc SQLite is pure Go: the binary is static and runs on distroless/static.
RUN CGO_ENABLED=0 GOFLAGS=-trimpath make build BIN=/out/gatehouse VERSION="${VERSION}" COMMIT="${COMMIT}" \
 && mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/gatehouse /usr/local/bin/gatehouse
# /data holds the SQLite database and, without GATEHOUSE_SECRET_KEY, the generated key file:
# owned by the image's non-root user (65532), and a volume so it outlives the container.
COPY --from=build --chown=65532:65532 /out/data /data
VOLUME ["/data"]
ENV GATEHOUSE_LISTEN_ADDR=:8080 \
    GATEHOUSE_DATA_DIR=/data \
    GATEHOUSE_LOG_FORMAT=json
# Set GATEHOUSE_BASE_URL to the origin browsers use, and for production GATEHOUSE_SECRET_KEY
# and GATEHOUSE_DATABASE_URL (docs/configuration.md lists every variable).
EXPOSE 8080
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/gatehouse"]
CMD ["serve"]
