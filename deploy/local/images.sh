#!/usr/bin/env bash
# The test servers' images, for testcontainers-go (internal/testsupport)
# and the compose file under podman, built here: no registry is reachable
# on these machines. Each is a root file system of what this machine
# installs (stack.sh install: Debian's Redis and MariaDB, the Kafka jars
# and the JDK), the libraries they link, and deploy/local/images/entrypoint,
# which reads the environment the public images read. Tagged
# localhost/seckill-test/<server>:<hash of their content>, built once per
# content.
#
#   images.sh build   build the images that are missing, then print their
#                     SECKILL_TEST_*_IMAGE variables
#   images.sh env     print the variables (the names for this content)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
STACK_DIR=${SECKILL_STACK_DIR:-$repo/.stack}
kafka_libs=$STACK_DIR/kafka/libs
GO=${GO:-go}

say() { echo "images: $*" >&2; }
die() { say "$*"; exit 1; }

java_home() { dirname "$(dirname "$(readlink -f "$(command -v java)")")"; }

# inputs SERVER: what its image is made of, as text to hash: this script,
# the entrypoint, the server's binaries and jars.
inputs() {
  cat "$here/images.sh" "$here/images/entrypoint/main.go"
  case $1 in
    redis) sha256sum /usr/bin/redis-server ;;
    mariadb) sha256sum /usr/sbin/mariadbd /usr/bin/mariadb-install-db ;;
    kafka) (cd "$kafka_libs" && sha256sum ./*) && sha256sum "$(java_home)/lib/modules" ;;
  esac
}

image_name() { echo "localhost/seckill-test/$1:$(inputs "$1" | sha256sum | cut -c1-12)"; }

check() {
  local c
  for c in podman redis-server mariadbd mariadb-install-db java ldd "$GO"; do
    command -v "$c" > /dev/null || die "$c is not installed: deploy/local/stack.sh install"
  done
  [ -d "$kafka_libs" ] || die "no Kafka jars in $kafka_libs: deploy/local/stack.sh install"
}

# add_libs ROOT FILE...: the shared libraries FILEs link, at their paths.
add_libs() {
  local root=$1 lib
  shift
  for lib in $(ldd "$@" 2>/dev/null | awk '/=> \// { print $3 } /^[ \t]*\/[^ ]+ \(/ { print $1 }' | sort -u); do
    [ -e "$root$lib" ] || cp --parents -L "$lib" "$root"
  done
}

# base ROOT: what every image has: the entrypoint, users, /tmp.
base() {
  local root=$1
  mkdir -p "$root/etc" "$root/tmp"
  chmod 1777 "$root/tmp"
  printf 'root:x:0:0:root:/root:/nonexistent\nmysql:x:999:999:mysql:/var/lib/mysql:/nonexistent\n' > "$root/etc/passwd"
  printf 'root:x:0:\nmysql:x:999:\n' > "$root/etc/group"
  (cd "$repo" && CGO_ENABLED=0 "$GO" build -trimpath -ldflags "-s -w" -o "$root/entrypoint" ./deploy/local/images/entrypoint)
}

build_redis() {
  local root=$1
  cp --parents /usr/bin/redis-server "$root"
  add_libs "$root" /usr/bin/redis-server
  mkdir -p "$root/data"
  cat > "$root/Containerfile" <<'EOF'
FROM scratch
COPY . /
WORKDIR /data
EXPOSE 6379
ENTRYPOINT ["/entrypoint", "redis"]
CMD ["redis-server"]
EOF
}

build_mariadb() {
  local root=$1
  cp --parents /usr/sbin/mariadbd "$root"
  cp -r --parents /usr/share/mysql /usr/lib/mysql/plugin "$root"
  add_libs "$root" /usr/sbin/mariadbd
  mkdir -p "$root/etc/mysql/conf.d" "$root/docker-entrypoint-initdb.d"
  # The server's default file reads the files a user mounts, as the
  # public images' do.
  printf '[mysqld]\n!includedir /etc/mysql/conf.d/\n' > "$root/etc/mysql/my.cnf"
  # The system tables, made here: the image holds no shell to run
  # mariadb-install-db in.
  mariadb-install-db --no-defaults --datadir="$root/var/lib/mysql" --user=root --auth-root-authentication-method=normal \
    --skip-test-db > "$root/install-db.log" 2>&1 || { cat "$root/install-db.log" >&2; die "mariadb-install-db failed"; }
  rm -f "$root/install-db.log"
  cat > "$root/Containerfile" <<'EOF'
FROM scratch
COPY . /
EXPOSE 3306
ENTRYPOINT ["/entrypoint", "mariadb"]
EOF
}

build_kafka() {
  local root=$1 java
  java=$(java_home)
  mkdir -p "$root/opt/java/bin" "$root/opt/kafka"
  cp -L "$java/bin/java" "$root/opt/java/bin/"
  # Dereferenced (Debian links the configuration from /etc), without the
  # sources' link, which points at a package not installed.
  tar -C "$java" -chf - --exclude=lib/src.zip lib conf release | tar -C "$root/opt/java" -xf -
  add_libs "$root" "$java/bin/java" $(find "$java/lib" -name '*.so')
  cp -r "$kafka_libs" "$root/opt/kafka/libs"
  cat > "$root/opt/kafka/log4j.properties" <<'EOF'
log4j.rootLogger=INFO, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.controller=INFO
log4j.logger.state.change.logger=WARN
EOF
  cat > "$root/Containerfile" <<'EOF'
FROM scratch
COPY . /
EXPOSE 9092
ENTRYPOINT ["/entrypoint", "kafka"]
EOF
}

build() {
  local server name root
  check
  for server in redis mariadb kafka; do
    name=$(image_name "$server")
    if podman image exists "$name"; then continue; fi
    say "building $name from this machine's $server"
    root=$(mktemp -d)
    base "$root"
    "build_$server" "$root"
    podman build -q -f "$root/Containerfile" -t "$name" "$root" > /dev/null || { rm -rf "$root"; die "podman build of $name failed"; }
    rm -rf "$root"
    # The same server's images of earlier content go.
    podman images --format '{{.Repository}}:{{.Tag}}' "localhost/seckill-test/$server" | grep -vx "$name" \
      | xargs -r podman rmi -f > /dev/null 2>&1 || true
  done
  print_env
}

print_env() {
  echo "SECKILL_TEST_REDIS_IMAGE=$(image_name redis)"
  echo "SECKILL_TEST_MYSQL_IMAGE=$(image_name mariadb)"
  echo "SECKILL_TEST_KAFKA_IMAGE=$(image_name kafka)"
}

case "${1:-}" in
  build) build ;;
  env) check; print_env ;;
  *) echo "usage: $0 build|env" >&2; exit 2 ;;
esac
