#!/bin/bash
# Certificates for trying the secured stack on one machine: a fresh local CA, OpenSearch's
# node certificate (named "opensearch" and "localhost") and an admin certificate for
# securityadmin.sh. For local use only; with a real CA, put its files in a folder of your own
# with the same names and point OPENSEARCH_CERTS at it (see deploy/ADMIN.md).
#
#   bash deploy/secure/make-certs.sh [folder]     # default: deploy/secure/certs (git-ignored)
set -euo pipefail
out=${1:-"$(dirname "$0")/certs"}
days=${CERT_DAYS:-365}
if [[ -e $out/root-ca.pem ]]; then
    echo "$out/root-ca.pem exists; remove the folder to make new certificates" >&2
    exit 1
fi
mkdir -p "$out"
cd "$out"
umask 077
ext=$(mktemp)
trap 'rm -f "$ext" ./*.csr' EXIT

key() { openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$1" 2>/dev/null; }  # PKCS#8

key root-ca.key
openssl req -x509 -new -key root-ca.key -out root-ca.pem -days "$days" -subj "/OU=answerbox/CN=answerbox local CA" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"

sign() {  # sign NAME SUBJECT EXTENSIONS: NAME.pem and NAME-key.pem, signed by the CA
    key "$1-key.pem"
    openssl req -new -key "$1-key.pem" -out "$1.csr" -subj "$2"
    printf '%s\n' "basicConstraints=CA:FALSE" "keyUsage=critical,digitalSignature,keyEncipherment" \
        "subjectKeyIdentifier=hash" "authorityKeyIdentifier=keyid" "$3" > "$ext"
    openssl x509 -req -in "$1.csr" -CA root-ca.pem -CAkey root-ca.key -set_serial "0x$(openssl rand -hex 16)" \
        -days "$days" -sha256 -extfile "$ext" -out "$1.pem" 2>/dev/null
}

# Subjects as OpenSearch reads them: CN=opensearch,OU=answerbox and CN=admin,OU=answerbox,
# the defaults of OPENSEARCH_NODE_DN and OPENSEARCH_ADMIN_DN in docker-compose.secure.yml.
sign node "/OU=answerbox/CN=opensearch" \
    "$(printf '%s\n' "extendedKeyUsage=serverAuth,clientAuth" "subjectAltName=DNS:opensearch,DNS:localhost,IP:127.0.0.1")"
sign admin "/OU=answerbox/CN=admin" "extendedKeyUsage=clientAuth"

# OpenSearch runs as uid 1000 in its container and must read its key; the CA's and the
# admin's keys stay with you (neither is mounted into a container).
chmod 644 root-ca.pem node.pem admin.pem node-key.pem
echo "wrote $(pwd): root-ca.pem, node.pem, node-key.pem (mounted); admin.pem, admin-key.pem, root-ca.key (yours)"
