# outbox-bridge on Debian bookworm, built from the same Debian packages as tools/ install.
FROM debian:bookworm AS build
RUN apt-get update && apt-get install -y --no-install-recommends \
      g++ meson ninja-build pkg-config python3 \
      libnats-dev libmariadb-dev libsimdjson-dev libfmt-dev libspdlog-dev \
      libtomlplusplus-dev libcli11-dev libssl-dev libjemalloc-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN meson setup /build --buildtype=release -Dtests=false && ninja -C /build -j2

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends \
      libnats3.4 libmariadb3 libsimdjson14 libfmt9 libspdlog1.10 libtomlplusplus3 libssl3 libjemalloc2 ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 outbox
COPY --from=build /build/src/outbox-bridge /build/tools/outbox-demo-producer /build/tools/outbox-stream-dump /usr/local/bin/
COPY sql/demo /etc/outbox-bridge/demo
USER outbox
ENTRYPOINT ["outbox-bridge"]
CMD ["run", "--config", "/etc/outbox-bridge/demo/demo.toml"]
