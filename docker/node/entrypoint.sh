#!/bin/sh
# Roles of the hiwater node image. The runtime (harness/runtime/docker.py) writes each node's
# configuration into its bind-mounted /data before the container starts.
set -eu
role="${1:-broker}"
case "$role" in
  broker)
    exec python -m broker.runtime.main --config /data/server.properties ;;
  zookeeper)
    mkdir -p /data/zk
    export JMXDISABLE=true SERVER_JVMFLAGS="-Xmx${ZK_HEAP_MB:-256}m" ZOO_LOG_DIR=/data \
      ZOO_LOG4J_PROP="INFO,CONSOLE"
    exec /usr/share/zookeeper/bin/zkServer.sh start-foreground /data/zoo.cfg ;;
  proxy)
    exec python -m nemesis.toxiproxy --listen "0.0.0.0:${TOXIPROXY_PORT:-8474}" \
      --allow-non-loopback --log-level "${LOG_LEVEL:-warning}" ;;
  *)
    exec "$@" ;;
esac
