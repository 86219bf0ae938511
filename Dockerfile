# The proxy and the loader, built from source: a builder with the Rust toolchain and a C
# compiler (aws-lc-sys, the TLS provider, compiles C), then small runtime images that run as a
# non-root user. From the repository root:
#
#   docker build --target proxy  -t proxy:latest  --build-arg PROXY_COMMIT=$(git rev-parse --short=12 HEAD) .
#   docker build --target loader -t loader:latest .
#
# .dockerignore leaves target/ (gigabytes) and .git out of the context; PROXY_COMMIT gives
# proxy_build_info its commit ("unknown" without it). The kernel is the host's: io_uring needs
# a seccomp profile that allows it (Docker's, containerd's and podman's defaults refuse it, and
# the binaries then run on epoll, as their start-up line says). scripts/container-check.sh
# builds this file and runs both images (docs/OPERATIONS.md, "Checking the image and the unit").

ARG RUST_VERSION=1
ARG DEBIAN=bookworm

FROM rust:${RUST_VERSION}-${DEBIAN} AS builder
# The rust image has gcc, make and the C headers aws-lc-sys needs; nothing else is installed.
WORKDIR /src
COPY . .
ARG PROXY_COMMIT=unknown
ENV PROXY_COMMIT=${PROXY_COMMIT}
RUN cargo build --release --locked -p proxy -p loader \
 && install -D -m 755 target/release/proxy target/release/loader -t /out

FROM debian:${DEBIAN}-slim AS runtime
# CA certificates: the loader's https:// URLs and the proxy's TLS upstreams verify against
# the system store by default.
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 65532 nonroot \
 && useradd --system --uid 65532 --gid 65532 --no-create-home --shell /usr/sbin/nologin nonroot
USER 65532:65532

FROM runtime AS loader
COPY --from=builder /out/loader /usr/local/bin/loader
ENTRYPOINT ["/usr/local/bin/loader"]

FROM runtime AS proxy
COPY --from=builder /out/proxy /usr/local/bin/proxy
COPY scripts/systemd/proxy.toml /etc/proxy/proxy.toml
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/proxy"]
CMD ["--config", "/etc/proxy/proxy.toml"]
