"""Start Milvus 2.3.5 standalone (the C++ server in the PyPI package ``milvus``) on loopback ports.

    python scripts/milvus_standalone.py --port 26530            # runs until Ctrl-C / SIGTERM
    python scripts/milvus_standalone.py --port 26530 --pid-file milvus.pid   # the server's PID

Every component registers on 127.0.0.1 (``<component>.ip``); the embedded etcd reads a config of
its own (``etcd.config.path``) that listens and advertises on loopback; the metrics/health port is
pinned. Ports are ``--port`` (the gRPC proxy: ``MILVUS_URI=http://127.0.0.1:<port>``) and the next
eleven. Data lives in ``--data-dir`` (a temporary folder by default, removed on exit).

The package is a development extra (``pip install -e '.[milvus-server]'``): Milvus 2.3 has no sparse
vectors, BM25 function nor ``hybrid_search``, so agentkb gives it a dense-only collection and its
embedded lexical index (``knowledge.milvus_capabilities``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

# proxy port + offset for each of the server's own listeners
_OFFSETS = {
    "proxy_internal_port": 1,
    "root_coord_port": 2,
    "query_coord_port": 3,
    "query_node_port": 4,
    "index_coord_port": 5,
    "index_node_port": 6,
    "data_coord_port": 7,
    "data_node_port": 8,
    "etcd_port": 9,
}
_ETCD_PEER_OFFSET = 10
_METRICS_OFFSET = 11
_COMPONENTS = ("rootCoord", "proxy", "queryCoord", "queryNode", "indexNode", "dataCoord", "dataNode")


def _loopback_template(template: str, etcd_config: Path) -> str:
    """The package's config template with every component on 127.0.0.1 and etcd's own config."""
    lines, section = [], ""
    for line in template.splitlines():
        if line and not line.startswith((" ", "#")) and line.rstrip().endswith(":"):
            section = line.strip().rstrip(":")
        if section in _COMPONENTS and line.startswith("  ip:"):
            line = "  ip: 127.0.0.1"
        line = line.replace("localhost:{{", "127.0.0.1:{{")
        lines.append(line)
        if section == "etcd" and line.startswith("    embed: true"):
            lines += ["  config:", f"    path: {etcd_config}"]
    return "\n".join(lines) + "\n"


def _etcd_config(data_dir: Path, client_port: int, peer_port: int) -> str:
    client, peer = f"http://127.0.0.1:{client_port}", f"http://127.0.0.1:{peer_port}"
    return (
        "name: agentkb-milvus\n"
        f"data-dir: {data_dir / 'data' / 'etcd.data'}\n"
        f"listen-client-urls: {client}\nadvertise-client-urls: {client}\n"
        f"listen-peer-urls: {peer}\ninitial-advertise-peer-urls: {peer}\n"
        f"initial-cluster: agentkb-milvus={peer}\n"
    )


# What the server process keeps of the caller's environment. Milvus reads its own configuration
# from environment variables named after its keys (``log.level`` <- ``LOG_LEVEL``, ...), so a
# variable of agentkb's own with the same name (LOG_LEVEL=WARNING, not a level Milvus knows) made
# the server panic at start ("initialize logger error") while the starter waited for it.
_KEPT_ENVIRONMENT = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "TZ", "LD_LIBRARY_PATH")


def start(port: int, data_dir: Path):
    """A started ``milvus.MilvusServer`` (its ``server_proc`` is the server's process)."""
    try:
        import milvus
    except ImportError:
        sys.exit("the package 'milvus' is missing: pip install -e '.[milvus-server]' (milvus==2.3.5)")
    data_dir.mkdir(parents=True, exist_ok=True)
    etcd_config = data_dir / "etcd.yaml"
    etcd_config.write_text(_etcd_config(data_dir, port + _OFFSETS["etcd_port"], port + _ETCD_PEER_OFFSET))
    package_template = Path(milvus.__file__).parent / "data" / "config.yaml.template"
    template = data_dir / "config.yaml.template"
    template.write_text(_loopback_template(package_template.read_text(encoding="utf-8"), etcd_config))
    ports = {name: port + offset for name, offset in _OFFSETS.items()}
    config = milvus.MilvusServerConfig(
        template=str(template), data_dir=str(data_dir), proxy_port=port, **ports
    )
    # The package sets its glog config only when it reads its own template.
    config.glog_conf_file = str(package_template.parent / "glog.conf")
    kept = {name: os.environ[name] for name in _KEPT_ENVIRONMENT if name in os.environ}
    os.environ.clear()  # MilvusServer.start hands the server a copy of this process's environment
    os.environ.update(kept)
    server = milvus.MilvusServer(config)
    server.webservice_port = port + _METRICS_OFFSET
    server.start()
    if server.webservice_port != port + _METRICS_OFFSET:
        server.stop()
        raise RuntimeError(f"metrics port {port + _METRICS_OFFSET} is taken")
    return server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--port", type=int, default=int(os.environ.get("MILVUS_PORT", "19530")))
    parser.add_argument("--data-dir", type=Path, help="kept on exit (default: a temporary folder, removed)")
    parser.add_argument("--pid-file", type=Path, help="where to write the server's PID")
    args = parser.parse_args(argv)
    temporary = args.data_dir is None
    data_dir = Path(tempfile.mkdtemp(prefix="milvus-standalone-")) if temporary else args.data_dir
    started = time.perf_counter()
    server = start(args.port, data_dir)
    pid = server.server_proc.pid
    if args.pid_file:
        args.pid_file.write_text(f"{pid}\n")
    print(
        f"Milvus 2.3.5 standalone: MILVUS_URI=http://127.0.0.1:{args.port} (PID {pid}, "
        f"started in {time.perf_counter() - started:.1f} s, data in {data_dir})",
        flush=True,
    )

    def _stop(*_):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _stop)
    try:
        server.server_proc.wait()
        return 1  # the server died on its own
    except KeyboardInterrupt:
        return 0
    finally:
        proc = server.server_proc
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                # A clean stop flushes (MilvusServer.stop waits only 1 s); 20 s at most, well
                # inside the 30 s callers give this starter (bench.processes.stop) before SIGKILL,
                # which would leave the server running without it.
                proc.wait(timeout=20)
            except Exception:
                proc.kill()
        server.stop()
        if temporary:
            shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
