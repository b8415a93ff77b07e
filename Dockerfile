# syntax=docker/dockerfile:1
# The programs' images, one target per program:
#   docker build --target api -t seckill/api .
# (order-writer, cache-invalidator, seckillctl likewise; the compose
# profile "system" in deploy/docker-compose.yml builds and runs them all).
# The final stages are deploy/image/Containerfile's, which `make image`
# builds with podman from binaries built on the host when no registry is
# reachable: static binaries on scratch, a non-root user, nothing else.

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN mkdir -p bin/static bin/state && for p in api order-writer cache-invalidator seckillctl; do \
      CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o bin/static/$p ./cmd/$p || exit 1; \
    done

FROM scratch AS runtime
COPY deploy/image/passwd deploy/image/group /etc/
USER 65532:65532

FROM runtime AS api
COPY --from=build /src/bin/static/api /app
ENV SECKILL_API_ADDR=:8081
EXPOSE 8081
ENTRYPOINT ["/app"]

FROM runtime AS order-writer
COPY --from=build /src/bin/static/order-writer /app
ENTRYPOINT ["/app"]

FROM runtime AS cache-invalidator
COPY --from=build /src/bin/static/cache-invalidator /app
COPY --from=build --chown=65532:65532 /src/bin/state/ /state/
ENTRYPOINT ["/app"]

FROM runtime AS seckillctl
COPY --from=build /src/bin/static/seckillctl /app
ENTRYPOINT ["/app"]
