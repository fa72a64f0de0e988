#!/usr/bin/env bash
# Installs what pier needs from Debian's packages and prepares the host. Idempotent:
# a second run installs nothing and changes nothing.
#   - PostgreSQL server binaries and psql: the embedded state store and managed databases
#   - redis-server and redis-tools (redis-check-aof, redis-cli): managed Redis databases
#   - openssl: the platform CA that signs the databases' TLS certificates
#   - openssh-client: ssh-keygen, used by the tests to make real SSH keys
#   - awscli and s3cmd: S3 clients nobody here wrote, which the bucket tests drive
#   - btrfs-progs: the storage pool (subvolumes, snapshots, quotas) for databases and volumes
#   - nftables: the walls around machines (between organizations, to the host, egress, NAT)
#   - runc and tini: machines (OCI runtime, pid 1 of each); runsc: gVisor, the stronger
#     sandbox an operator may choose for them; busybox-static and docker-registry: the machine
#     tests build small images and serve them from a real local OCI registry
#   - buildah: builds of apps' sources (Dockerfiles), run isolated like machines (runc,
#     the machines' user namespace and seccomp profile, no network, cgroup caps)
#   - chromium: the console's end-to-end tests drive Debian's browser with playwright-core
#   - pebble: the edge tests issue real certificates through ACME against Debian's test CA
#   - the unprivileged `pier` service user that runs the embedded store (each managed
#     database gets a system user of its own, `pierdb-…`, which pier makes when needed)
set -euo pipefail

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

need=()
compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null || need+=(postgresql)
command -v psql >/dev/null || need+=(postgresql-client)
command -v redis-server >/dev/null || need+=(redis-server)
command -v redis-check-aof >/dev/null || need+=(redis-tools)
command -v openssl >/dev/null || need+=(openssl)
command -v ssh-keygen >/dev/null || need+=(openssh-client)
command -v aws >/dev/null || need+=(awscli)
command -v s3cmd >/dev/null || need+=(s3cmd)
# Machines run through runc (OCI), under tini as their pid 1.
[ -x /usr/sbin/runc ] || command -v runc >/dev/null || need+=(runc)
[ -x /usr/bin/tini-static ] || need+=(tini)
# gVisor, the stronger sandbox an operator may choose (PIER_MACHINE_RUNTIME=runsc).
[ -x /usr/bin/runsc ] || command -v runsc >/dev/null || need+=(runsc)
# nft lives in sbin, which a non-root PATH may lack: look for the file itself.
[ -x /usr/sbin/nft ] || [ -x /sbin/nft ] || need+=(nftables)
[ -x /bin/busybox ] || need+=(busybox-static)
[ -x /usr/bin/docker-registry ] || need+=(docker-registry)
# Builds: Debian's buildah (1.28) builds Dockerfiles; pier runs it (src/runtime/builds/).
[ -x /usr/bin/buildah ] || need+=(buildah)
[ -x /usr/bin/chromium ] || need+=(chromium)
[ -x /usr/bin/pebble ] || need+=(pebble)
# mkfs.btrfs lives in sbin, which a non-root PATH may lack: look for the file itself.
[ -x /usr/sbin/mkfs.btrfs ] || [ -x /sbin/mkfs.btrfs ] || need+=(btrfs-progs)

if [ ${#need[@]} -gt 0 ]; then
  echo "setup: installing ${need[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}"
fi

if [ "$(id -u)" -eq 0 ] && ! id pier >/dev/null 2>&1; then
  useradd --system --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin pier
fi
echo "setup: ready"
