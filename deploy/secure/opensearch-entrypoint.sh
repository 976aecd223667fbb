#!/bin/bash
# The secured OpenSearch's entrypoint (deploy/docker-compose.secure.yml): writes the internal
# users, with passwords hashed from the environment, then runs the image's own entrypoint.
# The security index is built from these files on the first start only (see opensearch.yml).
set -euo pipefail
cd /usr/share/opensearch

bcrypt() {  # bcrypt of the password in the environment variable $1; the password never reaches argv
    local hashed
    hashed=$(plugins/opensearch-security/tools/hash.sh -env "$1" | tail -n 1)
    [[ $hashed == \$2* ]] || { echo "could not hash $1" >&2; exit 1; }
    printf '%s' "$hashed"
}

admin_hash=$(bcrypt OPENSEARCH_INITIAL_ADMIN_PASSWORD)
service_hash=$(bcrypt ANSWERBOX_SERVICE_PASSWORD)
cat > config/opensearch-security/internal_users.yml <<USERS
_meta: {type: internalusers, config_version: 2}
admin:
  hash: "$admin_hash"
  backend_roles: [admin]
  description: The cluster's administrator (all_access, see roles_mapping.yml)
answerbox-service:
  hash: "$service_hash"
  description: answerbox's service account (role answerbox_service)
USERS
# OpenSearch itself needs neither password.
unset OPENSEARCH_INITIAL_ADMIN_PASSWORD ANSWERBOX_SERVICE_PASSWORD
exec ./opensearch-docker-entrypoint.sh opensearch
