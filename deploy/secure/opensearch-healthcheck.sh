#!/bin/bash
# The secured OpenSearch's healthcheck (deploy/docker-compose.secure.yml): the cluster answers
# over TLS, with the certificate answerbox checks (the name "opensearch", root-ca.pem), logs the
# admin in, and is yellow or green within 5 s.
#
# The admin password never becomes an argument: a process's command line is readable by every
# user of the host (ps, /proc/*/cmdline), the environment only by the container's own. It is
# read from the environment by bash itself and reaches curl on its stdin, as a config file
# (-K -); printf is a builtin, so no other process sees it.
set -euo pipefail

# In a double-quoted config value curl reads \\, \", \n and \r as escapes: escape those.
password=${OPENSEARCH_INITIAL_ADMIN_PASSWORD:?}
password=${password//\\/\\\\}
password=${password//\"/\\\"}
password=${password//$'\n'/\\n}
password=${password//$'\r'/\\r}

printf 'user = "admin:%s"\n' "$password" |
  curl -sSf -K - --cacert config/certs/root-ca.pem --resolve opensearch:9200:127.0.0.1 \
    "https://opensearch:9200/_cluster/health?wait_for_status=yellow&timeout=5s" > /dev/null
