#!/bin/sh
# ZooKeeper in the background, then the broker as PID 1 (so SIGSTOP/SIGKILL reach it).
set -eu
mkdir -p /data/zk
printf 'tickTime=500\ndataDir=/data/zk\nclientPort=2181\nadmin.enableServer=false\n4lw.commands.whitelist=srvr\n' > /data/zoo.cfg
/opt/hiwater/docker/node/entrypoint.sh zookeeper > /data/zookeeper.out 2>&1 &
python - <<'PY'
import time
from broker.runtime.zkserver import four_letter_word
for _ in range(600):
    try:
        if "Mode: standalone" in four_letter_word("127.0.0.1", 2181, "srvr"):
            break
    except OSError:
        pass
    time.sleep(0.2)
PY
echo "single-node broker ${SINGLE_NAME:-?} advertised as ${SINGLE_ADVERTISED:-?}"
exec python -m broker.runtime.main --config /data/server.properties
