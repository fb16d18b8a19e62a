# infergate's container image: the release binary on Debian's slim base (glibc and libgcc, which
# the binary links, from the same Debian release the build stage uses), running as the non-root
# user 65532.
#
#     docker build -t infergate:0.1.0 .
#
# The image's one command is infergate; the Helm chart (deploy/helm/infergate) passes `serve` or
# `extproc` and the listen addresses as arguments. Written without a Docker daemon at hand, so
# this file has not been built yet: the first `docker build` is its test.

# The toolchain is pinned so that a rebuild of the same commit compiles with the same compiler;
# the workspace's rust-version is only the floor.
FROM rust:1.95-slim-bookworm AS build
WORKDIR /src
COPY . .
# The caches (crates downloaded, objects compiled) outlive the build, so a rebuild after a small
# change recompiles only what changed. A cached target/ is not part of the image's layers, which
# is why the binary is copied out of it in the same step.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p infergate \
    && cp target/release/infergate /usr/local/bin/infergate

FROM debian:bookworm-slim
COPY --from=build /usr/local/bin/infergate /usr/local/bin/infergate
# Numeric, so the kubelet can check runAsNonRoot against it without reading the image's
# /etc/passwd.
USER 65532:65532
# The gateway's HTTP and admin ports (`serve`); the endpoint picker's 9002 and 9003 are set by
# its flags and declared by the chart.
EXPOSE 8080 9090
ENTRYPOINT ["/usr/local/bin/infergate"]
