# HAProxy for the compose file's galera profile: Debian's HAProxy image
# with the MariaDB client that its node check (deploy/local/galera-check.sh)
# runs. The stack runs the same check with Debian's packages.
FROM haproxy:2.6
USER root
RUN apt-get update && apt-get install -y --no-install-recommends mariadb-client \
  && rm -rf /var/lib/apt/lists/*
USER haproxy
