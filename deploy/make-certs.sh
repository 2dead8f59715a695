#!/usr/bin/env bash
# Makes a cluster CA and a certificate + key per host for psched's mutual TLS, with the openssl CLI.
set -euo pipefail

usage() {
  cat <<USAGE
usage: $(basename "$0") [OPTIONS] DIR NAME...

Creates DIR/ca.pem and DIR/ca.key (the cluster CA; reused when DIR already has them) and, for each
NAME (a host name, an IP address, or a role such as "client"), DIR/NAME.pem and DIR/NAME.key: a
certificate signed by the CA for NAME (subject CN=NAME, subjectAltName NAME), EC P-256 keys.
Keys are mode 600, certificates 644, DIR 700. Give every process the CA and its own pair:
  psched --tls-ca-file DIR/ca.pem --tls-cert DIR/head01.pem --tls-key DIR/head01.key
  pcuda-worker tls://head01:8786 --tls-ca-file DIR/ca.pem --tls-cert DIR/node01.pem --tls-key DIR/node01.key
Keep DIR/ca.key off the cluster once the certificates are made: whoever holds it can join.

Options:
  --days N            validity of the host certificates in days (default 365)
  --ca-days N         validity of a new CA in days (default 3650)
  --not-before STAMP  host certificates valid from STAMP (YYYYMMDDHHMMSSZ; default now)
  --not-after STAMP   host certificates valid until STAMP (overrides --days; tests make expired ones)
USAGE
}

die() { echo "make-certs.sh: $*" >&2; exit 2; }

days=365 ca_days=3650 not_before="" not_after=""
positional=()
while (($#)); do
  case "$1" in
    -h | --help) usage; exit 0 ;;
    --days) days=${2:?--days needs a value}; shift 2 ;;
    --ca-days) ca_days=${2:?--ca-days needs a value}; shift 2 ;;
    --not-before) not_before=${2:?--not-before needs a value}; shift 2 ;;
    --not-after) not_after=${2:?--not-after needs a value}; shift 2 ;;
    -*) die "unknown option $1 (see --help)" ;;
    *) positional+=("$1"); shift ;;
  esac
done
((${#positional[@]} >= 2)) || die "give a directory and at least one NAME (see --help)"
[[ $days =~ ^[1-9][0-9]*$ ]] || die "--days must be a positive integer (got '$days')"
[[ $ca_days =~ ^[1-9][0-9]*$ ]] || die "--ca-days must be a positive integer (got '$ca_days')"
for stamp in "$not_before" "$not_after"; do
  [[ -z $stamp || $stamp =~ ^[0-9]{14}Z$ ]] || die "dates are YYYYMMDDHHMMSSZ (got '$stamp')"
done
command -v openssl >/dev/null || die "openssl not found (apt-get install openssl)"

dir=${positional[0]}
names=("${positional[@]:1}")
for name in "${names[@]}"; do
  [[ $name =~ ^[A-Za-z0-9._:-]+$ && $name != ca ]] || die "bad NAME '$name' (letters, digits, . _ : -; not 'ca')"
done
umask 077
mkdir -p "$dir"
chmod 700 "$dir"

if [[ -e $dir/ca.pem || -e $dir/ca.key ]]; then
  [[ -r $dir/ca.pem && -r $dir/ca.key ]] || die "$dir has only part of a CA (ca.pem and ca.key go together)"
else
  openssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -sha256 \
    -days "$ca_days" -subj "/CN=psched cluster CA $(date -u +%Y%m%d%H%M%S)" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -keyout "$dir/ca.key" -out "$dir/ca.pem" 2>/dev/null || die "cannot create the CA in $dir"
  chmod 600 "$dir/ca.key"
  chmod 644 "$dir/ca.pem"
  echo "CA: $dir/ca.pem (key $dir/ca.key)"
fi

# openssl ca signs with explicit dates (openssl x509 cannot set a past notAfter); its bookkeeping
# lives in a temporary directory.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
: >"$work/index.txt"
cat >"$work/ca.cnf" <<CNF
[ca]
default_ca = cluster
[cluster]
database = $work/index.txt
new_certs_dir = $work
certificate = $dir/ca.pem
private_key = $dir/ca.key
rand_serial = yes
default_md = sha256
policy = anything
unique_subject = no
copy_extensions = none
[anything]
commonName = supplied
CNF

for name in "${names[@]}"; do
  if [[ $name =~ ^[0-9.]+$ || $name == *:* ]]; then san="IP:$name"; else san="DNS:$name"; fi
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=$name" \
    -keyout "$dir/$name.key" -out "$work/$name.csr" 2>/dev/null || die "cannot create a key for $name"
  cat >"$work/$name.ext" <<EXT
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature,keyEncipherment
extendedKeyUsage = serverAuth,clientAuth
subjectAltName = $san
EXT
  dates=(-days "$days")
  [[ -n $not_before ]] && dates+=(-startdate "$not_before")
  [[ -n $not_after ]] && dates=(-enddate "$not_after" "${dates[@]:2}")
  openssl ca -batch -notext -config "$work/ca.cnf" -extfile "$work/$name.ext" "${dates[@]}" \
    -in "$work/$name.csr" -out "$dir/$name.pem" 2>"$work/err" ||
    die "cannot sign the certificate of $name: $(tail -n 1 "$work/err")"
  chmod 600 "$dir/$name.key"
  chmod 644 "$dir/$name.pem"
  echo "$name: $dir/$name.pem (key $dir/$name.key)"
done
